"""The FD Jacobian of a localization where the pattern is dense: one 5-point stencil per column.

:mod:`gradcheck.checks._sparse_jacobian` compresses sparse Jacobians; a dense one needs one FD
direction per column, ``e_c``.  The Richardson table of :func:`gradcheck.fd.directional_derivatives`
spends 6 noise points and ``2 x 5`` table points on each; here each column costs 5 points and the
noise is measured once for the whole Jacobian.

The maths
---------
With ``h`` a power of two (``2^-6 max(1, rms(x))``), ``f`` is evaluated at ``x + s h e_c`` for
``s`` in ``(-1, -1/2, 1/2, 1, 2)``; with ``f(x)`` (known) that is six values of ``f`` along
``e_c``.

* ``p4``: the derivative at 0 of the polynomial of degree 4 through ``s = 0, +-1/2, +-1``:
  ``(8 (f(h/2) - f(-h/2)) - (f(h) - f(-h))) / (6 h)``, the Richardson extrapolation of the
  central differences at ``h`` and ``h/2``.  Its error is ``-f^(5)(xi) h^4 / 480`` (for a
  node, ``f^(5)/5!`` times ``w'(0) = h^4 / 4``, ``w(t) = t (t^2 - h^2/4) (t^2 - h^2)``).
* ``p5``: the derivative at 0 of the polynomial of degree 5 through all six values; it is
  returned.  ``p5 - p4 = f[0, +-h/2, +-h, 2h] w'(0)``: the fifth divided difference is
  ``f^(5)(xi') / 5!``, so ``|p5 - p4|`` is, to leading order, ``p4``'s truncation error, and
  ``p5`` is one order more accurate (its error is ``O(h^5)``): ``|p5 - p4|`` bounds ``p5``'s
  truncation error with a factor ``~1/h`` to spare when ``f`` is smooth on the scale ``h``.
* Rounding: every value of ``f`` is within ``a_i = max(eps |f_i|, 3 noise)`` of the exact one
  (``noise`` measured per output element by :func:`gradcheck.fd.noise_level` along a few dense
  random directions, which move every input, so that every rounding of ``f`` shows);
  ``p5`` and ``p5 - p4`` are within ``sum |w_i| a_i / h`` of their exact values (their own
  weights ``w``).  The error estimate is ``|p5 - p4| + round(p5 - p4) + round(p5)``.

The stencil has one redundant value, not the stability checks of a Richardson table; three
guards keep its estimate honest:

* A rounded point (``|x_c| < h``: ``x_c + s h`` loses low bits of ``x_c``) moves ``f`` by
  ``J_c e`` with ``|e| <= eps h``: the exact rounding ``e`` (two-sum) is added to the estimate,
  ``(|p5| + |p5 - p4|) sum |w_i| |e_i| / h``.
* A column is recomputed with the Richardson table (:func:`gradcheck.fd.directional_derivatives`,
  with its retries at smaller steps) where its estimate is non-finite (a step left the domain:
  ``log`` near 0), where its points round by more than ``1e-12`` relative (``|x_c| >> h``), or
  where its truncation estimate (the part of ``|p5 - p4|`` that rounding does not explain) is
  above ``1e-8`` relative (the steps are too large for ``f`` there: a kink or a pole within
  ``2h``; a kink makes the fifth divided difference ``O(slope change / h^4)`` except for kink
  positions in a set of width ``~1e-8 h``).  Such a column takes the table's values.
* A few columns (the two with the largest relative estimate, and two random ones) are also
  computed with the table; where an element of the two disagrees beyond the sum of their
  estimates (with the localization's safety factor), the stencil's error model does not hold
  at ``x`` and every column is recomputed with the table.  On the spot-checked columns each
  element keeps the estimate, stencil or table, with the smaller error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import fd, tolerance

_H_FACTOR = 2.0**-6
_NODES = np.array([-1.0, -0.5, 0.5, 1.0, 2.0])  # in units of h; f(x) is the sixth node, s = 0
# derivative weights at s = 0 (in units of 1/h) on _NODES; the weight of f(x) is separate
_W4 = np.array([1.0 / 6, -4.0 / 3, 4.0 / 3, -1.0 / 6, 0.0])  # degree 4 (s = 0 weight: 0)
_W5 = np.array([1.0 / 9, -16.0 / 15, 16.0 / 9, -1.0 / 3, 1.0 / 90])
_W5_0 = -0.5  # degree 5, the weight of f(x)
_NOISE_DIRECTIONS = 3
_NOISE_SHRINK = 2.0**-20  # noise points at h * this: the smooth part of a 4th difference vanishes
_RTOL = 1e-8  # a column with a truncation estimate above this (relative) is recomputed
_FLOOR = 1e-3  # ... relative to max(|value|, this fraction of the column's largest element)
_SPOT_COLUMNS = 4
_ARG_RTOL = 1e-12  # a column whose rounded points change the stencil more (relative) is redone
_POINTS_PER_CALL = 6_000_000  # floats per batched call (5 points x columns x n): ~48 MB


@dataclass(frozen=True)
class DenseJacobian:
    """The FD block ``(m, n)`` with its error estimate, the evaluations of ``f`` spent, the
    columns recomputed with the Richardson table, and one line for the report."""

    value: np.ndarray
    error: np.ndarray
    evaluations: int
    recomputed: int
    how: str


def stencil_jacobian(f_batch: Callable, x: np.ndarray, f0: np.ndarray, *,
                     table: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, int]],
                     seed: int = 0) -> DenseJacobian:
    """FD Jacobian of ``f_batch`` at ``x`` (every column), from the 5-point stencil, with the
    guards of the module docstring.  ``table(cols)`` computes the columns ``cols`` with the
    Richardson table: values and errors ``(len(cols), m)`` and the evaluations spent."""
    x = np.asarray(x, dtype=np.float64).ravel()
    f0 = np.asarray(f0, dtype=np.float64).ravel()
    n = x.size
    h = fd.initial_step(x, np.ones(1)) * (_H_FACTOR / fd._H0_FACTOR)  # a power of two
    noise = _noise(f_batch, x, f0, h, seed)
    val, err, trunc = _stencil(f_batch, x, f0, h, noise)  # (n, m) each
    evaluations = 6 * _NOISE_DIRECTIONS + len(_NODES) * n
    redo = _columns_to_recompute(x, h, val, err, trunc)
    spot = _spot_columns(val, err, redo, seed)
    cols = np.union1d(np.flatnonzero(redo), spot)
    how = f"5-point stencil per column (dense pattern), {spot.size} spot-checked"
    if cols.size == 0:
        return DenseJacobian(val.T, err.T, evaluations, 0, how)
    t_val, t_err, t_evals = table(cols)
    evaluations += t_evals
    at = np.searchsorted(cols, spot)
    if not np.all(_agree(val[spot], err[spot], t_val[at], t_err[at])):
        # the stencil's error model does not hold at x: the table for every column
        rest = np.setdiff1d(np.arange(n), cols)
        r_val, r_err, r_evals = table(rest)
        evaluations += r_evals
        t_val = np.concatenate([t_val, r_val])[np.argsort(np.concatenate([cols, rest]))]
        t_err = np.concatenate([t_err, r_err])[np.argsort(np.concatenate([cols, rest]))]
        cols, redo = np.arange(n), np.ones(n, dtype=bool)
        how += " (failed: every column recomputed with the Richardson table)"
    elif redo.any():
        how += f"; {int(redo.sum())} of {n} columns recomputed with the Richardson table"
    # recomputed columns take the table; spot-checked ones, per element, the smaller error
    take = redo[cols, None] | (t_err < err[cols]) | (~np.isfinite(err[cols]) & np.isfinite(t_err))
    val, err = val.copy(), err.copy()
    val[cols] = np.where(take, t_val, val[cols])
    err[cols] = np.where(take, t_err, err[cols])
    return DenseJacobian(val.T, err.T, evaluations, int(redo.sum()), how)


def _noise(f_batch: Callable, x: np.ndarray, f0: np.ndarray, h: float, seed: int) -> np.ndarray:
    """Measured rounding noise per output element: the largest over a few random dense sign
    directions (every input moves, so every rounding in ``f`` shows)."""
    dirs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(_NOISE_DIRECTIONS, x.size))
    delta = np.full(_NOISE_DIRECTIONS, h * _NOISE_SHRINK)
    return np.max(fd.noise_level(f_batch, x, dirs, delta, f0), axis=0)


def _stencil(f_batch: Callable, x: np.ndarray, f0: np.ndarray, h: float, noise: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``p5``, its error estimate and the truncation part ``|p5 - p4|``, ``(n, m)`` each."""
    n = x.size
    per_call = max(1, _POINTS_PER_CALL // (len(_NODES) * max(n, 1)))
    a0 = np.maximum(fd.EPS64 * np.abs(f0), fd._NOISE_BOUND * noise)
    moved = _argument_rounding(x, h)  # (n,) relative effect of the rounded points
    out = []
    for start in range(0, n, per_call):
        cols = np.arange(start, min(start + per_call, n))
        X = np.repeat(x[None, None, :], cols.size * len(_NODES), axis=0)
        X = X.reshape(cols.size, len(_NODES), n)
        X[np.arange(cols.size), :, cols] += h * _NODES
        with np.errstate(all="ignore"):
            V = fd._evaluate(f_batch, X.reshape(-1, n), len(X.reshape(-1, n)))
            out.append(_combine(V.reshape(cols.size, len(_NODES), -1), f0, a0, noise, h,
                                moved[cols]))
    return tuple(np.concatenate(parts) for parts in zip(*out, strict=True))  # type: ignore


def _combine(V: np.ndarray, f0: np.ndarray, a0: np.ndarray, noise: np.ndarray, h: float,
             moved: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stencil's value, error and truncation estimate (``|p5 - p4|`` less what rounding
    explains) from ``V (cols, 5, m)``."""
    p4 = np.einsum("k,ckm->cm", _W4, V) / h
    p5 = (np.einsum("k,ckm->cm", _W5, V) + _W5_0 * f0) / h
    a = np.maximum(fd.EPS64 * np.abs(V), fd._NOISE_BOUND * noise)
    round5 = (np.einsum("k,ckm->cm", np.abs(_W5), a) + abs(_W5_0) * a0) / h
    round_d = (np.einsum("k,ckm->cm", np.abs(_W5 - _W4), a) + abs(_W5_0) * a0) / h
    diff = np.abs(p5 - p4)
    # a rounded point x_c + s h - e_s moves f by about J_c e_s: (|p5| + diff) x moved bounds it
    moved = (np.abs(p5) + diff) * moved[:, None]
    round5, round_d = round5 + moved, round_d + moved
    # |p5 - J| <= |t5| + round5 with the truncation |t5| <= |t4| ~ |p5 - p4| exactly computed,
    # which is within round_d of the computed diff; the truncation the stencil sees is the part
    # of diff that rounding does not explain
    return p5, diff + round_d + round5, np.maximum(diff - round_d, 0.0)


def _columns_to_recompute(x: np.ndarray, h: float, val: np.ndarray, err: np.ndarray,
                          trunc: np.ndarray) -> np.ndarray:
    """Columns (bool, ``(n,)``) the stencil cannot vouch for: a non-finite estimate, inexact
    steps, or a truncation estimate above ``_RTOL`` relative.  Rounding alone is not a reason:
    the estimate accounts for it, and the table's retries at smaller steps would add to it."""
    with np.errstate(all="ignore"):
        exact = _argument_rounding(x, h) <= _ARG_RTOL
        size = np.abs(val)
        floor = _FLOOR * np.max(np.where(np.isfinite(size), size, 0.0), axis=1, keepdims=True)
        small = trunc <= _RTOL * np.maximum(size, floor)
        finite = np.isfinite(val) & np.isfinite(err)
    return ~exact | ~np.all(small & finite, axis=1)


def _argument_rounding(x: np.ndarray, h: float) -> np.ndarray:
    """Per column, ``sum_s (|w5_s| + |w4_s|) |e_s| / h``: the relative change of the stencil
    when the points ``x_c + s h`` are rounded by ``e_s`` (exactly, by Knuth's two-sum; 0 where
    the points are exact)."""
    steps = h * _NODES
    with np.errstate(all="ignore"):
        total = x[:, None] + steps
        back = total - x[:, None]
        e = (x[:, None] - (total - back)) + (steps - back)  # x_c + s h == total + e, exactly
        rel = np.abs(e) @ (np.abs(_W5) + np.abs(_W4)) / h
    return np.where(np.isfinite(rel), rel, np.inf)


def _spot_columns(val: np.ndarray, err: np.ndarray, redo: np.ndarray, seed: int) -> np.ndarray:
    """Columns to check against the table: the two kept columns with the largest relative error
    estimate and two random kept ones (sorted, distinct)."""
    kept = np.flatnonzero(~redo)
    if kept.size == 0:
        return kept
    with np.errstate(all="ignore"):
        rel = np.max(err[kept] / np.maximum(np.abs(val[kept]), 1e-300), axis=1)
    worst = kept[np.argsort(-rel, kind="stable")[:_SPOT_COLUMNS // 2]]
    rest = np.setdiff1d(kept, worst)
    pick = np.random.default_rng(seed).choice(rest, size=min(rest.size, _SPOT_COLUMNS - worst.size),
                                              replace=False)
    return np.union1d(worst, pick)


def _agree(v1: np.ndarray, e1: np.ndarray, v2: np.ndarray, e2: np.ndarray) -> np.ndarray:
    """Whether two FD estimates agree within their errors (the localization's allowance)."""
    allowed = tolerance.FD_SAFETY * (e1 + e2) + tolerance.ROUNDING_GAMMA * fd.EPS64 * (
        np.abs(v1) + np.abs(v2))
    with np.errstate(invalid="ignore"):
        return np.abs(v1 - v2) <= allowed
