"""TensorFlow.js (pure-JS CPU backend) through the process protocol: ``adapters/tfjs``.

The child is ``node adapters/tfjs/adapter.js``; its npm dependencies are installed with
``adapters/tfjs/install.sh`` (``npm ci``).  Where to find it: ``GRADCHECK_TFJS_DIR`` (default:
the ``adapters/tfjs`` folder of this checkout) and ``GRADCHECK_NODE`` (default: ``node`` on
PATH).  tfjs computes in float32 only, so the oracle's forward is the float64 NumPy meaning of
each op (:mod:`.protocol_ops`) and the rule is checked with a float32 rounding bound.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from gradcheck.backends.base import Accumulation, Semantics
from gradcheck.backends.process import ProcessBackend

_DEFAULT_DIR = Path(__file__).resolve().parents[2] / "adapters" / "tfjs"


def adapter_dir() -> Path:
    """Folder holding ``adapter.js`` and its ``node_modules``."""
    return Path(os.environ.get("GRADCHECK_TFJS_DIR", _DEFAULT_DIR))


def node_executable() -> str | None:
    """Path of the node binary, or None."""
    return shutil.which(os.environ.get("GRADCHECK_NODE", "node"))


def unavailable_reason() -> str | None:
    """Why the tfjs backend cannot run here, or None when it can (imports nothing heavy)."""
    if node_executable() is None:
        return "Node.js is not installed (node not on PATH; set GRADCHECK_NODE)"
    folder = adapter_dir()
    if not (folder / "adapter.js").is_file():
        return f"{folder / 'adapter.js'} not found (set GRADCHECK_TFJS_DIR)"
    if not (folder / "node_modules" / "@tensorflow" / "tfjs").is_dir():
        return f"@tensorflow/tfjs is not installed in {folder}: run {folder / 'install.sh'}"
    return None


class TfjsBackend(ProcessBackend):
    """TensorFlow.js 4.x, CPU backend, float32, reverse mode (``tf.grads``), order 2 by nesting
    ``tf.grads``; training through ``tf.variableGrads`` and ``tf.train.sgd``."""

    name = "tfjs"
    semantics = Semantics(
        Accumulation.FUNCTIONAL,
        stop_gradient=None,
        notes="tf.variableGrads returns fresh gradients each call (optimizers apply them); "
              "tfjs has no stop-gradient primitive (the adapter uses a constant snapshot)",
    )
    supports_jvp = False
    supports_order2 = True
    dtypes = ("float32",)
    declared_devices = ("cpu",)

    def __init__(self, *, request_timeout: float | None = None) -> None:
        super().__init__(cwd=str(adapter_dir()), request_timeout=request_timeout)

    def unavailable(self) -> str | None:
        return unavailable_reason()

    def child_argv(self) -> list[str]:
        return [str(node_executable()), str(adapter_dir() / "adapter.js")]
