"""Hugging Face Candle (Rust, ``candle-core`` + ``candle-nn``, CPU) through the process protocol.

The child is the Rust binary built from ``adapters/candle`` (``bash adapters/candle/install.sh``
runs ``cargo build --release``).  Where to find it: ``GRADCHECK_CANDLE_BIN`` (default:
``adapters/candle/target/release/gradcheck-candle`` of this checkout).  Candle computes in
float64 and float32, so the oracle checks the rule in float64 and the float32 rounding
separately.  Reverse mode is ``Tensor::backward`` (a fresh ``GradStore`` per call); Candle has no
forward mode, and its backward detaches the gradients it builds, so there is no order 2.
"""

from __future__ import annotations

import os
from pathlib import Path

from gradcheck.backends.base import Accumulation, Semantics
from gradcheck.backends.process import ProcessBackend
from gradcheck.backends.process_model import ModelSpec

_ADAPTER = Path(__file__).resolve().parents[2] / "adapters" / "candle"
_DEFAULT_BIN = _ADAPTER / "target" / "release" / "gradcheck-candle"


def binary_path() -> Path:
    """Path of the adapter binary (``GRADCHECK_CANDLE_BIN`` or the crate's release build)."""
    return Path(os.environ.get("GRADCHECK_CANDLE_BIN", _DEFAULT_BIN))


def unavailable_reason() -> str | None:
    """Why the candle backend cannot run here, or None when it can (starts nothing)."""
    path = binary_path()
    if not path.is_file():
        how = ("build it with bash adapters/candle/install.sh (needs cargo)"
               if "GRADCHECK_CANDLE_BIN" not in os.environ else "check GRADCHECK_CANDLE_BIN")
        return f"the Candle adapter binary {path} is missing: {how}"
    if not os.access(path, os.X_OK):
        return f"the Candle adapter binary {path} is not executable"
    return None


# ---- Candle-specific probes: a VarMap model (candle.varmap_model, not part of the protocol) ---
VARMAP_NAMES = ("fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight")
CANDLE_STAGES = ("hidden", "logits")
CANDLE_VIAS = ("to_vec1", "to_vec2", "to_scalar")
# what gradcheck.model_audit.model_flow.check_varmap_model asks the child for
VARMAP_MODEL = ModelSpec("candle.varmap_model", VARMAP_NAMES, CANDLE_STAGES, "varmap",
                         "VarMap name", "the GradStore", vias=CANDLE_VIAS)


class CandleBackend(ProcessBackend):
    """Candle 0.11 on CPU, float64 and float32, reverse mode only; training through ``Var``,
    ``Tensor::backward`` (fresh ``GradStore``), ``Tensor::detach`` and ``candle_nn::SGD``."""

    name = "candle"
    semantics = Semantics(
        Accumulation.FUNCTIONAL,
        stop_gradient="detach",
        notes="Tensor::backward returns a fresh GradStore each call: a second backward replaces "
              "the gradients, it does not add to them (there is nothing to zero); "
              "Tensor::detach stops the flow",
    )
    supports_jvp = False
    supports_order2 = False
    dtypes = ("float64", "float32")
    declared_devices = ("cpu",)
    model_spec = VARMAP_MODEL

    def __init__(self, *, request_timeout: float | None = None,
                 env: dict[str, str] | None = None) -> None:
        super().__init__(cwd=str(_ADAPTER), env=env, request_timeout=request_timeout)

    def unavailable(self) -> str | None:
        return unavailable_reason()

    def child_argv(self) -> list[str]:
        return [str(binary_path())]

