"""Hand-derived partials of the elementwise binary ops (broadcasting handled by
:func:`gradcheck.reference.numpy._rules.unbroadcast`).

``atan2`` and ``hypot`` divide by ``r = hypot(a, b)`` twice instead of by ``a^2 + b^2``, which
overflows for ``|a| > 1e154``.  At ties ``maximum``/``minimum`` split the gradient evenly (a
convention: the derivative does not exist there and the suites treat ties as kinks).
"""

from __future__ import annotations

import numpy as np
from scipy import special as sp

from ._rules import elementwise


def _pow_db(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.power(a, b) * np.log(a)


def _tie_split(first: bool, pick):
    def d(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        win = pick(a, b) if first else pick(b, a)
        return np.where(a == b, 0.5, win.astype(np.float64))
    return d


def _greater(x, y):
    return x > y


def _less(x, y):
    return x < y


def _one(a, b):
    return np.ones(np.broadcast_shapes(np.shape(a), np.shape(b)))


OPS = {
    "add": elementwise("add", np.add, _one, _one),
    "sub": elementwise("sub", np.subtract, _one, lambda a, b: -_one(a, b)),
    "mul": elementwise("mul", np.multiply, lambda a, b: b * _one(a, b),
                       lambda a, b: a * _one(a, b)),
    "div": elementwise("div", np.divide, lambda a, b: 1.0 / b * _one(a, b),
                       lambda a, b: -(a / b) / b),
    "pow": elementwise("pow", np.power, lambda a, b: b * np.power(a, b - 1.0), _pow_db),
    "atan2": elementwise("atan2", np.arctan2, lambda a, b: (b / np.hypot(a, b)) / np.hypot(a, b),
                         lambda a, b: -(a / np.hypot(a, b)) / np.hypot(a, b)),
    "hypot": elementwise("hypot", np.hypot, lambda a, b: a / np.hypot(a, b),
                         lambda a, b: b / np.hypot(a, b)),
    "maximum": elementwise("maximum", np.maximum, _tie_split(True, _greater),
                           _tie_split(False, _greater)),
    "minimum": elementwise("minimum", np.minimum, _tie_split(True, _less),
                           _tie_split(False, _less)),
    "logaddexp": elementwise("logaddexp", np.logaddexp, lambda a, b: sp.expit(a - b),
                             lambda a, b: sp.expit(b - a)),
    "add_bcast": elementwise("add_bcast", np.add, _one, _one),
    "mul_bcast": elementwise("mul_bcast", np.multiply, lambda a, b: b * _one(a, b),
                             lambda a, b: a * _one(a, b)),
    "div_bcast": elementwise("div_bcast", np.divide, lambda a, b: 1.0 / b * _one(a, b),
                             lambda a, b: -(a / b) / b),
    "mul_scalar": elementwise("mul_scalar", np.multiply, lambda a, b: b * _one(a, b),
                              lambda a, b: a * _one(a, b)),
}
