#!/usr/bin/env bash
# An installed gpuwmm works with its source tree deleted and writes nothing where it was
# (issue 28): copies the working tree (tracked and untracked, not ignored files), installs it
# with `cargo install --path`, deletes the copy, and runs the tool from another folder with a
# fresh HOME. The CUDA tools come from this checkout's .cuda-tools (GPUWMM_CUDA_TOOLS), so the
# wheels are not downloaded again; `gpuwmm setup` is the same script (tested on its own).
# Then the same for `cargo install --git`: the working tree is committed into a temporary git
# repository, installed from its file:// URL with a temporary CARGO_HOME (the registry is this
# machine's, so crates already fetched are not fetched again), both the repository and cargo's
# checkout of it are deleted, and the installed binary runs apps and check from another folder;
# nothing may be written where either was. Both installs share the checkout's target folder for
# the dependencies' builds; gpuwmm's own crates build anew each time (a git source is another
# package to cargo), so a second full build of the tool is what this part costs.
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

# Runs the gpuwmm installed under root $1 in the folder $2, with a home of its own and none of
# the caller's cache or profile folders.
run_installed() {
    local root=$1 work=$2
    shift 2
    (cd "$work" && env -u GPUWMM_CACHE_DIR -u GPUWMM_PROFILE_DIR -u XDG_CACHE_HOME \
        -u XDG_DATA_HOME HOME="$tmp/home" GPUWMM_CUDA_TOOLS="$repo/.cuda-tools" \
        "$root/bin/gpuwmm" "$@")
}
gpuwmm() { run_installed "$tmp/root" "$tmp/work" "$@"; }
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

# ---- cargo install --git ----
mkdir -p "$tmp/gitsrc" "$tmp/cargo-home" "$tmp/work2"
(cd "$repo" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$tmp/gitsrc"
(cd "$tmp/gitsrc" && git init --quiet && git add -A &&
    git -c user.name=install-test -c user.email=install-test@localhost \
        commit --quiet -m "the working tree, for cargo install --git")
commit="$(git -C "$tmp/gitsrc" rev-parse --short=12 HEAD)"
ln -s "${CARGO_HOME:-$HOME/.cargo}/registry" "$tmp/cargo-home/registry"
log "installing with cargo install --git file://$tmp/gitsrc"
CARGO_HOME="$tmp/cargo-home" CARGO_TARGET_DIR="$repo/target" cargo install --quiet --locked \
    --git "file://$tmp/gitsrc" --root "$tmp/root-git" gpuwmm
checkouts="$tmp/cargo-home/git"
[[ -d "$checkouts/checkouts" ]] || fail "cargo install --git left no checkout in $checkouts"
rm -rf "$tmp/gitsrc" "$checkouts"
rm -rf "$tmp/home" && mkdir -p "$tmp/home"

gpuwmm_git() { run_installed "$tmp/root-git" "$tmp/work2" "$@"; }
gpuwmm_git --version | grep -q "^gpuwmm .*$commit" || fail "--version of the --git install names no commit $commit: $(gpuwmm_git --version)"
gpuwmm_git apps >/dev/null || fail "apps (--git install)"
gpuwmm_git check cbe-dot --backend sim --runs 20 >/dev/null || fail "check cbe-dot (--git install)"
[[ ! -e "$tmp/gitsrc" ]] || fail "something was written where the git repository was: $(find "$tmp/gitsrc" | head)"
[[ ! -e "$checkouts" ]] || fail "something was written where cargo's checkout was: $(find "$checkouts" | head)"
[[ -d "$tmp/work2/results/check" ]] || fail "no results under the current folder (--git install)"
log "ok: the --git install ($commit) ran apps and check with its repository and checkout deleted"
