"""Hand-derived partials of the special functions (SciPy for the function values)."""

from __future__ import annotations

import numpy as np
from scipy import special as sp

from ._rules import elementwise
from .unary import sinpi, trigamma

_SQRT_2PI = np.sqrt(2.0 * np.pi)


def _tetragamma(x: np.ndarray) -> np.ndarray:
    """``psi''(x)``; for ``x < 1/2`` by reflection ``psi''(x) = psi''(1-x) - 2 pi^3 cos(pi x) /
    sin^3(pi x)``."""
    x = np.asarray(x, dtype=np.float64)
    pos = sp.polygamma(2, np.where(x < 0.5, 1.0 - x, x))
    cos = sinpi(0.5 - x)  # cos(pi x), exactly reduced
    return np.where(x < 0.5, pos - 2.0 * np.pi**3 * cos / sinpi(x) ** 3, pos)


def _i1_slope(x: np.ndarray) -> np.ndarray:
    """``i1'(x) = i0(x) - i1(x) / x``, which is 1/2 at 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(x == 0, 0.5, sp.i0(x) - sp.i1(x) / np.where(x == 0, 1.0, x))


def _i1e_slope(x: np.ndarray) -> np.ndarray:
    """``d/dx e^-|x| i1(x) = i0e(x) - i1e(x) (sign(x) + 1/x)``, 1/2 at 0."""
    safe = np.where(x == 0, 1.0, x)
    return np.where(x == 0, 0.5, sp.i0e(x) - sp.i1e(x) * (np.sign(x) + 1.0 / safe))


def _gammainc_dx(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``x^(a-1) e^-x / Gamma(a)``, in logs."""
    return np.exp((a - 1.0) * np.log(x) - x - sp.gammaln(a))


def _log_ndtr_slope(x: np.ndarray) -> np.ndarray:
    """``phi(x) / Phi(x) = exp(-x^2/2 - log Phi(x)) / sqrt(2 pi)``."""
    return np.exp(-0.5 * x * x - sp.log_ndtr(x)) / _SQRT_2PI


def _multigammaln3(a: np.ndarray) -> np.ndarray:
    return sp.multigammaln(a, 3) if np.ndim(a) == 0 else np.vectorize(
        lambda t: sp.multigammaln(t, 3))(a)


OPS = {
    "betaln": elementwise("betaln", sp.betaln, lambda a, b: sp.digamma(a) - sp.digamma(a + b),
                          lambda a, b: sp.digamma(b) - sp.digamma(a + b)),
    "polygamma1": elementwise("polygamma1", trigamma, _tetragamma),
    "polygamma2": elementwise("polygamma2", lambda x: sp.polygamma(2, x),
                              lambda x: sp.polygamma(3, x)),
    "xlogy": elementwise("xlogy", sp.xlogy, lambda x, y: np.log(y) * np.ones_like(x),
                         lambda x, y: x / y),
    "xlog1py": elementwise("xlog1py", sp.xlog1py, lambda x, y: np.log1p(y) * np.ones_like(x),
                           lambda x, y: x / (1.0 + y)),
    "log_ndtr": elementwise("log_ndtr", sp.log_ndtr, _log_ndtr_slope),
    "ndtri": elementwise("ndtri", sp.ndtri,
                         lambda p: _SQRT_2PI * np.exp(0.5 * sp.ndtri(p) ** 2)),
    "ndtr": elementwise("ndtr", sp.ndtr, lambda x: np.exp(-0.5 * x * x) / _SQRT_2PI),
    "i0e": elementwise("i0e", sp.i0e, lambda x: sp.i1e(x) - np.sign(x) * sp.i0e(x)),
    "i1": elementwise("i1", sp.i1, _i1_slope),
    "i1e": elementwise("i1e", sp.i1e, _i1e_slope),
    "entr": elementwise("entr", sp.entr, lambda x: -(np.log(x) + 1.0)),
    "logit": elementwise("logit", sp.logit, lambda p: 1.0 / (p * (1.0 - p))),
    "multigammaln": elementwise("multigammaln", _multigammaln3,
                                lambda a: sp.digamma(a) + sp.digamma(a - 0.5)
                                + sp.digamma(a - 1.0)),
    "gammainc": elementwise("gammainc", sp.gammainc, lambda a, x: np.zeros_like(a * x),
                            _gammainc_dx),
    "gammaincc": elementwise("gammaincc", sp.gammaincc, lambda a, x: np.zeros_like(a * x),
                             lambda a, x: -_gammainc_dx(a, x)),
}
