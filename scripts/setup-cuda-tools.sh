#!/usr/bin/env bash
# Install the CUDA tools gpuwmm needs (NVRTC, ptxas, cuobjdump, nvdisasm, the CCCL headers:
# CUB, libcu++, and the CUDA runtime's device headers: cooperative_groups, cuda_fp16, ...) on a
# machine without a CUDA toolkit, from pinned NVIDIA Python wheels. They run
# on the CPU, so every kernel can be compiled, assembled and disassembled in CI without a GPU
# (see DESIGN.md, "Tests without a GPU").
#
# Usage: scripts/setup-cuda-tools.sh [--force] [--dir DIR]
#
#   --force   install the wheels even when a CUDA toolkit is found, and reinstall them even when
#             .cuda-tools/STAMP says they are already there.
#   --dir DIR install into DIR instead of <repo>/.cuda-tools (`gpuwmm setup` runs this script,
#             which it carries inside the binary, with the folder it chose).
#
# Result: <repo>/.cuda-tools/{bin/{ptxas,cuobjdump,nvdisasm},lib/{libnvrtc.so.12,
# libnvrtc-builtins.so.12.9},include/{cccl,cudart}} as relative symlinks into <repo>/.cuda-tools/py
# (git-ignored).
# gpuwmm finds this folder by itself (src/toolchain/mod.rs).
#
# Environment: PYTHON (default python3) runs pip; pip's own variables (PIP_FIND_LINKS, PIP_INDEX_URL,
# ...) are honoured, so a local wheel folder can be used; by default the wheels come from PyPI.
# The script is idempotent: a second run with everything in place only checks and reports.
set -euo pipefail

# The CCCL wheel (CCCL 2.8.2) is the one released with the 12.9 NVRTC; apps/cccl-scan uses its CUB.
# CUDA 12.9 NVRTC still accepts sm_70 (CUDA 13's does not); cuobjdump/nvdisasm exist only as 13.x.
readonly PINNED_WHEELS=(
    "nvidia-cuda-nvrtc-cu12==12.9.86"
    "nvidia-cuda-nvcc-cu12==12.9.86"
    "nvidia-cuda-cuobjdump==13.4.92"
    "nvidia-cuda-nvdisasm==13.5.37"
    "nvidia-cuda-cccl-cu12==12.9.27"
    "nvidia-cuda-runtime-cu12==12.9.79"
)

# link name -> target inside py/ (relative to .cuda-tools)
readonly LINKS=(
    "bin/ptxas:py/nvidia/cuda_nvcc/bin/ptxas"
    "bin/cuobjdump:py/nvidia/cu13/bin/cuobjdump"
    "bin/nvdisasm:py/nvidia/cu13/bin/nvdisasm"
    "lib/libnvrtc.so.12:py/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"
    "lib/libnvrtc-builtins.so.12.9:py/nvidia/cuda_nvrtc/lib/libnvrtc-builtins.so.12.9"
    "include/cccl:py/nvidia/cuda_cccl/include"
    "include/cudart:py/nvidia/cuda_runtime/include"
)

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_DIR="$REPO_ROOT/.cuda-tools"
PYTHON="${PYTHON:-python3}"
FORCE=0

log() { printf 'setup-cuda-tools: %s\n' "$*"; }
die() { printf 'setup-cuda-tools: error: %s\n' "$*" >&2; exit 1; }

parse_args() {
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --force) FORCE=1 ;;
            --dir)
                [[ $# -ge 2 && -n "$2" ]] || die "--dir needs a folder"
                TOOLS_DIR="$2"
                shift ;;
            -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
            *) die "unknown argument '$1' (try --help)" ;;
        esac
        shift
    done
    mkdir -p "$TOOLS_DIR" || die "cannot create $TOOLS_DIR"
    TOOLS_DIR="$(cd "$TOOLS_DIR" && pwd)"
    STAMP="$TOOLS_DIR/STAMP"
}

# Prints the path of a libnvrtc shared library under toolkit root $1, or nothing.
find_toolkit_nvrtc() {
    local root="$1" dir lib
    for dir in lib64 lib targets/x86_64-linux/lib targets/sbsa-linux/lib; do
        for lib in "$root/$dir"/libnvrtc.so*; do
            [[ -e "$lib" ]] && { printf '%s\n' "$lib"; return 0; }
        done
    done
    return 0
}

# Exits 0 when $CUDA_PATH or /usr/local/cuda holds a usable toolkit (and --force was not given).
check_toolkit() {
    local root nvrtc
    for root in "${CUDA_PATH:-}" /usr/local/cuda; do
        [[ -n "$root" && -d "$root" ]] || continue
        [[ -x "$root/bin/ptxas" && -x "$root/bin/cuobjdump" ]] || continue
        nvrtc="$(find_toolkit_nvrtc "$root")"
        [[ -n "$nvrtc" ]] || continue
        if [[ "$FORCE" == 1 ]]; then
            log "CUDA toolkit found at $root, installing the wheels anyway (--force)"
            return 0
        fi
        log "CUDA toolkit found at $root; nothing to install (use --force to install the wheels)"
        log "ptxas:     $root/bin/ptxas"
        log "cuobjdump: $root/bin/cuobjdump"
        log "nvdisasm:  $( [[ -x "$root/bin/nvdisasm" ]] && echo "$root/bin/nvdisasm" || echo 'not found')"
        log "nvrtc:     $nvrtc"
        log "cudart:    $( [[ -f "$root/include/cooperative_groups.h" ]] && echo "$root/include" || echo 'not found')"
        log "cccl:      $( [[ -d "$root/include/cccl/cub" ]] && echo "$root/include/cccl" \
            || { [[ -d "$root/include/cub" ]] && echo "$root/include" || echo 'not found'; })"
        exit 0
    done
}

stamp_text() { printf '%s\n' "${PINNED_WHEELS[@]}"; }

# True when the stamp records the pinned versions and every link resolves.
up_to_date() {
    [[ -f "$STAMP" ]] || return 1
    [[ "$(cat "$STAMP")" == "$(stamp_text)" ]] || return 1
    local entry
    for entry in "${LINKS[@]}"; do
        [[ -e "$TOOLS_DIR/${entry%%:*}" ]] || return 1
    done
}

# Installs the wheels into a fresh folder, then swaps it in, so a failed pip run leaves no half state.
install_wheels() {
    command -v "$PYTHON" >/dev/null || die "'$PYTHON' not found (set PYTHON to a Python 3 with pip)"
    local staging="$TOOLS_DIR/py.new"
    rm -rf "$staging"
    mkdir -p "$TOOLS_DIR"
    log "installing ${PINNED_WHEELS[*]} into $TOOLS_DIR/py"
    PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install --quiet --no-deps --disable-pip-version-check \
        --target "$staging" "${PINNED_WHEELS[@]}" \
        || { rm -rf "$staging"; die "pip install failed"; }
    rm -rf "$TOOLS_DIR/py" "$STAMP"
    mv "$staging" "$TOOLS_DIR/py"
}

# Makes each link relative to its own folder, so the tree can be moved or mounted elsewhere.
make_links() {
    local entry link target
    mkdir -p "$TOOLS_DIR/bin" "$TOOLS_DIR/lib" "$TOOLS_DIR/include"
    for entry in "${LINKS[@]}"; do
        link="${entry%%:*}"
        target="${entry#*:}"
        [[ -e "$TOOLS_DIR/$target" ]] || die "expected $TOOLS_DIR/$target after install; wheel layout changed?"
        ln -sfn "../$target" "$TOOLS_DIR/$link"
        [[ -e "$TOOLS_DIR/$link" ]] || die "link $TOOLS_DIR/$link does not resolve"
    done
}

report() {
    log "ptxas --version:"
    "$TOOLS_DIR/bin/ptxas" --version
    local entry link
    for entry in "${LINKS[@]}"; do
        link="${entry%%:*}"
        log "$(printf '%-29s -> %s' "$link" "$(readlink -f "$TOOLS_DIR/$link")")"
    done
    log "tools ready in $TOOLS_DIR"
}

main() {
    parse_args "$@"
    check_toolkit
    if [[ "$FORCE" == 0 ]] && up_to_date; then
        log "pinned wheels already installed (STAMP matches); skipping pip"
    else
        install_wheels
    fi
    make_links
    stamp_text >"$STAMP"
    report
}

main "$@"
