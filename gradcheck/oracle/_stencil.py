"""The stencil method of :func:`gradcheck.oracle.jacobian.fd_jacobian`: 5 points per column.

The coloured strategy compresses sparse Jacobians; a dense one needs one FD
direction per column, ``e_c``.  The Richardson table of
:func:`gradcheck.oracle.fd.directional_derivatives`
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
  (``noise`` measured per output element by :func:`gradcheck.oracle.fd.noise_level` along a few
  dense
  random directions, which move every input, so that every rounding of ``f`` shows);
  ``p5`` and ``p5 - p4`` are within ``sum |w_i| a_i / h`` of their exact values (their own
  weights ``w``).  The error estimate is ``|p5 - p4| + round(p5 - p4) + round(p5)``.

The stencil has one redundant value, not the stability checks of a Richardson table; three
guards keep its estimate honest:

* A rounded point (``|x_c| < h``: ``x_c + s h`` loses low bits of ``x_c``) moves ``f`` by
  ``J_c e`` with ``|e| <= eps h``: the exact rounding ``e`` (two-sum) is added to the estimate,
  ``(|p5| + |p5 - p4|) sum |w_i| |e_i| / h``.
* A column is recomputed with the Richardson table
(:func:`gradcheck.oracle.fd.directional_derivatives`,
  with its retries at smaller steps) where its estimate is non-finite (a step left the domain:
  ``log`` near 0), where its points round by more than ``1e-12`` relative (``|x_c| >> h``), or
  where its truncation estimate (the part of ``|p5 - p4|`` that rounding does not explain) is
  above ``1e-8`` relative (the steps are too large for ``f`` there: a kink or a pole within
  ``2h``; a kink makes the fifth divided difference ``O(slope change / h^4)`` except for kink
  positions in a set of width ``~1e-8 h``).  Such a column takes the table's values.
* A few columns (the four with the largest relative estimate, and four random ones) are
  computed again with the same stencil at a quarter of the step, in one more batched call:
  truncation ~1000 times smaller, rounding 4 times larger, nodes between the first stencil's.
  Where an element of the two disagrees beyond the sum of their estimates (with the
  localization's safety factor), the stencil's error model does not hold at ``x`` (``f`` is not
  smooth on the scale ``h``, or has structure the nodes alias) and every column is recomputed
  with the table.  On the spot-checked columns each element keeps the estimate with the
  smaller error.

The noise points go into the same batched call as the stencil's points (a few ms of per-call
overhead for a vmapped function are not small next to f's own cost at n = 1000).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gradcheck.oracle import error_model, fd

_H_FACTOR = error_model.DEFAULT_MODEL.dense_h_factor
_NODES = np.array([-1.0, -0.5, 0.5, 1.0, 2.0])  # in units of h; f(x) is the sixth node, s = 0
# derivative weights at s = 0 (in units of 1/h) on _NODES; the weight of f(x) is separate
_W4 = np.array([1.0 / 6, -4.0 / 3, 4.0 / 3, -1.0 / 6, 0.0])  # degree 4 (s = 0 weight: 0)
_W5 = np.array([1.0 / 9, -16.0 / 15, 16.0 / 9, -1.0 / 3, 1.0 / 90])
_W5_0 = -0.5  # degree 5, the weight of f(x)
_NOISE_DIRECTIONS = error_model.DEFAULT_MODEL.dense_noise_directions
_NOISE_SHRINK = error_model.DEFAULT_MODEL.dense_noise_shrink
_RTOL = error_model.DEFAULT_MODEL.dense_rtol
_FLOOR = error_model.DEFAULT_MODEL.dense_floor
_SPOT_COLUMNS = error_model.DEFAULT_MODEL.dense_spot_columns
_SPOT_SHRINK = error_model.DEFAULT_MODEL.dense_spot_shrink
_ARG_RTOL = error_model.DEFAULT_MODEL.dense_arg_rtol
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
                     seed: int = 0, model: error_model.ErrorModel = error_model.DEFAULT_MODEL
                     ) -> DenseJacobian:
    """FD Jacobian of ``f_batch`` at ``x`` (every column), from the 5-point stencil, with the
    guards of the module docstring.  ``table(cols)`` computes the columns ``cols`` with the
    Richardson table: values and errors ``(len(cols), m)`` and the evaluations spent."""
    x = np.asarray(x, dtype=np.float64).ravel()
    f0 = np.asarray(f0, dtype=np.float64).ravel()
    n = x.size
    h = fd.initial_step(x, np.ones(1)) * (_H_FACTOR / fd._H0_FACTOR)  # a power of two
    moved = _argument_rounding(x, h)  # (n,) relative effect of the rounded points
    val, err, trunc, noise = _stencil(f_batch, x, f0, h, moved, seed)  # (n, m); noise (m,)
    evaluations = 6 * _NOISE_DIRECTIONS + len(_NODES) * n
    redo = _columns_to_recompute(moved, val, err, trunc)
    spot = _spot_columns(val, err, redo, seed)
    how = (f"5-point stencil per column (dense pattern), {spot.size} spot-checked at "
           f"1/{int(1 / _SPOT_SHRINK)} of the step")
    val, err = val.copy(), err.copy()
    if spot.size:
        s_h = h * _SPOT_SHRINK
        s_val, s_err, _, _ = _stencil(f_batch, x, f0, s_h, _argument_rounding(x[spot], s_h),
                                      seed, spot, noise)
        evaluations += len(_NODES) * spot.size
        if not np.all(model.estimates_agree(val[spot], err[spot], s_val, s_err,
                                            np.abs(val[spot]) + np.abs(s_val))):
            # the stencil's error model does not hold at x: the table for every column
            redo = np.ones(n, dtype=bool)
            how += " (failed: every column recomputed with the Richardson table)"
        else:  # both estimates hold: per element, the one with the smaller error
            take = (s_err < err[spot]) | (~np.isfinite(err[spot]) & np.isfinite(s_err))
            val[spot] = np.where(take, s_val, val[spot])
            err[spot] = np.where(take, s_err, err[spot])
    if redo.any():
        cols = np.flatnonzero(redo)
        t_val, t_err, t_evals = table(cols)
        evaluations += t_evals
        val[cols], err[cols] = t_val, t_err
        if not how.endswith("table)"):
            how += f"; {cols.size} of {n} columns recomputed with the Richardson table"
    return DenseJacobian(val.T, err.T, evaluations, int(redo.sum()), how)


def _noise_directions(n: int, seed: int) -> np.ndarray:
    """A few random dense sign directions: every input moves, so every rounding in ``f``
    shows in the noise measured along them."""
    return np.random.default_rng(seed).choice((-1.0, 1.0), size=(_NOISE_DIRECTIONS, n))


def _stencil(f_batch: Callable, x: np.ndarray, f0: np.ndarray, h: float, moved: np.ndarray,
             seed: int, columns: np.ndarray | None = None, noise: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``p5``, its error estimate and the truncation part ``|p5 - p4|`` for ``columns``
    (default: all), ``(len(columns), m)`` each, and the measured noise ``(m,)``.  ``moved``:
    :func:`_argument_rounding` of those columns at ``h``.  Without
    ``noise`` the noise points (at ``h * _NOISE_SHRINK``) are evaluated in the first batched
    call with the stencil's points."""
    n = x.size
    columns = np.arange(n) if columns is None else np.asarray(columns)
    per_call = max(1, _POINTS_PER_CALL // (len(_NODES) * max(n, 1)))
    extra = np.empty((0, n))
    if noise is None:
        delta = np.full(_NOISE_DIRECTIONS, h * _NOISE_SHRINK)
        extra = fd._noise_points(x, _noise_directions(n, seed), delta)
    out = []
    for start in range(0, columns.size, per_call):
        cols = columns[start:start + per_call]
        X = np.empty((len(extra) + cols.size * len(_NODES), n))
        X[:len(extra)] = extra
        S = X[len(extra):].reshape(cols.size, len(_NODES), n)
        S[...] = x
        S[np.arange(cols.size), :, cols] += h * _NODES
        with np.errstate(all="ignore"):
            V = fd._evaluate(f_batch, X, len(X))
        if len(extra):  # the first call carried the noise points
            noise = np.max(fd._noise_from(V[:len(extra)], f0), axis=0)
            V, extra = V[len(extra):], np.empty((0, n))
        assert noise is not None  # given, or measured by the first call
        a0 = np.maximum(fd.EPS64 * np.abs(f0), fd._NOISE_BOUND * noise)
        with np.errstate(all="ignore"):
            out.append(_combine(V.reshape(cols.size, len(_NODES), -1), f0, a0, noise, h,
                                moved[start:start + per_call]))
    val, err, trunc = (np.concatenate(p) for p in zip(*out, strict=True))
    return val, err, trunc, noise  # type: ignore[return-value]


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


def _columns_to_recompute(moved: np.ndarray, val: np.ndarray, err: np.ndarray,
                          trunc: np.ndarray) -> np.ndarray:
    """Columns (bool, ``(n,)``) the stencil cannot vouch for: a non-finite estimate, inexact
    steps, or a truncation estimate above ``_RTOL`` relative.  Rounding alone is not a reason:
    the estimate accounts for it, and the table's retries at smaller steps would add to it."""
    with np.errstate(all="ignore"):
        exact = moved <= _ARG_RTOL
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
    """Columns to spot-check: the ``_SPOT_COLUMNS / 2`` kept columns with the largest relative
    error estimate and as many random kept ones (sorted, distinct)."""
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
