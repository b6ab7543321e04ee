"""Hand-derived VJPs/JVPs of the reductions and scans.

* ``prod``: ``d/dx_i prod(x) = prod_{j != i} x_j`` from exclusive prefix and suffix products,
  exact with zeros (never ``prod / x_i``).
* ``logsumexp``: the softmax weights ``exp(x - lse)`` (``-inf`` entries weigh 0).
* ``norm``: ``x / ||x||`` with the norm computed scaled by ``max |x|`` (no under/overflow).
* ``max``/``min``: one-hot on the extremum, ties split evenly (a convention at a kink).
* ``cumprod``/``logcumsumexp``: the explicit lower-triangular Jacobian along the scanned axis
  (``J[k, i] = prod_{j <= k, j != i} x_j`` resp. ``exp(x_i - y_k)``).
"""

from __future__ import annotations

import numpy as np

from ._rules import linear, unary_from_jacobian


def _exclusive_prod(x: np.ndarray, axis: int) -> np.ndarray:
    """``prod_{j != i} x_j`` along ``axis`` without dividing."""
    x = np.moveaxis(x, axis, -1)
    ones = np.ones(x.shape[:-1] + (1,), dtype=x.dtype)
    left = np.concatenate([ones, np.cumprod(x, axis=-1)[..., :-1]], axis=-1)
    right = np.concatenate([np.cumprod(x[..., ::-1], axis=-1)[..., :-1][..., ::-1], ones],
                           axis=-1)
    return np.moveaxis(left * right, -1, axis)


def _reduce(name: str, forward, grad, axis: int | None) -> object:
    """A reduction ``y = forward(x)`` whose Jacobian row is ``grad(x)`` (same shape as x)."""

    def vjp1(x, v):
        return grad(x) * (v if axis is None else np.expand_dims(v, axis))

    def jvp1(x, t):
        with np.errstate(invalid="ignore"):
            prod = np.where(t == 0, 0.0, grad(x) * t)
        return np.sum(prod, axis=axis)

    return unary_from_jacobian(name, forward, vjp1, jvp1)


def _lse(x: np.ndarray, axis: int | None) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m


def _softmax(x: np.ndarray, axis: int | None) -> np.ndarray:
    return np.exp(x - _lse(x, axis))


def _scaled_norm(x: np.ndarray, axis: int | None) -> np.ndarray:
    s = np.max(np.abs(x), axis=axis, keepdims=True)
    s = np.where(s > 0, s, 1.0)
    return s * np.sqrt(np.sum((x / s) ** 2, axis=axis, keepdims=True))


def _extremum_grad(x: np.ndarray, axis: int | None, pick) -> np.ndarray:
    hit = (x == pick(x, axis=axis, keepdims=True)).astype(np.float64)
    return hit / np.sum(hit, axis=axis, keepdims=True)


def _var_grad(x: np.ndarray, axis: int | None, ddof: int) -> np.ndarray:
    n = x.size if axis is None else x.shape[axis]
    return 2.0 * (x - np.mean(x, axis=axis, keepdims=True)) / (n - ddof)


def _scan(name: str, forward, jacobian) -> object:
    """A scan along the last axis with per-row Jacobian ``jacobian(x) -> (..., n, n)``."""

    def vjp1(x, v):
        return np.einsum("...k,...ki->...i", v, jacobian(x))

    def jvp1(x, t):
        return np.einsum("...ki,...i->...k", jacobian(x), t)

    return unary_from_jacobian(name, forward, vjp1, jvp1)


def _cumprod_jacobian(x: np.ndarray) -> np.ndarray:
    n = x.shape[-1]
    J = np.zeros(x.shape + (n,))
    for k in range(n):
        for i in range(k + 1):
            J[..., k, i] = np.prod(np.delete(x[..., : k + 1], i, axis=-1), axis=-1)
    return J


def _logcumsumexp(x: np.ndarray) -> np.ndarray:
    return np.logaddexp.accumulate(x, axis=-1)


def _logcumsumexp_jacobian(x: np.ndarray) -> np.ndarray:
    y = _logcumsumexp(x)
    J = np.exp(x[..., None, :] - y[..., :, None])
    return np.where(np.tril(np.ones((x.shape[-1],) * 2)) == 1, J, 0.0)


def _bcast_sum(v: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.broadcast_to(v, shape)


OPS = {
    "sum": linear("sum", np.sum, _bcast_sum),
    "sum_axis1": linear("sum_axis1", lambda x: np.sum(x, axis=-1),
                        lambda v, s: np.broadcast_to(v[..., None], s)),
    "mean": linear("mean", np.mean, lambda v, s: np.broadcast_to(v / np.prod(s), s)),
    "mean_axis0": linear("mean_axis0", lambda x: np.mean(x, axis=0),
                         lambda v, s: np.broadcast_to(v / s[0], s)),
    "prod": _reduce("prod", np.prod, lambda x: _exclusive_prod(x.ravel(), 0).reshape(x.shape),
                    None),
    "prod_axis1": _reduce("prod_axis1", lambda x: np.prod(x, axis=-1),
                          lambda x: _exclusive_prod(x, -1), -1),
    "logsumexp": _reduce("logsumexp", lambda x: _lse(x, None).reshape(()),
                         lambda x: _softmax(x, None), None),
    "logsumexp_axis1": _reduce("logsumexp_axis1", lambda x: _lse(x, -1)[..., 0],
                               lambda x: _softmax(x, -1), -1),
    "var": _reduce("var", np.var, lambda x: _var_grad(x, None, 0), None),
    "var_axis1": _reduce("var_axis1", lambda x: np.var(x, axis=-1, ddof=1),
                         lambda x: _var_grad(x, -1, 1), -1),
    "std": _reduce("std", lambda x: np.std(x, ddof=1),
                   lambda x: _var_grad(x, None, 1) / (2.0 * np.std(x, ddof=1)), None),
    "norm": _reduce("norm", lambda x: _scaled_norm(x, None).reshape(()),
                    lambda x: x / _scaled_norm(x, None), None),
    "norm_axis1": _reduce("norm_axis1", lambda x: _scaled_norm(x, -1)[..., 0],
                          lambda x: x / _scaled_norm(x, -1), -1),
    "max": _reduce("max", np.max, lambda x: _extremum_grad(x, None, np.max), None),
    "min": _reduce("min", np.min, lambda x: _extremum_grad(x, None, np.min), None),
    "max_axis1": _reduce("max_axis1", lambda x: np.max(x, axis=-1),
                         lambda x: _extremum_grad(x, -1, np.max), -1),
    "cumsum_axis1": linear("cumsum_axis1", lambda x: np.cumsum(x, axis=-1),
                           lambda v, s: np.cumsum(v[..., ::-1], axis=-1)[..., ::-1]),
    "cumprod_axis1": _scan("cumprod_axis1", lambda x: np.cumprod(x, axis=-1), _cumprod_jacobian),
    "logcumsumexp_axis1": _scan("logcumsumexp_axis1", _logcumsumexp, _logcumsumexp_jacobian),
}
