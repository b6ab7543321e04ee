"""Builders of :class:`NumpyFunction` references from hand-derived partial derivatives.

An elementwise op ``y = f(x1, ..., xk)`` (with NumPy broadcasting) has a diagonal Jacobian per
argument: ``dy/dxj = d_j(x1, ..., xk)`` elementwise.  So

* VJP: ``grad_j = unbroadcast(v * d_j, shape of xj)`` (a broadcast argument receives the sum of
  the cotangent over the axes it was broadcast along),
* JVP: ``t_y = sum_j d_j * t_j``.

Every result is cast back to the argument's dtype so float32 runs stay float32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from gradcheck.core.rules import NumpyFunction

Partial = Callable[..., np.ndarray]


def unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``g`` down to ``shape`` (the adjoint of NumPy broadcasting)."""
    g = np.asarray(g)
    extra = g.ndim - len(shape)
    if extra:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and g.shape[k] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def cast(value: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``value`` as an array of ``like``'s dtype."""
    return np.asarray(value).astype(np.asarray(like).dtype, copy=False)


def elementwise(name: str, forward: Callable[..., np.ndarray], *partials: Partial,
                ) -> NumpyFunction:
    """A reference for an elementwise op from its forward and one partial per argument.

    ``partials[j](*args)`` is ``d f / d x_j`` evaluated elementwise (broadcast shape).
    """

    def fwd(*args: np.ndarray) -> np.ndarray:
        return cast(forward(*args), args[0])

    def vjp(args: Sequence[np.ndarray], cts: Sequence[np.ndarray]) -> list[np.ndarray]:
        (v,) = cts
        return [cast(unbroadcast(v * d(*args), np.shape(a)), a) for d, a in zip(partials, args,
                                                                               strict=True)]

    def jvp(args: Sequence[np.ndarray], tans: Sequence[np.ndarray]) -> list[np.ndarray]:
        total = sum(d(*args) * t for d, t in zip(partials, tans, strict=True))
        return [cast(np.broadcast_to(total, np.shape(fwd(*args))), args[0])]

    return NumpyFunction(fwd, vjp, jvp, name=name)


def linear(name: str, forward: Callable[[np.ndarray], np.ndarray],
           adjoint: Callable[[np.ndarray, tuple[int, ...]], np.ndarray]) -> NumpyFunction:
    """A reference for a linear op of one argument: the JVP is the op itself and the VJP is
    ``adjoint(v, shape of x)``."""

    def vjp(args: Sequence[np.ndarray], cts: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [cast(adjoint(cts[0], np.shape(args[0])), args[0])]

    def jvp(args: Sequence[np.ndarray], tans: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [cast(forward(tans[0]), args[0])]

    return NumpyFunction(lambda x: cast(forward(x), x), vjp, jvp, name=name)


def unary_from_jacobian(name: str, forward: Callable[[np.ndarray], np.ndarray],
                        vjp1: Callable[[np.ndarray, np.ndarray], np.ndarray],
                        jvp1: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> NumpyFunction:
    """A reference for a non-elementwise op of one argument from ``vjp1(x, v)`` and
    ``jvp1(x, t)``."""
    return NumpyFunction(
        lambda x: cast(forward(x), x),
        lambda args, cts: [cast(vjp1(args[0], cts[0]), args[0])],
        lambda args, tans: [cast(jvp1(args[0], tans[0]), args[0])],
        name=name,
    )
