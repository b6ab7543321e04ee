"""Gorgonia (Go) through the process protocol: ``adapters/gorgonia``.

The child is the Go binary ``adapters/gorgonia/bin/gorgonia-adapter``, built with
``bash adapters/gorgonia/install.sh`` (``go build``; Gorgonia v0.9.18).  Where to find it:
``GRADCHECK_GORGONIA_BIN`` (default: that path in this checkout).  Gorgonia computes in float64
and float32, so the rule is checked in float64 and the float32 rounding separately; reverse
mode is its symbolic ``gorgonia.Grad`` run by a ``TapeMachine``; it has no forward mode.
"""

from __future__ import annotations

import os
from pathlib import Path

from gradcheck.backends.base import Accumulation, Semantics
from gradcheck.backends.process import ProcessBackend
from gradcheck.backends.process_model import ModelSpec

_ADAPTER = Path(__file__).resolve().parents[2] / "adapters" / "gorgonia"


def binary_path() -> Path:
    """Path of the adapter binary (``GRADCHECK_GORGONIA_BIN`` or the checkout's bin folder)."""
    return Path(os.environ.get("GRADCHECK_GORGONIA_BIN", _ADAPTER / "bin" / "gorgonia-adapter"))


def unavailable_reason() -> str | None:
    """Why the gorgonia backend cannot run here, or None when it can (starts nothing)."""
    path = binary_path()
    if not path.is_file():
        return (f"the Gorgonia adapter binary {path} is not built: build it with bash "
                "adapters/gorgonia/install.sh (needs Go), or set GRADCHECK_GORGONIA_BIN")
    if not os.access(path, os.X_OK):
        return f"{path} is not executable"
    return None


# ---- Gorgonia-specific probe: a two-layer model (gorgonia.model, not part of the protocol) ----
MODEL_NAMES = ("fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight")
MODEL_STAGES = ("hidden", "logits")
MODEL_VIAS = ("constant", "input")
# what gradcheck.model_audit.model_flow.check_model_flow asks the child for
MODEL = ModelSpec("gorgonia.model", MODEL_NAMES, MODEL_STAGES, "model", "learnable node name",
                  "the learnables' dual-value store", vias=MODEL_VIAS)


class GorgoniaBackend(ProcessBackend):
    """Gorgonia v0.9.x, CPU, float64 and float32, reverse mode (symbolic ``gorgonia.Grad``),
    order 2 by differentiating a graph that holds gradient nodes; training through a
    ``TapeMachine`` with ``BindDualValues`` and ``VanillaSolver``."""

    name = "gorgonia"
    semantics = Semantics(
        Accumulation.ACCUMULATE,
        stop_gradient=None,
        notes="a TapeMachine run with BindDualValues adds the gradient into the learnables' dual "
              "values; solver.Step applies and zeroes them; Gorgonia has no stop-gradient "
              "primitive (the adapter binds a copy of the value as an input node)",
    )
    supports_jvp = False
    supports_order2 = True
    dtypes = ("float64", "float32")
    declared_devices = ("cpu",)
    model_spec = MODEL

    def __init__(self, *, request_timeout: float | None = None,
                 env: dict[str, str] | None = None) -> None:
        super().__init__(env=env, request_timeout=request_timeout)

    def unavailable(self) -> str | None:
        return unavailable_reason()

    def child_argv(self) -> list[str]:
        return [str(binary_path())]

