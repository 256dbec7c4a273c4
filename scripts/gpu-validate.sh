#!/usr/bin/env bash
# Validation on a real GPU: the GPU tests, MP/SB/LB litmus weak rates, `check` of every app under
# no-str- and sys-str+, and `harden cbe-dot`. What it measures goes to
# results/gpu/<device>-<date>/ (README.md there names the device, driver, date and commit), and,
# where $OUT is set (a lent device machine), also into one tarball under $OUT per call, to unpack
# into results/gpu/ on the machine the repository lives on. Commit that folder.
#
#   scripts/gpu-validate.sh                                  # everything (about 45 minutes)
#   PART="tests litmus harden" scripts/gpu-validate.sh       # some parts (space-separated)
#   PART=check CHECK_APPS="cbe-dot cbe-ht" CHECK_ENVS=no-str- CHECK_DURATION=2m scripts/gpu-validate.sh
#   PART=tune TUNE_TIME=8m scripts/gpu-validate.sh           # stress tuning, resumed call after call
#   PART=cost COST_APPS="cbe-dot sdk-red" scripts/gpu-validate.sh   # fence cost, ~5 minutes an app
#
# Where cargo is missing (the lent machines have a CUDA toolkit and a driver, no Rust), it runs
# the binaries that scripts/gpu-bundle.sh built into .gpu-bundle/; GPUWMM_USE_BUNDLE=1 forces that.
# Settings: PART (tests litmus conformance check harden; default all five), CHECK_FIXTURES (apps of
# tests/fixtures/apps checked 2,000 runs under sys-str+; default the narrow-flag pair), CHECK_APPS (default: every
# built-in app), CHECK_ENVS (default "no-str- sys-str+"), CHECK_DURATION (default 1m per app and
# environment), CHECK_STEP_LIMIT (default 5m: a check step is stopped after it), LITMUS_ITERATIONS
# (default 100000), STABLE_DURATION (harden's stability check, default 3m), BACKEND (default
# cuda; BACKEND=sim dry-runs the litmus, check and harden parts on a machine without a GPU).
# PART=conformance runs the PTX litmus suite (LITMUS_SUITE, default ../shared/litmus/ptx, else
# the bundle's copy) with CONFORMANCE_EXECUTIONS (default 10000) executions a test.
# PART=tune (not in the default) runs `gpuwmm tune` with TUNE_ARGS (default
# a first look far below the paper's budgets) for at most TUNE_TIME (default 8m); its journal is
# resumed by the next call, so a tuning longer than one call goes on where it stopped.
# PART=cost (not in the default) measures `gpuwmm cost` of each app in COST_APPS (default the
# apps with fences to harden: cbe-dot cbe-ht sdk-red cub-scan) for COST_DURATION of timing
# (default 2m) plus its energy windows; `emp` comes from a hardening of the app (its -nf variant
# where there is one) with STABLE_DURATION, made first where none is in the results folder.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
parts="${PART:-tests litmus conformance check harden}"
check_apps="${CHECK_APPS:-cbe-dot cbe-ht ct-octree tpo-tm ls-bh ls-bh-nf sdk-red sdk-red-nf cub-scan cub-scan-nf cccl-scan cccl-scan-nf cccl-scan-rlx}"
check_envs="${CHECK_ENVS:-no-str- sys-str+}"
check_fixtures="${CHECK_FIXTURES:-narrow-flag-relacq narrow-flag-relaxed}"
duration="${CHECK_DURATION:-1m}"
# A check step that overruns this (a hang the run deadline did not catch, a slow calibration:
# tpo-tm under sys-str+ ran 77 s of a 4 s check on an H100, printing nothing) is stopped, and the
# next app runs; its journal resumes on the next call.
check_limit="${CHECK_STEP_LIMIT:-5m}"
litmus_iterations="${LITMUS_ITERATIONS:-100000}"
conformance_executions="${CONFORMANCE_EXECUTIONS:-10000}"
stable="${STABLE_DURATION:-3m}"
tune_args="${TUNE_ARGS:---distances 256 --distance-step 64 --locations 128 --executions 50 --max-sequence 3 --max-spread 8}"
tune_time="${TUNE_TIME:-8m}"
cost_apps="${COST_APPS:-cbe-dot cbe-ht sdk-red cub-scan}"
cost_duration="${COST_DURATION:-2m}"
backend="${BACKEND:-cuda}"
readonly GPU_TESTS=(cuda_backend apps_gpu check_gpu)
export GPUWMM_REQUIRE_GPU=1 GPUWMM_REQUIRE_TOOLS=1

wants() { [[ " $parts " == *" $1 "* ]]; }

# --- binaries: cargo where there is one, else the bundle ------------------------------------
use_bundle() {
    [[ "${GPUWMM_USE_BUNDLE:-}" == 1 ]] || ! command -v cargo >/dev/null
}
if use_bundle; then
    [[ -f .gpu-bundle/BUILD ]] || { echo "no cargo and no .gpu-bundle/: run scripts/gpu-bundle.sh where Rust is, and carry .gpu-bundle" >&2; exit 2; }
    commit="$(sed -n 's/^commit=//p' .gpu-bundle/BUILD)"
    build_dir="$(sed -n 's/^build_dir=//p' .gpu-bundle/BUILD)"
    # The test binaries read the repository (apps, fixtures) and run target/release/gpuwmm at
    # the path they were built in: make that path this repository.
    if [[ ! -e "$build_dir" ]]; then
        mkdir -p "$(dirname "$build_dir")"
        ln -s "$repo" "$build_dir"
    elif [[ "$(cd "$build_dir" && pwd -P)" != "$(pwd -P)" ]]; then
        echo "the bundle was built in $build_dir, which exists here and is not this repository" >&2
        exit 2
    fi
    mkdir -p target/release
    # A gpuwmm left running by an earlier call that timed out holds the old file open
    # ("Text file busy" to cp, seen on an H100): put the new one beside it and rename it over.
    if ! cmp -s .gpu-bundle/bin/gpuwmm target/release/gpuwmm; then
        cp .gpu-bundle/bin/gpuwmm target/release/gpuwmm.new
        mv -f target/release/gpuwmm.new target/release/gpuwmm
    fi
    run_test() { ".gpu-bundle/bin/$1" --nocapture; }
else
    cargo build --release --locked
    commit="$(git rev-parse --short HEAD)"
    run_test() { cargo test --release --locked --test "$1" -- --nocapture; }
fi
gpuwmm="$repo/target/release/gpuwmm"

# --- NVRTC: a toolkit's, else the one Python's nvidia-cuda-nvrtc wheel brought ---------------
if ! "$gpuwmm" ptx sites apps/cbe-dot/kernel.cu >/dev/null 2>&1; then
    tools="$repo/.cache/gpu-tools"
    mkdir -p "$tools/lib" "$tools/bin"
    nvrtc="$(python3 - <<'EOF' || true
import glob, site
for d in site.getsitepackages():
    for p in sorted(glob.glob(d + "/nvidia/cu1*/lib/libnvrtc.so.*")) + sorted(glob.glob(d + "/nvidia/cuda_nvrtc/lib/libnvrtc.so.*")):
        if ".alt." not in p and "builtins" not in p:
            print(p)
            raise SystemExit
EOF
)"
    [[ -n "$nvrtc" ]] || { echo "no NVRTC found; gpuwmm says:" >&2; "$gpuwmm" ptx sites apps/cbe-dot/kernel.cu >&2; exit 2; }
    ln -sf "$(dirname "$nvrtc")"/libnvrtc*.so* "$tools/lib/"
    for t in ptxas cuobjdump nvdisasm; do
        if command -v "$t" >/dev/null; then ln -sf "$(command -v "$t")" "$tools/bin/$t"; fi
    done
    export GPUWMM_CUDA_TOOLS="$tools"
    "$gpuwmm" ptx sites apps/cbe-dot/kernel.cu >/dev/null
fi

# --- where results go ---------------------------------------------------------------------
device="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
slug="$(echo "$device" | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed 's/-$//')"
day="$(date -u +%Y-%m-%d)"
name="$slug-$day"
out="results/gpu/$name"
mkdir -p "$out/check" "$out/harden"
if [[ ! -f "$out/README.md" ]]; then
    {
        echo "# $device, driver $driver, $day"
        echo
        echo "Measured on real hardware by scripts/gpu-validate.sh, gpuwmm at commit $commit."
        echo "Each file is one part's output; check/ and harden/ hold the journals."
        echo
        echo '```'
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
        "$gpuwmm" devices
        echo '```'
    } > "$out/README.md"
fi

pack() {
    [[ -n "${OUT:-}" ]] || return 0
    tar czf "$OUT/$name-$(date -u +%H%M%S).tar.gz" -C results/gpu "$name"
}
trap pack EXIT

# Journals are resumed where they exist, so running a part again continues it.
journal_args() { if [[ -f "$1" ]]; then echo "--journal $1 --resume"; else echo "--journal $1"; fi; }

# step LOG COMMAND...: runs COMMAND with its output shown and kept in $out/LOG; a failure is
# recorded and the next step runs.
failed=()
step() {
    local log="$out/$1"
    shift
    echo "== $* ($(date -u +%H:%M:%S))"
    if ! "$@" 2>&1 | tee "$log"; then
        failed+=("$log")
    fi
}

if wants tests; then
    for t in "${GPU_TESTS[@]}"; do
        step "tests-$t.txt" run_test "$t"
    done
fi
if wants litmus; then
    for test in mp sb lb; do
        step "litmus-$test.txt" "$gpuwmm" litmus "$test" --backend "$backend" \
            --iterations "$litmus_iterations" --instances 64
    done
fi
if wants conformance; then
    # The PTX conformance suite (verdicts under the PTX model): ../shared where the checkout has
    # it beside, else the bundle's copy. UNSOUND rows are bugs of the backend, or of the model.
    suite="${LITMUS_SUITE:-../shared/litmus/ptx}"
    [[ -d "$suite/tests" ]] || suite=.gpu-bundle/litmus-ptx
    step conformance.txt "$gpuwmm" litmus run "$suite/tests" --expect "$suite/expected.csv" \
        --backend "$backend" --executions "$conformance_executions" --csv "$out/conformance.csv"
fi
if wants check; then
    for app in $check_apps; do
        for env in $check_envs; do
            # shellcheck disable=SC2046  # journal_args is two or three words on purpose
            step "check-$app-$env.txt" timeout -k 10 "$check_limit" \
                "$gpuwmm" check "$app" --env "$env" --backend "$backend" --duration "$duration" $(journal_args "$out/check/$app-$env.csv")
        done
    done
fi
if wants check; then
    # Fixtures whose verdict PTX fixes: release/acquire through 1- and 2-byte flags never fails
    # (a failure is a bug of the GPU, the compiler or gpuwmm); the relaxed variant may.
    for app in $check_fixtures; do
        # shellcheck disable=SC2046
        step "check-$app.txt" timeout -k 10 "$check_limit" \
            "$gpuwmm" check "$app" --app-dir "tests/fixtures/apps/$app" --env sys-str+ \
            --backend "$backend" --runs 2000 $(journal_args "$out/check/$app.csv")
    done
fi
if wants harden; then
    # shellcheck disable=SC2046
    step harden-cbe-dot.txt "$gpuwmm" harden cbe-dot --backend "$backend" \
        --stable-duration "$stable" $(journal_args "$out/harden/cbe-dot.csv")
fi
if wants tune; then
    resume=()
    [[ -f "$out/tune/tune.csv" ]] && resume=(--resume)
    # shellcheck disable=SC2086  # tune_args is several words on purpose
    step tune.txt timeout "$tune_time" "$gpuwmm" tune --backend "$backend" $tune_args \
        --out "$out/tune" --profile-out "$out/tune/profile.toml" --force "${resume[@]}"
fi
if wants cost; then
    for app in $cost_apps; do
        hardened="$app"
        [[ "$app" == sdk-red || "$app" == cub-scan ]] && hardened="$app-nf"
        if [[ ! -f "$out/harden/$hardened.json" ]] || ! grep -q '"result"' "$out/harden/$hardened.json"; then
            # shellcheck disable=SC2046
            step "harden-$hardened.txt" "$gpuwmm" harden "$hardened" --backend "$backend" \
                --stable-duration "$stable" $(journal_args "$out/harden/$hardened.csv")
        fi
        resume=()
        [[ -f "$out/cost/$app/cost.csv" ]] && resume=(--resume)
        if grep -q '"stable": true' "$out/harden/$hardened.json" 2>/dev/null; then
            variants=(--emp "$out/harden/$hardened.csv")
        else
            variants=(--variants no,cons)
        fi
        step "cost-$app.txt" "$gpuwmm" cost "$app" --backend "$backend" \
            --duration "$cost_duration" "${variants[@]}" --out "$out/cost/$app" "${resume[@]}"
    done
fi
echo "results in $out"
if (( ${#failed[@]} )); then
    echo "FAILED: ${failed[*]}" | tee -a "$out/failures.txt"
    exit 1
fi
