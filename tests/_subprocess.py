"""The environment of a gradcheck command run in a subprocess by the tests: this checkout
importable, and nothing of the calling pytest run (its options, xdist worker identity, result
stream) leaking into the child."""

from __future__ import annotations

import os
from pathlib import Path

from gradcheck import stream

ROOT = Path(__file__).resolve().parent.parent
_LEAKY = (stream.ENV_VAR, "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
          "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST")


def child_env(**extra: str) -> dict[str, str]:
    """``os.environ`` with the checkout first on ``PYTHONPATH``, the pytest variables removed
    and ``extra`` set."""
    env = {k: v for k, v in os.environ.items() if k not in _LEAKY}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env
