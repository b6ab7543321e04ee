"""Hand-derived derivatives of the elementwise unary ops (NumPy/SciPy only).

Each derivative is written in a form that stays accurate where the naive one cancels:
``1 - x^2`` as ``(1 - x)(1 + x)``, ``sech^2`` from ``cosh`` (never ``1 - tanh^2``), the
logistic derivative from ``exp(-|x|)``, ``sinc'`` by its Taylor series near 0, trigamma by the
reflection formula for negative arguments.
"""

from __future__ import annotations

import numpy as np
from scipy import special as sp

from ._rules import elementwise

_LN2, _LN10 = np.log(2.0), np.log(10.0)


def sinpi(x: np.ndarray) -> np.ndarray:
    """``sin(pi x)`` with the argument reduced exactly to ``[-1/2, 1/2]`` first."""
    n = np.round(x)
    r = x - n  # exact
    sign = np.where(np.mod(n, 2) == 0, 1.0, -1.0)
    return sign * np.sin(np.pi * r)


def trigamma(x: np.ndarray) -> np.ndarray:
    """``psi'(x)``; for ``x < 1/2`` by reflection ``psi'(x) = pi^2 / sin^2(pi x) - psi'(1-x)``."""
    x = np.asarray(x, dtype=np.float64)
    pos = sp.polygamma(1, np.where(x < 0.5, 1.0 - x, x))
    return np.where(x < 0.5, np.pi**2 / sinpi(x) ** 2 - pos, pos)


def _logistic_slope(x: np.ndarray) -> np.ndarray:
    """``sigma(x) sigma(-x)`` without cancellation: ``e / (1 + e)^2`` with ``e = exp(-|x|)``."""
    e = np.exp(-np.abs(x))
    return e / (1.0 + e) ** 2


def _sinc_slope(x: np.ndarray) -> np.ndarray:
    """``d/dx sin(pi x)/(pi x) = (cos(pi x) - sinc(x)) / x``; Taylor series for ``|pi x| < 1``
    (``sum_k (-1)^k 2k pi^(2k) x^(2k-1) / (2k+1)!``), where the direct form cancels."""
    x = np.asarray(x, dtype=np.float64)
    z = np.pi * x
    series = np.zeros_like(x)
    term_den = 1.0
    for k in range(1, 16):
        term_den *= (2 * k) * (2 * k + 1)
        series += (-1) ** k * 2 * k * z ** (2 * k - 1) / term_den
    series *= np.pi
    with np.errstate(all="ignore"):
        direct = (np.cos(z) - np.sinc(x)) / x
    return np.where(np.abs(z) < 1.0, series, direct)


def _sech2(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / np.cosh(x) ** 2


def _one_minus_sq(x: np.ndarray) -> np.ndarray:
    return (1.0 - x) * (1.0 + x)


OPS = {
    "sin": elementwise("sin", np.sin, np.cos),
    "cos": elementwise("cos", np.cos, lambda x: -np.sin(x)),
    "tan": elementwise("tan", np.tan, lambda x: 1.0 / np.cos(x) ** 2),
    "tanh": elementwise("tanh", np.tanh, _sech2),
    "sinh": elementwise("sinh", np.sinh, np.cosh),
    "cosh": elementwise("cosh", np.cosh, np.sinh),
    "arcsin": elementwise("arcsin", np.arcsin, lambda x: 1.0 / np.sqrt(_one_minus_sq(x))),
    "arccos": elementwise("arccos", np.arccos, lambda x: -1.0 / np.sqrt(_one_minus_sq(x))),
    "arctan": elementwise("arctan", np.arctan, lambda x: 1.0 / (1.0 + x * x)),
    "arcsinh": elementwise("arcsinh", np.arcsinh, lambda x: 1.0 / np.hypot(1.0, x)),
    "arccosh": elementwise("arccosh", np.arccosh, lambda x: 1.0 / np.sqrt((x - 1.0) * (x + 1.0))),
    "arctanh": elementwise("arctanh", np.arctanh, lambda x: 1.0 / _one_minus_sq(x)),
    "exp": elementwise("exp", np.exp, np.exp),
    "exp2": elementwise("exp2", np.exp2, lambda x: _LN2 * np.exp2(x)),
    "expm1": elementwise("expm1", np.expm1, np.exp),
    "log": elementwise("log", np.log, lambda x: 1.0 / x),
    "log2": elementwise("log2", np.log2, lambda x: 1.0 / (x * _LN2)),
    "log10": elementwise("log10", np.log10, lambda x: 1.0 / (x * _LN10)),
    "log1p": elementwise("log1p", np.log1p, lambda x: 1.0 / (1.0 + x)),
    "sqrt": elementwise("sqrt", np.sqrt, lambda x: 0.5 / np.sqrt(x)),
    "rsqrt": elementwise("rsqrt", lambda x: 1.0 / np.sqrt(x), lambda x: -0.5 / (x * np.sqrt(x))),
    "sigmoid": elementwise("sigmoid", sp.expit, _logistic_slope),
    "logsigmoid": elementwise("logsigmoid", lambda x: -np.logaddexp(0.0, -x),
                              lambda x: sp.expit(-x)),
    "softplus": elementwise("softplus", lambda x: np.logaddexp(0.0, x), sp.expit),
    "silu": elementwise("silu", lambda x: x * sp.expit(x),
                        lambda x: sp.expit(x) + x * _logistic_slope(x)),
    "gelu": elementwise("gelu", lambda x: x * sp.ndtr(x),
                        lambda x: sp.ndtr(x) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)),
    "elu": elementwise("elu", lambda x: np.asarray(np.where(x > 0, x,
                                                            np.expm1(np.minimum(x, 0.0)))),
                       lambda x: np.where(x > 0, 1.0, np.exp(np.minimum(x, 0.0)))),
    "erf": elementwise("erf", sp.erf, lambda x: 2.0 / np.sqrt(np.pi) * np.exp(-x * x)),
    "erfc": elementwise("erfc", sp.erfc, lambda x: -2.0 / np.sqrt(np.pi) * np.exp(-x * x)),
    "erfinv": elementwise("erfinv", sp.erfinv,
                          lambda x: np.sqrt(np.pi) / 2.0 * np.exp(sp.erfinv(x) ** 2)),
    "lgamma": elementwise("lgamma", sp.gammaln, sp.digamma),
    "digamma": elementwise("digamma", sp.digamma, trigamma),
    "sinc": elementwise("sinc", np.sinc, _sinc_slope),
    "i0": elementwise("i0", sp.i0, sp.i1),
    "abs": elementwise("abs", np.abs, np.sign),
    "square": elementwise("square", np.square, lambda x: 2.0 * x),
    "reciprocal": elementwise("reciprocal", lambda x: 1.0 / x, lambda x: -1.0 / (x * x)),
    "relu": elementwise("relu", lambda x: np.maximum(x, 0.0), lambda x: (x > 0).astype(x.dtype)),
}
