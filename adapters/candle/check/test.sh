#!/usr/bin/env bash
# The gradcheck-candle crate's tests: the contract's direction vectors, every model.* answer on
# a tiny model, the fd-1 redirection and the examples over their pipes
# (`cargo test --release -p gradcheck-candle`, offline when cargo's cache holds every crate).
# Skips with a message (exit 0) where cargo is missing, as ../install.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null; then
    echo "adapters/candle/check: cargo not found; the gradcheck-candle tests are skipped" >&2
    exit 0
fi
# build first (offline, else online on a cache miss), so a test failure is never retried
if ! cargo test --release --locked --offline --no-run --quiet -p gradcheck-candle 2>/dev/null; then
    cargo test --release --locked --no-run -p gradcheck-candle
fi
cargo test --release --locked --offline -p gradcheck-candle "$@"
