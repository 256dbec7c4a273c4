#!/usr/bin/env bash
# The main job, from a fresh checkout: install the CUDA tools if needed, build, and run gpuwmm on
# the GPU if there is one, else on the simulator (results from the simulator say so).
#
# It lists the devices, shows where fences could go in cbe-dot, runs the MP litmus test without
# and with fences, checks cbe-dot under sys-str+, and hardens it (the fences it needs and their
# weakest kinds, as source lines and a patch), then measures what those fences cost against none
# and a fence after every access. Journals go to results/main-job/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-cuda-tools.sh
cargo build --release --locked
gpuwmm=target/release/gpuwmm
seed="${GPUWMM_SEED:-1}"

echo "== devices"
"$gpuwmm" devices
echo
echo "== fence sites of cbe-dot"
"$gpuwmm" ptx sites apps/cbe-dot/kernel.cu
echo
echo "== MP litmus, no fences (seed $seed)"
"$gpuwmm" litmus mp --iterations 10000 --seed "$seed"
echo
echo "== MP litmus, fence.sc.gpu in both threads (seed $seed)"
"$gpuwmm" litmus mp --iterations 10000 --seed "$seed" --fence-t0 fence.sc.gpu --fence-t1 fence.sc.gpu
echo
echo "== check cbe-dot under sys-str+ (seed $seed)"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
"$gpuwmm" check cbe-dot --env sys-str+ --runs 1000 --seed "$seed" \
    --journal "results/main-job/check-cbe-dot-$stamp.csv"
echo
echo "== harden cbe-dot (seed $seed)"
"$gpuwmm" harden cbe-dot --seed "$seed" --stable-runs 10000 --journal "results/main-job/harden-cbe-dot-$stamp.csv"
echo
echo "== cost of cbe-dot's fences: none, the ones harden kept, one after every access (seed $seed)"
"$gpuwmm" cost cbe-dot --seed "$seed" --runs 500 \
    --emp "results/main-job/harden-cbe-dot-$stamp.csv" --out "results/main-job/cost-cbe-dot-$stamp"
