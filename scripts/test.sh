#!/usr/bin/env bash
# Runs the whole test suite that needs no GPU. Installs the CUDA tools (NVRTC, ptxas, cuobjdump)
# from pinned wheels first if this machine has no CUDA toolkit; that step is idempotent.
# Tests that need the tools fail (rather than skip) here, because they are required.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-cuda-tools.sh
export GPUWMM_REQUIRE_TOOLS=1
# tests/slurm.rs runs a campaign on a one-node Slurm cluster. As root, start it here (installing
# slurm-wlm and munge where missing), and make the test fail rather than skip if it cannot run.
# The daemons this script starts (those not running before) are stopped when it exits, by the
# process ids it recorded, whatever the tests' outcome.
if [ "$(id -u)" = 0 ]; then
    daemons="munged slurmctld slurmd"
    running_before=""
    for daemon in $daemons; do
        pgrep -x "$daemon" >/dev/null && running_before="$running_before $daemon"
    done
    started_pids=""
    stop_started_daemons() {
        [ -n "$started_pids" ] && kill $started_pids 2>/dev/null || true
    }
    trap stop_started_daemons EXIT
    bash scripts/slurm-local.sh
    for daemon in $daemons; do
        case " $running_before " in
            *" $daemon "*) ;;
            *) started_pids="$started_pids $(pgrep -x "$daemon" | tr '\n' ' ')" ;;
        esac
    done
    export GPUWMM_REQUIRE_SLURM=1
fi
# The three crates of the workspace; the stand-in crates are tested by standin-ci.sh below.
cargo test --release --locked -p gpuwmm-ptx -p gpuwmm-sim -p gpuwmm "$@"
# The benchmarks are run by hand (`cargo bench`), so compile them here: a change to a library
# signature once left two of them unbuildable unnoticed.
cargo build --release --locked --benches -p gpuwmm-ptx -p gpuwmm-sim -p gpuwmm
# The book builds and the README's and book's links resolve.
bash scripts/book.sh
# A short soundness fuzzing round: random litmus tests on the simulator against the axiomatic
# model (fails on a state the model forbids; scripts/fuzz-litmus.py runs longer ones).
fuzz_dir=$(mktemp -d)
python3 scripts/fuzz-litmus.py "$fuzz_dir" --tests 40 --executions 2000 \
    --gpuwmm target/release/gpuwmm
rm -rf "$fuzz_dir"
# An installed binary with its source tree deleted (issue 28).
bash scripts/install-test.sh
# The cuda backend against the stand-in driver (standin/, README "The stand-in driver"): the GPU
# tests with none skipping, a check with an injected fault and hang, and a hardening.
bash scripts/standin-ci.sh
