"""The reference finite-difference oracle: directional derivatives in float64 with error estimates.

The maths
---------
For a function ``f: R^n -> R^m`` (flattened), a point ``x`` and a direction ``u`` we estimate the
directional derivative ``J(x) u`` for every output element.

*Central differences.*  ``D(h) = (f(x + h u) - f(x - h u)) / (2 h)`` has the expansion
``D(h) = J u + c1 h^2 + c2 h^4 + ...`` (only even powers), so a geometric step sequence
``h_k = h0 / 2^k`` can be combined by Richardson extrapolation::

    T[k, 0] = D(h_k)
    T[k, j] = T[k, j-1] + (T[k, j-1] - T[k-1, j-1]) / (4^j - 1)

Each column removes one more power of ``h``.  The truncation error of ``T[k, j-1]`` is estimated
by ``|T[k, j] - T[k, j-1]|`` and the stability of column ``j`` by ``|T[k, j] - T[k-1, j]|``;
the larger of the two is the truncation estimate of ``T[k, j]``.  To it we add the rounding error
of the differences, ``eps64 * (|f(x+h u)| + |f(x-h u)|) / (2 h)`` amplified by the Richardson
weights.  Per output element the table entry with the smallest total estimate is returned.

*One-sided differences.*  ``D+(h) = (f(x+h u) - f(x)) / h`` and ``D-(h) = (f(x) - f(x-h u)) / h``
contain every power of ``h``; their Richardson weights are ``1 / (2^j - 1)``.  They come free
with the central table (one extra evaluation of ``f(x)``).  Where the left and right limits
disagree far beyond their error estimates the function is not differentiable at ``x`` along ``u``
(a kink: ``relu(0)``, ``max`` with a tie, ``abs(0)``) and the oracle abstains.

*Steps.*  ``h0 = 2^-3 * max(1, rms(x)) / rms(u)``: the steps scale with the size of ``x``.
Rows in which ``f`` is non-finite (a step left the domain) are dropped; if no row survives the
whole table is recomputed with steps 2^-8 times smaller (twice at most).

All evaluations of one call are stacked into a single batch ``f_batch(X)`` with
``X.shape == (B, n)``, so a vectorized backend evaluates them in one call.  The oracle never
differentiates in low precision: ``x`` and every evaluation are float64.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

EPS64 = float(np.finfo(np.float64).eps)
DEFAULT_LEVELS = 7
_H0_FACTOR = 2.0**-3
_RETRY_SHRINK = 2.0**-8
_KINK_FACTOR = 10.0  # one-sided limits must disagree by this many error estimates
_KINK_RELATIVE = 1e-6  # ... and by this fraction of their size (a kink changes the slope by O(1))

BatchFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class FDEstimate:
    """Directional derivatives for ``P`` directions and ``m`` output elements.

    ``value`` and ``error`` have shape ``(P, m)``.  ``error`` is the raw (uninflated) estimate of
    ``|value - J u|``.  ``kink`` marks elements where left and right derivatives disagree.
    ``curvature`` is a rough second directional derivative ``u^T f'' u`` (one mid-table second
    difference, no extrapolation) used only to size rounding bounds.  ``steps`` are the step sizes of the table rows (``(P, K)``) and ``table`` the central
    differences ``D(h_k)`` (``(P, K, m)``) for convergence plots.
    """

    value: np.ndarray
    error: np.ndarray
    curvature: np.ndarray
    kink: np.ndarray
    left: np.ndarray
    right: np.ndarray
    steps: np.ndarray
    table: np.ndarray
    evaluations: int

    @property
    def finite(self) -> np.ndarray:
        """Elements whose estimate is usable (finite value and finite error)."""
        return np.isfinite(self.value) & np.isfinite(self.error)


def initial_step(x: np.ndarray, u: np.ndarray) -> float:
    """The largest step of the table along ``u``: scaled with the size of ``x``."""
    rms_x = float(np.sqrt(np.mean(np.square(x)))) if x.size else 0.0
    rms_u = float(np.sqrt(np.mean(np.square(u)))) if u.size else 1.0
    return _H0_FACTOR * max(1.0, rms_x) / max(rms_u, 1e-300)


def directional_derivatives(
    f_batch: BatchFn,
    x: np.ndarray,
    directions: np.ndarray,
    *,
    levels: int = DEFAULT_LEVELS,
    h0: float | None = None,
    chunk: int = 4096,
    f0: np.ndarray | None = None,
    one_sided: bool = True,
) -> FDEstimate:
    """Estimate ``J(x) u`` for each row ``u`` of ``directions`` with an error estimate.

    ``f_batch`` maps a ``(B, n)`` float64 array of points to a ``(B, m)`` array of outputs.
    ``f0``: ``f(x)`` when the caller already has it (saves an evaluation; ``evaluations`` then
    counts the table points only).  ``one_sided=False`` skips the two one-sided tables, two
    thirds of the post-processing: no kink detection (``kink`` all False, ``left``/``right``
    NaN); for callers that do not use it (:func:`jacobian`).
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    dirs = np.atleast_2d(np.asarray(directions, dtype=np.float64))
    if f0 is None:
        f0 = _evaluate(f_batch, x[None, :], chunk)[0]
        evaluations = 1
    else:
        f0 = np.asarray(f0, dtype=np.float64).ravel()
        evaluations = 0
    shrink = 1.0
    for _attempt in range(3):
        h = np.array([(h0 or initial_step(x, u)) * shrink for u in dirs])
        steps = h[:, None] * 0.5 ** np.arange(levels)[None, :]  # (P, K)
        est, n_eval = _tables(f_batch, x, dirs, steps, f0, chunk, one_sided)
        evaluations += n_eval
        if np.all(np.isfinite(est[0])) or not np.all(np.isfinite(f0)):
            break
        shrink *= _RETRY_SHRINK
    value, error, left, el, right, er, table, curvature = est
    kink = np.isfinite(left) & np.isfinite(right) & (
        np.abs(left - right) > _KINK_FACTOR * (el + er) + _KINK_RELATIVE * (np.abs(left) + np.abs(right))
    )
    return FDEstimate(value, error, curvature, kink, left, right, steps, table, evaluations)


def _evaluate(f_batch: BatchFn, points: np.ndarray, chunk: int) -> np.ndarray:
    outs = [np.asarray(f_batch(points[i : i + chunk]), dtype=np.float64)
            for i in range(0, len(points), chunk)]
    out = np.concatenate(outs, axis=0)
    return out.reshape(len(points), -1)


def _tables(f_batch, x, dirs, steps, f0, chunk, one_sided=True):
    """Evaluate ``f`` at ``x +- h_k u_p`` in one batch and build the three Richardson tables."""
    P, K = steps.shape
    offsets = steps[:, :, None] * dirs[:, None, :]  # (P, K, n)
    points = np.concatenate([x + offsets, x - offsets], axis=1).reshape(P * 2 * K, -1)
    with np.errstate(all="ignore"):
        values = _evaluate(f_batch, points, chunk).reshape(P, 2, K, -1)
        fp, fm = values[:, 0], values[:, 1]  # (P, K, m)
        hk = steps[:, :, None]
        central = (fp - fm) / (2 * hk)
        round_c = EPS64 * (np.abs(fp) + np.abs(fm)) / (2 * hk)
        c_val, c_err = _richardson(central, round_c, 4.0)
        if one_sided:
            right = (fp - f0) / hk
            left = (f0 - fm) / hk
            round_1 = EPS64 * (np.abs(fp) + np.abs(fm) + 2 * np.abs(f0)) / hk
            r_val, r_err = _richardson(right, round_1, 2.0)
            l_val, l_err = _richardson(left, round_1, 2.0)
        else:
            r_val = r_err = l_val = l_err = np.full_like(c_val, np.nan)
        mid = K // 2
        curvature = (fp[:, mid] - 2 * f0 + fm[:, mid]) / steps[:, mid, None] ** 2
    return (c_val, c_err, l_val, l_err, r_val, r_err, central, curvature), P * 2 * K


def _richardson(d: np.ndarray, rounding: np.ndarray, base: float) -> tuple[np.ndarray, np.ndarray]:
    """Richardson-extrapolate ``d`` (shape ``(P, K, m)``) along K; return best value and error.

    ``base`` is 4 for central differences (even powers) and 2 for one-sided ones.
    """
    P, K, m = d.shape
    # Candidates are visited column by column (j), row by row, keeping a running minimum of
    # the error per element: the same choice as an argmin over all candidates (strict ``<``
    # keeps the first minimum; NaN errors never win) without materialising the (P, C, m)
    # candidate stack.  In-place updates keep the floating-point results bit-identical.
    best_val = np.full((P, m), np.nan)
    best_err = np.full((P, m), np.inf)
    prev = d
    amp = 1.0
    # column 0 entries have no error estimate of their own except via column 1
    for j in range(1, K):
        w = base**j - 1.0
        cur = prev[:, 1:] - prev[:, :-1]
        cur /= w
        cur += prev[:, 1:]  # rows j..K-1
        amp *= (base**j + 1.0) / w
        trunc = cur - prev[:, 1:]
        np.abs(trunc, out=trunc)
        if cur.shape[1] > 1:
            stab = np.abs(np.diff(cur, axis=1))
            np.maximum(trunc[:, 1:], stab, out=trunc[:, 1:])
            np.maximum(trunc[:, 0], stab[:, 0], out=trunc[:, 0])
        err = trunc
        err += amp * rounding[:, j:]
        for row in range(cur.shape[1]):
            better = err[:, row] < best_err
            np.copyto(best_err, err[:, row], where=better)
            np.copyto(best_val, cur[:, row], where=better)
        prev = cur
    return best_val, best_err


def jacobian(
    f_batch: BatchFn,
    x: np.ndarray,
    *,
    levels: int = 5,
    chunk: int = 4096,
    f0: np.ndarray | None = None,
    columns: int = 128,
) -> tuple[np.ndarray, np.ndarray]:
    """Full Jacobian ``(m, n)`` and its error estimate, one coordinate direction per column.

    Used to localize a failed projected check.  Every coordinate is stepped from the same
    ``h0 = 2^-3 * max(1, rms(x))``: ``initial_step`` of a unit vector ``e_b`` would be
    ``sqrt(n)`` times larger (rms(e_b) = 1/sqrt(n)), steps of ~4 at n = 1000.  The kink tables
    are skipped (unused here) and ``columns`` directions share one batched call, which bounds
    memory at ``2 * levels * columns`` points per call.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    n = x.size
    if f0 is None:
        f0 = _evaluate(f_batch, x[None, :], chunk)[0]
    f0 = np.asarray(f0, dtype=np.float64).ravel()
    h0 = initial_step(x, np.ones(1))
    J = np.empty((f0.size, n))
    E = np.empty((f0.size, n))
    for start in range(0, n, columns):
        stop = min(start + columns, n)
        dirs = np.zeros((stop - start, n))
        dirs[np.arange(stop - start), np.arange(start, stop)] = 1.0
        est = directional_derivatives(f_batch, x, dirs, levels=levels, h0=h0, chunk=chunk,
                                      f0=f0, one_sided=False)
        J[:, start:stop] = est.value.T
        E[:, start:stop] = est.error.T
    return J, E
