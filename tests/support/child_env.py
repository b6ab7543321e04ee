"""The environment of a gradcheck command run in a subprocess by the tests: this checkout
importable, and nothing of the calling pytest run (its options, xdist worker identity, result
stream) leaking into the child; and ``gradcheck_cli``, the command run with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gradcheck import stream

ROOT = Path(__file__).resolve().parents[2]
_LEAKY = (stream.ENV_VAR, "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
          "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST")


def child_env(**extra: str) -> dict[str, str]:
    """``os.environ`` with the checkout first on ``PYTHONPATH``, the pytest variables removed
    and ``extra`` set."""
    env = {k: v for k, v in os.environ.items() if k not in _LEAKY}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def gradcheck_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m gradcheck.cli ARGS`` run in ``cwd`` with :func:`child_env`, output captured."""
    return subprocess.run([sys.executable, "-m", "gradcheck.cli", *args], cwd=cwd, env=child_env(),
                          capture_output=True, text=True, timeout=300)
