"""The mutants of tests/numeric/test_mutants.py shared with other tests: the inputs, the mutant
names, the op each mutant is planted in, and the NumPy versions of the four small ops (the torch
and JAX versions stay in the test module)."""

from __future__ import annotations

import numpy as np

from gradcheck import NumpyFunction

RNG = np.random.default_rng(42)
X = RNG.standard_normal((3, 4))
Y = RNG.standard_normal((3, 4))
B = RNG.standard_normal(4)
W = RNG.standard_normal((4, 4))  # not symmetric: a transposed Jacobian is wrong

MUTANTS = ("sign_flip", "factor", "transposed", "missing_reduction", "zeroed", "swapped",
           "forward_only", "order2_only")
OP_OF = {"transposed": "matmul", "missing_reduction": "bias", "order2_only": "sin"}


def mutant_inputs(op: str) -> tuple[np.ndarray, ...]:
    return {"matmul": (X,), "bias": (X, B), "sin": (X,)}.get(op, (X, Y))


# -- numpy ----------------------------------------------------------------------------------------


def _np_sinmul(m: str | None) -> NumpyFunction:
    def vjp(a, c):
        x, y = a
        g = c[0]
        gx, gy = g * np.cos(x) * y, g * np.sin(x)
        return {"sign_flip": (-gx, -gy), "factor": (2 * gx, 2 * gy), "zeroed": (gx, 0 * gy),
                "swapped": (gy, gx)}.get(m, (gx, gy))

    def jvp(a, t):
        x, y = a
        sign = -1.0 if m == "forward_only" else 1.0
        return (np.cos(x) * y * t[0] + sign * np.sin(x) * t[1],)

    return NumpyFunction(lambda x, y: np.sin(x) * y, vjp, jvp, name="sinmul")


def _np_matmul(m: str | None) -> NumpyFunction:
    return NumpyFunction(lambda x: x @ W,
                         lambda a, c: (c[0] @ (W if m == "transposed" else W.T),),
                         lambda a, t: (t[0] @ W,), name="matmul")


def _np_bias(m: str | None) -> NumpyFunction:
    def vjp(a, c):
        g = c[0] * (1 - np.tanh(a[0] + a[1]) ** 2)
        return g, (g[0] if m == "missing_reduction" else g.sum(axis=0))

    def jvp(a, t):
        return ((1 - np.tanh(a[0] + a[1]) ** 2) * (t[0] + t[1]),)

    return NumpyFunction(lambda x, b: np.tanh(x + b), vjp, jvp, name="bias_tanh")


def _np_sin(m: str | None) -> NumpyFunction:
    # the VJP as a NumpyFunction of (x, g) with its own rules: d/dx (g cos x) = -g sin x
    def vjp2(a, c):
        x, g = a
        d = 0.0 if m == "order2_only" else -np.sin(x)
        return c[0] * g * d, c[0] * np.cos(x)

    def jvp2(a, t):
        x, g = a
        d = 0.0 if m == "order2_only" else -np.sin(x)
        return (t[1] * np.cos(x) + t[0] * g * d,)

    inner = NumpyFunction(lambda x, g: (g * np.cos(x),), vjp2, jvp2, name="sin_vjp")
    return NumpyFunction(np.sin, inner, lambda a, t: (np.cos(a[0]) * t[0],), name="sin")


def numpy_op(op: str, m: str | None):
    return {"sinmul": _np_sinmul, "matmul": _np_matmul, "bias": _np_bias, "sin": _np_sin}[op](m)
