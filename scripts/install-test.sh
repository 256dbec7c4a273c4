#!/usr/bin/env bash
# An installed gpuwmm works with its source tree deleted and writes nothing where it was
# (issue 28): copies the working tree (tracked and untracked, not ignored files), installs it
# with `cargo install --path`, deletes the copy, and runs the tool from another folder with a
# fresh HOME. The CUDA tools come from this checkout's .cuda-tools (GPUWMM_CUDA_TOOLS), so the
# wheels are not downloaded again; `gpuwmm setup` is the same script (tested on its own).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
log() { printf 'install-test: %s\n' "$*"; }
fail() { printf 'install-test: FAILED: %s\n' "$*" >&2; exit 1; }

mkdir -p "$tmp/src" "$tmp/work" "$tmp/home"
(cd "$repo" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$tmp/src"
log "installing from a copy of the working tree"
# The checkout's target folder keeps the dependencies' builds; the copy's own crates build anew.
CARGO_TARGET_DIR="$repo/target" cargo install --quiet --locked --path "$tmp/src" --root "$tmp/root"
rm -rf "$tmp/src"

gpuwmm() {
    (cd "$tmp/work" && env -u GPUWMM_CACHE_DIR -u GPUWMM_PROFILE_DIR -u XDG_CACHE_HOME \
        -u XDG_DATA_HOME HOME="$tmp/home" GPUWMM_CUDA_TOOLS="$repo/.cuda-tools" \
        "$tmp/root/bin/gpuwmm" "$@")
}
gpuwmm --version | grep -q '^gpuwmm ' || fail "--version"
gpuwmm apps >/dev/null || fail "apps"
gpuwmm check cbe-dot --backend sim --runs 20 || fail "check cbe-dot"
gpuwmm harden sdk-red-nf --backend sim --stable-runs 30 --iterations 8 --jobs 1 \
    --minimise-kind off >"$tmp/harden.txt" || fail "harden sdk-red-nf"
grep -q 'sdk-red' "$tmp/harden.txt" || fail "harden printed no report"
gpuwmm completions bash | grep -q '_gpuwmm' || fail "completions"
gpuwmm man | grep -q '^.TH gpuwmm' || fail "man"

[[ ! -e "$tmp/src" ]] || fail "something was written where the source copy was: $(find "$tmp/src" | head)"
[[ -n "$(ls -A "$tmp/home/.cache/gpuwmm/ptx" 2>/dev/null)" ]] || fail "no PTX cache in ~/.cache/gpuwmm/ptx"
[[ -d "$tmp/work/results/check" ]] || fail "no results under the current folder"
log "ok: installed binary ran apps, check, harden, completions and man with its source deleted"
