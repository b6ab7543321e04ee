#!/usr/bin/env bash
# Install the TensorFlow.js adapter's npm dependencies from the lockfile (CI and developers).
# Needs Node.js >= 18 and npm; skips with a message (exit 0) where node is missing, so CI on a
# machine without Node.js still passes (the tfjs tests then skip with that reason).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "adapters/tfjs: node/npm not found; the tfjs backend will be skipped" >&2
    exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
