#!/usr/bin/env bash
# Builds the book (docs/, mdBook, installed from crates.io at a pinned version when missing) and
# checks the relative links of the README and the book (scripts/check-links.py).
set -euo pipefail
cd "$(dirname "$0")/.."
readonly MDBOOK_VERSION=0.5.4
if ! mdbook --version 2>/dev/null | grep -qx "mdbook v$MDBOOK_VERSION"; then
    cargo install --quiet --locked mdbook --version "$MDBOOK_VERSION" \
        --no-default-features --features search
fi
mdbook build docs
python3 scripts/check-links.py
