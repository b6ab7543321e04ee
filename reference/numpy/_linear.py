"""Builders of reference rules for linear and multilinear ops (NumPy only, no AD engine)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gradcheck.core.rules import NumpyFunction

Arrays = Sequence[np.ndarray]


def sum_to(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum the broadcast axes of ``x`` away so that it has ``shape`` (adjoint of broadcasting)."""
    lead = x.ndim - len(shape)
    x = x.sum(axis=tuple(range(lead))) if lead else x
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and x.shape[k] != 1)
    return x.sum(axis=axes, keepdims=True) if axes else x


def floating(a: np.ndarray) -> bool:
    return np.issubdtype(np.asarray(a).dtype, np.floating)


def linear_op(name: str, forward: Callable[..., np.ndarray],
              adjoint: Callable[[Arrays, Any], Sequence[np.ndarray | None]]
              ) -> NumpyFunction:
    """A function linear in its floating arguments jointly (integer/bool ones are parameters):
    the JVP is the forward applied to the tangents, the VJP is the hand-written ``adjoint``."""

    def jvp(args: Arrays, tangents: Arrays) -> tuple[np.ndarray, ...]:
        tan = [t if floating(a) else a for a, t in zip(args, tangents, strict=True)]
        out = forward(*tan)
        return tuple(out) if isinstance(out, tuple) else (out,)

    def vjp(args: Arrays, cts: Arrays) -> Sequence[np.ndarray | None]:
        return adjoint(args, cts[0] if len(cts) == 1 else cts)

    return NumpyFunction(forward, vjp, jvp, name=name)


def einsum_op(name: str, equation: str) -> NumpyFunction:
    """``np.einsum(equation, *args)``, multilinear: the JVP sums one term per argument with that
    argument replaced by its tangent; the VJP of argument ``k`` contracts the cotangent with
    the other arguments (valid when argument ``k`` repeats no index)."""
    ins, out = equation.split("->")
    subs = ins.split(",")

    def forward(*args: np.ndarray) -> np.ndarray:
        return np.einsum(equation, *args)

    def jvp(args: Arrays, tangents: Arrays) -> tuple[np.ndarray]:
        terms = [np.einsum(equation, *args[:k], t, *args[k + 1:])
                 for k, t in enumerate(tangents)]
        return (sum(terms[1:], terms[0]),)

    def vjp(args: Arrays, cts: Arrays) -> list[np.ndarray]:
        grads = []
        for k in range(len(args)):
            others = [s for j, s in enumerate(subs) if j != k]
            eq = ",".join([out, *others]) + "->" + subs[k]
            grads.append(np.einsum(eq, cts[0], *[a for j, a in enumerate(args) if j != k]))
        return grads

    return NumpyFunction(forward, vjp, jvp, name=name)
