#!/usr/bin/env bash
# Builds the stand-in CUDA driver and NVML (crates standin/cuda and standin/nvml: the driver API
# and NVML entry points gpuwmm's cuda backend calls, running kernels on gpuwmm's simulator) and
# lays them out as the loader looks for them:
#   target/standin/libcuda.so.1, libcuda.so, libnvidia-ml.so.1
# Prints the folder. Use it for any command that should run the cuda backend without a GPU:
#   export LD_LIBRARY_PATH="$(scripts/standin.sh)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
#   target/release/gpuwmm devices          # names "gpuwmm stand-in (simulator)"
# or, for one command:  scripts/standin.sh -- gpuwmm-command args...
# Everything run this way is a simulator result, never a GPU result.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p gpuwmm-standin-cuda -p gpuwmm-standin-nvml >&2
dir="$PWD/target/standin"
mkdir -p "$dir"
cp -f target/release/libgpuwmm_standin_cuda.so "$dir/libcuda.so.1"
ln -sf libcuda.so.1 "$dir/libcuda.so"
cp -f target/release/libgpuwmm_standin_nvml.so "$dir/libnvidia-ml.so.1"
if [[ "${1:-}" == "--" ]]; then
    shift
    export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    exec "$@"
fi
echo "$dir"
