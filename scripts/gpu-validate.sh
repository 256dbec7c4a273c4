#!/usr/bin/env bash
# Validation on a real GPU (run it on a machine with an NVIDIA driver; about 30 minutes):
# the GPU tests, MP/SB litmus weak rates, `check` of every app under no-str- and sys-str+, and
# `harden cbe-dot`. Everything it measures goes to results/gpu/<device>-<date>/ with the device,
# driver and date in README.md there; commit that folder.
#
#   CHECK_DURATION=2m scripts/gpu-validate.sh        # the issue's bar: 2 minutes per app and env
#   PART=tests|litmus|check|harden scripts/gpu-validate.sh   # one part only
set -euo pipefail
cd "$(dirname "$0")/.."
gpuwmm=target/release/gpuwmm
duration="${CHECK_DURATION:-2m}"
part="${PART:-all}"
cargo build --release --locked

device="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
slug="$(echo "$device" | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed 's/-$//')"
day="$(date -u +%Y-%m-%d)"
out="results/gpu/$slug-$day"
mkdir -p "$out"
{
    echo "# $device, driver $driver, $day"
    echo
    echo "Measured by scripts/gpu-validate.sh at commit $(git rev-parse --short HEAD)."
} > "$out/README.md"

if [[ "$part" == all || "$part" == tests ]]; then
    GPUWMM_REQUIRE_GPU=1 cargo test --release --locked \
        --test cuda_backend --test apps_gpu --test check_gpu -- --nocapture 2>&1 | tee "$out/tests.txt"
fi
if [[ "$part" == all || "$part" == litmus ]]; then
    for test in mp sb lb; do
        "$gpuwmm" litmus "$test" --backend cuda --iterations 100000 --instances 64 | tee "$out/litmus-$test.txt"
    done
fi
if [[ "$part" == all || "$part" == check ]]; then
    for app in cbe-dot cbe-ht sdk-red sdk-red-nf cub-scan cub-scan-nf; do
        for env in no-str- sys-str+; do
            "$gpuwmm" check "$app" --env "$env" --duration "$duration" --backend cuda \
                --journal "$out/check/$app-$env.csv" | tee "$out/check-$app-$env.txt"
        done
    done
fi
if [[ "$part" == all || "$part" == harden ]]; then
    "$gpuwmm" harden cbe-dot --backend cuda --stable-duration "${STABLE_DURATION:-5m}" \
        --journal "$out/harden/cbe-dot.csv" | tee "$out/harden-cbe-dot.txt"
fi
echo "results in $out"
