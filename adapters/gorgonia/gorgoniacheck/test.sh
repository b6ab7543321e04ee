#!/usr/bin/env bash
# Run gorgoniacheck's go tests (the contract's direction vectors, each model.* answer, the
# examples' stories at the protocol level, Serve and Check). Offline after the first module
# fetch. Skips with a message (exit 0) where go is missing. TestCheckWithTheHarness runs the
# Python harness (gradcheck model) when it starts, and fails when CI is set and it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null; then
    echo "adapters/gorgonia/gorgoniacheck: go not found; its tests are skipped" >&2
    exit 0
fi
# the harness the tests that start it use: this checkout's gradcheck, on the python CI installed
# it into (python, else python3)
export PYTHONPATH="${PYTHONPATH:-$(cd .. && cd .. && pwd)}"
export GRADCHECK_PYTHON="${GRADCHECK_PYTHON:-$(command -v python || command -v python3 || echo python3)}"
GOFLAGS="${GOFLAGS:--mod=mod}" go vet ./gorgoniacheck/...
GOFLAGS="${GOFLAGS:--mod=mod}" go test -count=1 ./gorgoniacheck/... "$@"
