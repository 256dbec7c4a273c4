#!/usr/bin/env bash
# The cuda backend end to end on the stand-in driver (scripts/standin.sh): the GPU tests with
# GPUWMM_REQUIRE_GPU=1 (none may skip), then `gpuwmm check cbe-dot --backend cuda --env sys-str+`
# with one injected fault and one injected hang (the journal must record a crash, a timeout and
# every run), then `gpuwmm harden cbe-dot --backend cuda`, then `gpuwmm cost cbe-dot --backend
# cuda` with energy windows on the stand-in NVML counter. Small settings, so CI stays fast.
# Every figure printed here is a simulator result through the stand-in, not a GPU result.
# PART="tests check harden cost" picks parts.
set -euo pipefail
cd "$(dirname "$0")/.."
PART="${PART:-tests check harden cost}"
standin="$(scripts/standin.sh)"
export LD_LIBRARY_PATH="$standin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GPUWMM_REQUIRE_GPU=1 GPUWMM_REQUIRE_TOOLS=1
cargo build --release --locked >&2
gpuwmm=target/release/gpuwmm
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Read the whole listing first: `grep -q` in a pipe may exit before gpuwmm has printed it all, and
# the broken pipe then fails the pipeline under pipefail (a flaky CI failure, seen once).
devices="$("$gpuwmm" devices)"
grep -q 'cuda:0: gpuwmm stand-in (simulator)' <<<"$devices" || {
    echo "the stand-in driver was not picked up from $standin" >&2
    exit 1
}

if [[ " $PART " == *" tests "* ]]; then
    echo "== GPU tests on the stand-in driver"
    cargo test --release --locked -p gpuwmm-standin-cuda -p gpuwmm-standin-nvml
    cargo test --release --locked --test cuda_backend --test apps_gpu --test check_gpu
fi

# Counts the journal rows (header excluded) whose outcome column equals $2.
outcomes() {
    python3 - "$1" "$2" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(sum(1 for r in rows if r["outcome"] == sys.argv[2]) if sys.argv[2] != "*" else len(rows))
PY
}

if [[ " $PART " == *" check "* ]]; then
    echo "== gpuwmm check cbe-dot --backend cuda --env sys-str+, launch 40 faults and launch 48 hangs (stand-in)"
    runs=24
    GPUWMM_STANDIN_INJECT="fault@40,hang@48" GPUWMM_STANDIN_COUNTER="$work/launches" \
        "$gpuwmm" check cbe-dot --backend cuda --env sys-str+ --size sim --runs "$runs" \
        --deadline 2s --seed 1 --journal "$work/check.csv"
    total="$(outcomes "$work/check.csv" '*')"
    crashes="$(outcomes "$work/check.csv" crash)"
    timeouts="$(outcomes "$work/check.csv" timeout)"
    echo "stand-in check: $total runs, $crashes crash, $timeouts timeout, $(cat "$work/launches") launches"
    if [[ "$total" != "$runs" || "$crashes" -lt 1 || "$timeouts" -lt 1 ]]; then
        echo "expected $runs runs with at least one crash and one timeout" >&2
        exit 1
    fi
fi

if [[ " $PART " == *" harden "* ]]; then
    echo "== gpuwmm harden cbe-dot --backend cuda (stand-in)"
    "$gpuwmm" harden cbe-dot --backend cuda --size sim --stable-runs 20 --iterations 2 \
        --seed 1 --journal "$work/harden.csv"
fi
if [[ " $PART " == *" cost "* ]]; then
    echo "== gpuwmm cost cbe-dot --backend cuda, energy from the stand-in NVML counter (stand-in)"
    "$gpuwmm" cost cbe-dot --backend cuda --size sim --variants no,cons --runs 30 --warmup 2 \
        --windows 2 --window-time 1s --window-runs 8 --seed 1 --out "$work/cost"
    python3 - "$work/cost/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["time_method"] == "cuda-events", s["time_method"]
assert s["energy_method"]["method"] == "counter", s["energy_method"]
for v in s["apps"][0]["variants"]:
    assert v["windows"] == 2 and v["energy_mj"]["median"] > 0, v
    assert 45_000 < v["idle_mw"] < 55_000, v["idle_mw"]  # the stand-in idles at 50 W
print("stand-in cost: CUDA-event times and counter energy for", [v["variant"] for v in s["apps"][0]["variants"]])
PY
fi
echo "stand-in CI: all parts passed (simulator results through the stand-in driver, not a GPU)"
