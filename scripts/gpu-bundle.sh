#!/usr/bin/env bash
# Build everything a GPU machine without a Rust toolchain needs to validate gpuwmm, into the
# git-ignored folder .gpu-bundle/ (about 40 MiB, stripped):
#
#   .gpu-bundle/bin/gpuwmm                      the release binary
#   .gpu-bundle/bin/{cuda_backend,apps_gpu,check_gpu}   the GPU test binaries
#   .gpu-bundle/BUILD                           commit, build directory, date (read by gpu-validate.sh)
#   .gpu-bundle/litmus-ptx/                     the PTX conformance suite from ../shared/litmus/ptx
#                                               (the device machine gets the checkout, not ../shared)
#
# The lent GPU machines here have a CUDA toolkit (NVRTC) and a driver but no cargo, so build here
# and carry the folder:  scripts/gpu-bundle.sh, then on the GPU machine
# `scripts/gpu-validate.sh` (it finds the bundle by itself). See README, "Validating on a GPU".
set -euo pipefail
cd "$(dirname "$0")/.."
readonly GPU_TESTS=(cuda_backend apps_gpu check_gpu)
bundle=.gpu-bundle

cargo build --release --locked
test_args=()
for t in "${GPU_TESTS[@]}"; do test_args+=(--test "$t"); done
# One JSON line per built artifact; the test executables are the ones with "executable" set.
executables="$(cargo test --release --locked --no-run "${test_args[@]}" --message-format=json \
    | python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["profile"]["test"]:
        print(msg["target"]["name"], msg["executable"])
')"

rm -rf "$bundle"
mkdir -p "$bundle/bin"
cp target/release/gpuwmm "$bundle/bin/gpuwmm"
while read -r name path; do
    cp "$path" "$bundle/bin/$name"
done <<< "$executables"
for t in gpuwmm "${GPU_TESTS[@]}"; do
    [[ -x "$bundle/bin/$t" ]] || { echo "gpu-bundle: $t was not built" >&2; exit 1; }
    strip "$bundle/bin/$t"
done
suite=../shared/litmus/ptx
if [[ -d "$suite/tests" ]]; then
    mkdir -p "$bundle/litmus-ptx"
    cp -r "$suite/tests" "$suite/expected.csv" "$bundle/litmus-ptx/"
else
    echo "gpu-bundle: no $suite beside the checkout; PART=conformance will have no suite" >&2
fi
{
    echo "commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes')"
    # The test binaries have this directory compiled in (CARGO_MANIFEST_DIR, CARGO_BIN_EXE_*);
    # gpu-validate.sh links it to wherever the repository lies on the GPU machine.
    echo "build_dir=$PWD"
    echo "built=$(date -u +%Y-%m-%dT%H:%MZ)"
} > "$bundle/BUILD"
du -sh "$bundle"
cat "$bundle/BUILD"
