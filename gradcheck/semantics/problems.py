"""The standard training problem the accumulation and clipping probes run on every engine.

``L(p) = sum_k [ sum(a_k * sin(p_k)) + 0.5 * sum(c_k * p_k^2) ]`` over three named parameters
(``layer.weight`` (3, 2), ``layer.bias`` (2,), ``head`` (4,)), with fixed constants ``a_k``
(signed) and ``c_k`` (positive).  Its gradient ``a_k cos(p_k) + c_k p_k`` is known in closed form,
so the NumPy reference hooks can run it, and the sum of absolute terms
``|a_k cos p_k| + |c_k p_k|`` sizes every rounding allowance.

Engines that differentiate only op-protocol losses get the *op form*: one parameter ``w`` (12,)
and ``L = sum(a * sin(w))`` (``c = 0``), a single ``OpLoss("sin", ("w",), a)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.backends.op_training import OpLoss

SHAPES: dict[str, tuple[int, ...]] = {"layer.weight": (3, 2), "layer.bias": (2,), "head": (4,)}
OP_SHAPES: dict[str, tuple[int, ...]] = {"w": (12,)}


def shapes_for(hooks: Any) -> dict[str, tuple[int, ...]]:
    """The parameter shapes a probe can use on ``hooks`` (one parameter for op-protocol ones:
    they can load gradients of a single parameter only)."""
    return SHAPES if getattr(hooks, "python_losses", True) else OP_SHAPES


def _forward(xp: Any, p: Mapping[str, Any], consts: Mapping[str, Any]) -> Any:
    total = 0.0
    for k in p:
        total = total + xp.sum(consts["a:" + k] * xp.sin(p[k]))
        total = total + 0.5 * xp.sum(consts["c:" + k] * p[k] * p[k])
    return total


@dataclass(frozen=True)
class StandardProblem:
    """Parameter values and constants of one seeded instance (float64)."""

    params: dict[str, np.ndarray]
    consts: dict[str, np.ndarray]
    op_form: bool = False

    @classmethod
    def make(cls, rng: np.random.Generator, op_form: bool = False) -> StandardProblem:
        shapes = OP_SHAPES if op_form else SHAPES
        params = {k: rng.uniform(-1.5, 1.5, s) for k, s in shapes.items()}
        consts: dict[str, np.ndarray] = {}
        for k, s in shapes.items():
            consts["a:" + k] = rng.standard_normal(s)
            consts["c:" + k] = np.zeros(s) if op_form else rng.uniform(0.5, 1.5, s)
        return cls(params, consts, op_form)

    @classmethod
    def for_hooks(cls, hooks: Any, rng: np.random.Generator) -> StandardProblem:
        return cls.make(rng, op_form=not getattr(hooks, "python_losses", True))

    def grad(self, p: Mapping[str, Any], consts: Mapping[str, Any] | None = None
             ) -> dict[str, np.ndarray]:
        """Hand-derived gradient at ``p`` (float64)."""
        c = self.consts if consts is None else consts
        return {k: np.asarray(c["a:" + k], np.float64) * np.cos(np.asarray(p[k], np.float64))
                + np.asarray(c["c:" + k], np.float64) * np.asarray(p[k], np.float64)
                for k in self.params}

    def terms(self, p: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Sum of absolute terms of each gradient element (the rounding magnitude)."""
        return {k: np.abs(self.consts["a:" + k] * np.cos(p[k])) + np.abs(self.consts["c:" + k]
                                                                          * p[k])
                for k in self.params}

    def install(self, hooks: Any) -> tuple[Any, tuple[Any, ...]]:
        """Create the parameters on ``hooks``; return ``(loss_fn, inputs)`` for it."""
        hooks.create_parameters(self.params)
        if self.op_form:
            return OpLoss("sin", ("w",), self.consts["a:w"]), ()
        consts = {k: hooks.to_native(v) for k, v in self.consts.items()}
        loss = hooks.make_loss(_forward, grad=lambda p, c: self.grad(p, c))
        return loss, (consts,)
