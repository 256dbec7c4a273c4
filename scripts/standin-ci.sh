#!/usr/bin/env bash
# The cuda backend end to end on the stand-in driver (scripts/standin.sh): the GPU tests with
# GPUWMM_REQUIRE_GPU=1 (none may skip), then `gpuwmm check cbe-dot --backend cuda --env sys-str+`
# with one injected fault and one injected hang (the journal must record a crash, a timeout and
# every run), then `gpuwmm harden cbe-dot --backend cuda` and `harden slot-recycler-volatile
# --backend cuda` (races recorded on the simulator: both fences, GPU scope), then `gpuwmm cost
# cbe-dot --backend cuda` with energy windows on the stand-in NVML counter. Small settings, so CI
# stays fast.
# Every figure printed here is a simulator result through the stand-in, not a GPU result.
# PART="tests litmus check harden cost" picks parts; `litmus` runs three litmus files with the
# second one's (sorted by name) launch faulting: the run must report the fault and go on in a new
# worker process (on an H100 a fault ends CUDA for the whole process, and the stand-in does the
# same; one faulting litmus kernel once made every later test "not comparable").
set -euo pipefail
cd "$(dirname "$0")/.."
PART="${PART:-tests litmus check harden cost}"
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

if [[ " $PART " == *" litmus "* ]]; then
    echo "== gpuwmm litmus run --backend cuda, the second test's launch faults (stand-in)"
    mkdir -p "$work/litmus"
    for t in MP+membar.gl SB+membar.sys MP+volatile; do cp "tests/litmus/$t.litmus" "$work/litmus/"; done
    GPUWMM_STANDIN_INJECT="fault@2" "$gpuwmm" litmus run "$work/litmus" --backend cuda \
        --executions 64 --instances 64 --seed 1 --expect tests/litmus/expected.csv \
        --csv "$work/litmus.csv" | tee "$work/litmus.txt"
    python3 - "$work/litmus.csv" <<'PY'
import csv, sys
rows = {r["test"].rsplit("/", 1)[-1]: r for r in csv.DictReader(open(sys.argv[1]))}
faulted = rows["MP+volatile.litmus"]
assert faulted["verdict"] == "not comparable" and "kernel fault" in faulted["reason"], faulted
for name in ("MP+membar.gl.litmus", "SB+membar.sys.litmus"):
    assert rows[name]["verdict"].startswith("ok") and rows[name]["executions"] == "64", rows[name]
print("stand-in litmus: the faulting test is reported, the tests after it ran in a new worker")
PY
    echo "== the same, journaled: the faulting test is not journaled, and a resume runs only it"
    GPUWMM_STANDIN_INJECT="fault@2" "$gpuwmm" litmus run "$work/litmus" --backend cuda \
        --executions 64 --instances 64 --seed 1 --journal "$work/litmus-journal.csv" >/dev/null
    [[ "$(outcomes "$work/litmus-journal.csv" '*')" == 2 ]] || {
        echo "the journal should hold the two tests that ran" >&2
        exit 1
    }
    resumed="$("$gpuwmm" litmus run "$work/litmus" --backend cuda --executions 64 --instances 64 \
        --seed 1 --expect tests/litmus/expected.csv --journal "$work/litmus-journal.csv" --resume)"
    grep -q '^3 tests: ok 3, UNSOUND 0' <<<"$resumed" &&
        [[ "$(grep -c '^(from the journal) ' <<<"$resumed")" == 2 ]] || {
        echo "the resumed run should print two tests from the journal and run the third: $resumed" >&2
        exit 1
    }
    echo "stand-in litmus: a journaled run on the worker path resumes with only the faulted test"
fi

if [[ " $PART " == *" check "* ]]; then
    echo "== gpuwmm check cbe-dot --backend cuda --env sys-str+, launch 30 faults and launch 38 hangs (calibration takes about 21) (stand-in)"
    runs=24
    GPUWMM_STANDIN_INJECT="fault@30,hang@38" GPUWMM_STANDIN_COUNTER="$work/launches" \
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
    echo "== gpuwmm harden slot-recycler-volatile --backend cuda: races recorded on the simulator (stand-in)"
    fixture=tests/fixtures/apps/slot-recycler-volatile
    "$gpuwmm" harden slot-recycler-volatile --app-dir "$fixture" --backend cuda --size sim \
        --stable-runs 200 --minimise-kind on --seed 1 --journal "$work/harden-races.csv" \
        --json >"$work/harden-races-report.json"
    python3 - "$work/harden-races-report.json" "$fixture/kernel.cu" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
lines = open(sys.argv[2]).read().splitlines()
line = lambda needle: next(i + 1 for i, l in enumerate(lines) if needle in l)
expected = {line("while (freed[i] == 0)"), line("int value = slot[i];")}
assert d["communication"] == "communication recorded on the simulator (PTX model), runs on cuda", d["communication"]
fences = {f["line"]: f["kind"] for f in d["fences"]}
assert set(fences) == expected and set(fences.values()) == {"fence.acq_rel.gpu"}, fences
print("stand-in harden: the spin's acquire and the read's release kept at GPU scope, from races recorded on the simulator")
PY
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
