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
if [ "$(id -u)" = 0 ]; then
    bash scripts/slurm-local.sh
    export GPUWMM_REQUIRE_SLURM=1
fi
# The three crates of the workspace; the stand-in crates are tested by standin-ci.sh below.
cargo test --release --locked -p gpuwmm-ptx -p gpuwmm-sim -p gpuwmm "$@"
# An installed binary with its source tree deleted (issue 28).
bash scripts/install-test.sh
# The cuda backend against the stand-in driver (standin/, README "The stand-in driver"): the GPU
# tests with none skipping, a check with an injected fault and hang, and a hardening.
bash scripts/standin-ci.sh
