"""The gradcheck adapter for minigrad: what an engine author writes (about 60 lines).

Contract (see gradcheck's docs/adapters.md): NumPy arrays in and out, ``fn`` written for the
engine (here: functions of ``Var``), ``vjp`` returns one gradient per index in ``diff``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gradcheck import Accumulation, Backend, Semantics

from . import engine


def _outputs(out: Any) -> list[engine.Var]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


class MinigradBackend(Backend):
    """minigrad: reverse mode only, CPU, float64 and float32, gradients accumulate."""

    name = "minigrad"
    semantics = Semantics(Accumulation.ACCUMULATE, stop_gradient=None,
                          notes="backward() adds into Var.grad")
    supports_jvp = False
    supports_order2 = False
    dtypes = ("float64", "float32")

    _OPS = {"sin": engine.sin, "tanh": engine.tanh, "exp": engine.exp, "add": engine.add,
            "mul": engine.mul, "matmul": engine.matmul, "sum": engine.sum}

    def version(self) -> str:
        return "0.1.0"

    def devices(self) -> list[str]:
        return ["cpu"]

    def op(self, name: str) -> Callable | None:
        return self._OPS.get(name)

    def evaluate(self, fn, args, device):
        return [o.value for o in _outputs(fn(*[engine.Var(a) for a in args]))]

    def vjp(self, fn, args, diff, cotangents, device):
        leaves = [engine.Var(a) for a in args]
        outs = _outputs(fn(*leaves))
        for o, c in zip(outs, cotangents, strict=True):
            engine.backward(o, np.asarray(c, dtype=o.value.dtype))  # grads add up per leaf
        return [leaves[k].grad if leaves[k].grad is not None else np.zeros_like(args[k])
                for k in diff]
