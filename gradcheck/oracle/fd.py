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
the larger of the two is the truncation estimate of ``T[k, j]``.  A column with a single entry
has no stability check and is never used (its correction is divided by ``4^j - 1`` and looks
tiny even when the entries it combines are wrong, e.g. when the largest steps cross a kink).  To
it we add the rounding error of the differences, ``eps64 * (|f(x+h u)| + |f(x-h u)|) / (2 h)``
amplified by the Richardson weights.  Per output element the table entry with the smallest total
estimate is returned.

*One-sided differences.*  ``D+(h) = (f(x+h u) - f(x)) / h`` and ``D-(h) = (f(x) - f(x-h u)) / h``
contain every power of ``h``; their Richardson weights are ``1 / (2^j - 1)``.  They come free
with the central table (one extra evaluation of ``f(x)``).  Where the left and right limits
disagree far beyond their error estimates the function is not differentiable at ``x`` along ``u``
(a kink: ``relu(0)``, ``max`` with a tie, ``abs(0)``) and the oracle abstains.

*Steps.*  ``h0 = 2^-3 * max(1, rms(x)) / rms(u)`` rounded down to a power of two: the steps scale
with the size of ``x`` and ``h u`` is exact.  The direction is rounded so that ``x +- h u`` is
exact too (:func:`representable_direction`); otherwise the rounding of the *arguments*,
``eps |x| / h`` relative, dominates the error at small steps and is invisible to the table.
Elements whose estimate is non-finite (a step left the domain: ``log`` near 0) or whose relative
error estimate exceeds ``1e-8`` (large steps crossed a pole or a kink near ``x``) are recomputed
with steps ``2^-8`` times smaller, twice at most; each element keeps its best attempt.

*Noise.*  Rounding is not always ``eps |f|``: ``f`` is evaluated at 6 points ``x + t delta u``
(``delta = h0 2^-22``) and the high-order differences there measure its actual noise (an
ill-conditioned ``cos(exp(z))``).  A quantized ``f`` (a value computed by cancellation, like
``(1 + erf(z)) / 2`` far in the left tail, multiples of 2^-54) can sit on one step of its
staircase over all 6 points and show no noise at all; where ``f`` did not move there although
the table says it moves on both sides, the noise is measured again a quarter of the smallest
step apart (:func:`_unresolved`).

All evaluations of one call are stacked into a single batch ``f_batch(X)`` with
``X.shape == (B, n)``, so a vectorized backend evaluates them in one call.  The oracle never
differentiates in low precision: ``x`` and every evaluation are float64.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gradcheck.oracle.error_model import DEFAULT_MODEL

EPS64 = float(np.finfo(np.float64).eps)
#: the smallest normal float64: the absolute rounding of a value in the subnormal range where
#: an engine flushes subnormal results to zero (XLA on CPU) or an intermediate underflows
TINY64 = float(np.finfo(np.float64).tiny)
DEFAULT_LEVELS = DEFAULT_MODEL.fd_levels
_H0_FACTOR = DEFAULT_MODEL.fd_h0_factor
_RETRY_SHRINK = DEFAULT_MODEL.fd_retry_shrink
_RETRIES = DEFAULT_MODEL.fd_retries
CONVERGED_RTOL = DEFAULT_MODEL.fd_converged_rtol
_RETRY_FLOOR = DEFAULT_MODEL.fd_retry_floor
_NOISE_BOUND = DEFAULT_MODEL.fd_noise_bound
_KINK_FACTOR = DEFAULT_MODEL.fd_kink_factor
_KINK_RELATIVE = DEFAULT_MODEL.fd_kink_relative

BatchFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class FDEstimate:
    """Directional derivatives for ``P`` directions and ``m`` output elements.

    ``value`` and ``error`` have shape ``(P, m)``.  ``error`` is the raw (uninflated) estimate of
    ``|value - J u|``.  ``kink`` marks elements where left and right derivatives disagree.
    ``curvature`` is a rough second directional derivative ``u^T f'' u`` (one mid-table second
    difference, no extrapolation) used only to size rounding bounds.  ``steps`` are the step
    sizes of every row of every attempt (``(P, K * attempts)``) and ``table`` the central
    differences ``D(h_k)`` (``(P, K * attempts, m)``) for convergence plots.  ``directions`` are
    the directions actually differentiated along (the requested ones rounded by
    :func:`representable_direction`); AD results must be projected on these.
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
    directions: np.ndarray
    noise: np.ndarray

    @property
    def finite(self) -> np.ndarray:
        """Elements whose estimate is usable (finite value and finite error)."""
        return np.isfinite(self.value) & np.isfinite(self.error)


def initial_step(x: np.ndarray, u: np.ndarray) -> float:
    """The largest step of the table along ``u``: scaled with the size of ``x``, rounded down to
    a power of two (so every step ``h0 / 2^k`` and every product ``h u`` is exact).

    Non-finite entries of ``x`` (``-inf`` logits) are ignored: a step does not move them, so
    their column of the Jacobian is estimated as 0, which is the derivative there.  The root
    mean squares are computed scaled (no overflow for ``|x| > 1e154``).
    """
    return _step_from(_scale_of(x), u)


def _scale_of(x: np.ndarray) -> float:
    """``max(1, rms(x))`` over the finite entries (:func:`initial_step`)."""
    finite = np.isfinite(x)
    return max(1.0, _rms(x if bool(np.all(finite)) else x[finite]))


def _step_from(scale: float, u: np.ndarray) -> float:
    rms_u = _rms(u) if u.size else 1.0
    return _pow2_floor(_H0_FACTOR * scale / max(rms_u, 1e-300))


def screen_step(x: np.ndarray, u: np.ndarray) -> float:
    """The largest step of the screen's table along ``u`` (:func:`projected_derivatives`):
    :func:`initial_step` times ``screen_h0_shrink``."""
    return _step_from(_scale_of(np.asarray(x, dtype=np.float64).ravel()),
                      np.asarray(u, dtype=np.float64).ravel()) * _SCREEN_H0_SHRINK


def _rms(a: np.ndarray) -> float:
    """Root mean square scaled by ``max |a|``."""
    if a.size == 0:
        return 0.0
    if a.dtype == np.float64 and a.ndim == 1:
        # one pass (a BLAS dot) where the sum of squares neither overflows nor underflows:
        # the same value as the scaled formula below up to rounding
        with np.errstate(all="ignore"):
            ss = float(a @ a)
        if 1e-250 < ss < 1e250:
            return float(np.sqrt(ss / a.size))
    scale = float(np.max(np.abs(a)))
    if scale == 0.0 or not np.isfinite(scale):
        return scale
    return scale * float(np.sqrt(np.mean(np.square(a / scale))))


def _pow2_floor(h: float) -> float:
    return float(2.0 ** np.floor(np.log2(h))) if h > 0 and np.isfinite(h) else h


def representable_direction(x: np.ndarray, u: np.ndarray, h0: float, halvings: int, *,
                            grain: np.ndarray | None = None, out: np.ndarray | None = None
                            ) -> np.ndarray:
    """Round ``u`` so that ``x +- h u`` is computed exactly for every step ``h = h0 / 2^k``,
    ``k <= halvings`` (``h0`` a power of two).

    Otherwise ``x_j + h u_j`` is rounded to the spacing of ``x_j`` and the difference quotient
    picks up an error ``J r / h`` with ``|r_j| <= eps |x_j|`` that no error estimate of the table
    sees (it is smooth in ``h``).  Each displacement ``h0 u_j`` is rounded to a multiple of
    ``spacing(x_j) 2^halvings``; the direction changes by a relative ~1e-8 at most, and the
    checks use the rounded direction for the AD side as well.  (A step that carries ``x_j`` into
    a larger binade can still round; that is rare and bounded by the usual ``eps |x|``.)
    ``grain``: ``np.spacing(np.abs(x))`` when the caller rounds several directions at one point;
    ``out``: where to write the result (shape of ``u``).
    """
    g = (np.spacing(np.abs(x)) if grain is None else grain) * 2.0**halvings  # a power of 2
    with np.errstate(all="ignore"):
        d = np.multiply(h0, u, out=out)
        d /= g
        np.round(d, out=d)
        d *= g
        bad = ~np.isfinite(d)
        if np.any(bad):
            d[bad] = h0 * u[bad]
    d /= h0
    return d


def representable_directions(x: np.ndarray, directions: np.ndarray, h0: np.ndarray,
                             halvings: int) -> np.ndarray:
    """:func:`representable_direction` of every row of ``directions`` (``(P, n)``, steps
    ``h0[p]``), the same bits in two passes per row instead of five.

    With ``s = h0 / (spacing(|x|) 2^halvings)``, a power of two per element, the rounding is
    ``round(u s) / s``: every factor is a power of two, so ``u s`` is exactly ``h0 u / g`` and
    ``r / s`` exactly ``r g / h0`` as long as ``s`` is a finite normal number (it is not for
    ``|x|`` near the smallest normals: those rows take the plain formula)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    out = np.empty((len(directions), x.size))
    g = np.abs(x)
    np.spacing(g, out=g)
    one_step = len({float(hp) for hp in h0}) == 1
    g *= 2.0**halvings
    inverse: dict[float, np.ndarray | None] = {}
    tiny = np.finfo(np.float64).tiny
    for p, (u, hp) in enumerate(zip(directions, h0, strict=True)):
        hp = float(hp)
        if hp not in inverse:
            with np.errstate(all="ignore"):  # in place where one h0 serves every row
                q = np.divide(hp, g, out=g if one_step else None)
            inverse[hp] = q if bool(np.all(np.isfinite(q) & (q >= tiny))) else None
        s = inverse[hp]
        if s is None:
            representable_direction(x, u, hp, halvings, out=out[p])
            continue
        d = out[p]
        with np.errstate(all="ignore"):
            np.multiply(u, s, out=d)
            np.round(d, out=d)
            bad = ~np.isfinite(d)
            d /= s
        if np.any(bad):  # u non-finite or huge: as the plain formula, u itself
            d[bad] = u[bad]
    return out


@dataclass(frozen=True)
class _Tables:
    """The three Richardson results of one attempt (one set of steps)."""

    value: np.ndarray
    error: np.ndarray
    left: np.ndarray
    left_err: np.ndarray
    right: np.ndarray
    right_err: np.ndarray
    central: np.ndarray  # (P, K, m) raw central differences
    curvature: np.ndarray


def directional_derivatives(
    f_batch: BatchFn,
    x: np.ndarray,
    directions: np.ndarray,
    *,
    levels: int = DEFAULT_LEVELS,
    h0: float | np.ndarray | None = None,
    chunk: int = 4096,
    retries: int = _RETRIES,
    f0: np.ndarray | None = None,
    one_sided: bool = True,
    noise: np.ndarray | None = None,
    keep_table: bool = True,
) -> FDEstimate:
    """Estimate ``J(x) u`` for each row ``u`` of ``directions`` with an error estimate.

    ``f_batch`` maps a ``(B, n)`` float64 array of points to a ``(B, m)`` array of outputs.
    ``f0``: ``f(x)`` when the caller already has it (saves an evaluation; ``evaluations`` then
    counts the noise and table points only).  ``one_sided=False`` skips the two one-sided
    tables, two thirds of the post-processing: no kink detection (``kink`` all False,
    ``left``/``right`` NaN); for callers that do not use it (the FD Jacobian,
    :func:`gradcheck.oracle.jacobian.fd_jacobian`).
    The estimate is along :attr:`FDEstimate.directions`, ``directions`` rounded by
    :func:`representable_direction`; compare AD results along those.  Elements whose estimate is
    non-finite or has not converged are recomputed with steps ``2^-8`` times smaller, up to
    ``retries`` times; each element keeps the attempt with the smallest error estimate.
    ``h0``: the largest step instead of :func:`initial_step`, one for every direction or one
    per direction (rounded down to powers of two).
    ``noise``: the rounding noise ``(P, m)`` already measured along these directions (by an
    earlier call at larger steps): no noise points are evaluated.  It is a property of ``f``
    near ``x``, not of the steps, and measuring it again with fewer halvings would put the
    noise points at the table's own scale, where a kink looks like noise.
    ``keep_table=False``: :attr:`FDEstimate.table` is left empty (``(P, 0, m)``), for an
    estimate whose convergence is never shown (it holds ``P K m`` values per attempt).
    """
    if levels < 3:
        raise ValueError(f"levels={levels} must be at least 3 (a column needs two entries)")
    x = np.asarray(x, dtype=np.float64).ravel()
    raw = np.atleast_2d(np.asarray(directions, dtype=np.float64))
    if f0 is None:
        f0 = _evaluate(f_batch, x[None, :], chunk)[0]
        evaluations = 1
    else:
        f0 = np.asarray(f0, dtype=np.float64).ravel()
        evaluations = 0
    if h0 is None:
        h = np.array([initial_step(x, u) for u in raw])
    else:  # one step for every direction, or one per direction
        h = np.array([_pow2_floor(float(v)) for v in np.broadcast_to(h0, (len(raw),))])
    halvings = levels - 1 + 8 * retries
    dirs = np.stack([representable_direction(x, u, hp, halvings)
                     for u, hp in zip(raw, h, strict=True)])
    measured = noise is not None
    delta = h * 2.0**-halvings
    noise_rows = 0 if measured else 6 * len(dirs)
    evaluations += noise_rows
    # the points are made a block of calls at a time (:func:`_evaluate_rows`), never all at once
    per_call = max(1, min(chunk, BATCH_ELEMENTS // max(x.size, f0.size, 1)))
    best: _Tables | None = None
    all_steps, all_tables = [], []
    for attempt in range(retries + 1):
        steps = (h * _RETRY_SHRINK**attempt)[:, None] * 0.5 ** np.arange(levels)[None, :]
        rows = 2 * steps.size
        first = noise_rows if attempt == 0 else 0  # the noise points share the first calls

        def point(r: int, out: np.ndarray, steps: np.ndarray = steps, first: int = first
                  ) -> None:
            if r < first:
                _noise_row(x, dirs, delta, r, out)
            else:
                _table_row(x, dirs, steps, r - first, out)

        with np.errstate(all="ignore"):
            values = _evaluate_rows(f_batch, first + rows, per_call, point, x.size)
        if attempt == 0:
            noise_vals, values = values[:noise_rows], values[noise_rows:]
            if not measured:
                noise = _noise_from(noise_vals, f0)
        assert noise is not None  # given, or measured by the first attempt
        tab = _tables(values, steps, f0, noise, one_sided)
        evaluations += rows
        if attempt == 0 and not measured:  # a quantized f: measure its noise again where it
            # moves, redo the table
            wide = _unresolved(noise_vals, f0, tab, delta)
            if np.any(wide):
                evaluations += _remeasure_noise(f_batch, x, dirs, steps[:, -1] / 4, f0, wide,
                                                noise, chunk)
                tab = _tables(values, steps, f0, noise, one_sided)
        all_steps.append(steps)
        all_tables.append(tab.central if keep_table else tab.central[:, :0])
        best = tab if best is None else _merge(best, tab)
        # this attempt's values are freed before a retry evaluates its own
        del values, tab
        if attempt == 0:
            del noise_vals
        if not np.all(np.isfinite(f0)) or not np.any(_unconverged(best)):
            break
    assert best is not None and noise is not None
    left, right = best.left, best.right
    kink = np.isfinite(left) & np.isfinite(right) & (
        np.abs(left - right)
        > _KINK_FACTOR * (best.left_err + best.right_err)
        + _KINK_RELATIVE * (np.abs(left) + np.abs(right))
    )
    return FDEstimate(best.value, best.error, best.curvature, kink, left, right,
                      np.concatenate(all_steps, axis=1), np.concatenate(all_tables, axis=1),
                      evaluations, dirs, noise)


# elements of points and values one oracle call may hold at once before the directions are
# estimated one at a time (:func:`directional_derivatives_split`): 2^24 (128 MiB of float64)
SPLIT_ELEMENTS = 2**24


def directional_derivatives_split(f_batch: BatchFn, x: np.ndarray, directions: np.ndarray,
                                  **kw: Any) -> FDEstimate:
    """:func:`directional_derivatives`, one direction per call where all of them at once would
    hold more than ``SPLIT_ELEMENTS`` elements of points and values (``P (6 + 2 levels)
    (n + m)``, before the tables): each direction's estimate is independent of the others
    (its noise, its retries, its elements' choices), so the result is the same but for the
    retries, which a direction that converged no longer pays for.  Peak memory is then that of
    one direction.  ``h0`` and ``noise`` (per direction) are split with the directions."""
    raw = np.atleast_2d(np.asarray(directions, dtype=np.float64))
    f0 = kw.get("f0")
    m = x.size if f0 is None else np.size(f0)
    levels = kw.get("levels", DEFAULT_LEVELS)
    if len(raw) <= 1 or len(raw) * (6 + 2 * levels) * (x.size + m) <= SPLIT_ELEMENTS:
        return directional_derivatives(f_batch, x, raw, **kw)
    parts = []
    for p in range(len(raw)):
        sub = dict(kw)
        for key in ("h0", "noise"):
            value = kw.get(key)
            if value is not None and np.ndim(value) > 0:
                sub[key] = np.asarray(value)[p:p + 1]
        parts.append(directional_derivatives(f_batch, x, raw[p:p + 1], **sub))
    return _stack_tables_moved(parts)


def _stack_tables_moved(parts: list[FDEstimate]) -> FDEstimate:
    """:func:`stack` of the split estimates, their tables moved into the stacked one a
    direction at a time (each part's table freed once copied): the split's peak holds one
    copy of the tables, not two."""
    tables = [e.table for e in parts]
    parts[:] = [replace(e, table=e.table[:, :0]) for e in parts]
    out = stack(parts)
    kept = max(t.shape[1] for t in tables)
    table = np.empty((sum(len(t) for t in tables), kept) + tables[0].shape[2:])
    row = 0
    for k in range(len(tables)):
        t = tables[k]
        table[row:row + len(t), :t.shape[1]] = t
        table[row:row + len(t), t.shape[1]:] = np.nan
        row += len(t)
        tables[k] = table[:0]  # the part's table is freed here
        del t
    return replace(out, table=table)


def rows_of(est: FDEstimate, rows: slice) -> FDEstimate:
    """The estimate of the directions ``rows`` of ``est`` (its noise and tables with them)."""
    return FDEstimate(est.value[rows], est.error[rows], est.curvature[rows], est.kink[rows],
                      est.left[rows], est.right[rows], est.steps[rows], est.table[rows],
                      est.evaluations, est.directions[rows], est.noise[rows])


def stack(parts: list[FDEstimate]) -> FDEstimate:
    """The estimates of disjoint sets of directions as one; rows of ``steps`` / ``table`` of
    directions that were retried fewer times (or had fewer levels) are padded with NaN (no
    step there)."""
    width = max(e.steps.shape[1] for e in parts)
    kept = max(e.table.shape[1] for e in parts)  # 0: no tables kept

    def pad(a: np.ndarray) -> np.ndarray:
        want = width if a.ndim == 2 else kept
        if a.shape[1] == want:
            return a
        fill = np.full((a.shape[0], want - a.shape[1]) + a.shape[2:], np.nan)
        return np.concatenate([a, fill], axis=1)

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(e, name) for e in parts])

    return FDEstimate(cat("value"), cat("error"), cat("curvature"), cat("kink"), cat("left"),
                      cat("right"), np.concatenate([pad(e.steps) for e in parts]),
                      np.concatenate([pad(e.table) for e in parts]),
                      sum(e.evaluations for e in parts), cat("directions"), cat("noise"))


# 4th differences over three windows of the 7 points x + t delta u, t = -3..3, and the 6th
# difference over all of them; for independent noise of size s each has standard deviation
# s * sqrt(sum of squared coefficients) (sqrt(70), sqrt(924)).
_NOISE_STENCILS = (
    (np.array([1.0, -4, 6, -4, 1, 0, 0]), np.sqrt(70.0)),
    (np.array([0.0, 1, -4, 6, -4, 1, 0]), np.sqrt(70.0)),
    (np.array([0.0, 0, 1, -4, 6, -4, 1]), np.sqrt(70.0)),
    (np.array([1.0, -6, 15, -20, 15, -6, 1]), np.sqrt(924.0)),
)


def noise_level(f_batch: BatchFn, x: np.ndarray, dirs: np.ndarray, delta: np.ndarray,
                f0: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Measured rounding noise of ``f`` near ``x`` per direction and output element, ``(P, m)``.

    ``f`` is evaluated at ``x + t delta_p u_p`` for ``t = +-1, +-2, +-3`` with ``delta`` so small
    that the smooth part of a 4th difference (4th derivative times ``delta^4``) vanishes; what is
    left of the differences is rounding noise.  The estimate is the largest normalised
    difference.  It exceeds ``eps |f|`` when ``f`` is ill-conditioned: ``cos(exp(z))`` with
    ``exp(z) ~ 400`` carries ~400 ulps of noise, which the ``eps |f|`` model misses by as much.
    """
    with np.errstate(all="ignore"):
        return _noise_from(_evaluate(f_batch, _noise_points(x, dirs, delta), chunk), f0)


_NOISE_T = np.array([-3.0, -2, -1, 1, 2, 3])


def _noise_points(x: np.ndarray, dirs: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """The ``6 P`` points ``x + t delta_p u_p``, ``t = -3..3`` without 0, of :func:`noise_level`."""
    t = _NOISE_T
    offsets = (delta[:, None, None] * t[None, :, None]) * dirs[:, None, :]  # (P, 6, n)
    return (x + offsets).reshape(len(dirs) * 6, -1)


def _noise_from(values: np.ndarray, f0: np.ndarray,
                stencils: tuple = _NOISE_STENCILS) -> np.ndarray:
    """The noise estimate from ``f`` at :func:`_noise_points` (``(6 P, m)``): the largest of
    ``stencils``' normalised differences."""
    P = len(values) // 6
    vals = values.reshape(P, 6, -1)
    with np.errstate(all="ignore"):
        pts = np.concatenate([vals[:, :3], np.broadcast_to(f0, (P, 1, f0.size)), vals[:, 3:]],
                             axis=1)  # (P, 7, m)
        est = [np.abs(np.einsum("t,ptm->pm", c, pts)) / norm for c, norm in stencils]
    noise = np.max(np.stack(est), axis=0)
    return np.where(np.isfinite(noise), noise, 0.0)


def _unresolved(values: np.ndarray, f0: np.ndarray, tab: _Tables,
                delta: np.ndarray) -> np.ndarray:
    """``(P, m)``: elements where ``f`` did not move at all over the noise points (``values``,
    ``(6 P, m)``) although the table says it moves on both sides: both one-sided derivatives
    are nonzero, of one sign, and large enough that an eps-accurate ``f`` would differ at
    ``t = +-3`` (``6 delta |J u| > 2 eps |f|``, with a margin of 4).  There ``f`` is quantized
    more coarsely than ``eps |f|``, with steps wider than the points' spacing, so the points
    measured a noise of 0: ``ndtr(-7.6)``, computed as ``(1 + erf(-5.4)) / 2``, carries the
    rounding of the 1 (steps of 5.5e-17 on a value of 1.7e-14, ~4e-4 apart in ``x``).  A
    function that is flat on one side (``relu`` just left of 0, with steps crossing the
    kink) has a one-sided derivative of exactly 0 and is left alone."""
    P = len(values) // 6
    flat = np.all(values.reshape(P, 6, -1) == f0, axis=1)
    with np.errstate(invalid="ignore"):
        moving = (3 * delta[:, None] * np.abs(tab.value) > 4 * EPS64 * np.abs(f0)) & (
            tab.left * tab.right > 0)
    return flat & moving


def _remeasure_noise(f_batch: BatchFn, x: np.ndarray, dirs: np.ndarray, delta: np.ndarray,
                     f0: np.ndarray, where: np.ndarray, noise: np.ndarray, chunk: int) -> int:
    """Measure the noise again with spacing ``delta`` (a quarter of the table's smallest step:
    the scale at which the table reads ``f``) for the probes with an :func:`_unresolved`
    element; raise ``noise`` in place where ``where``.  Only the 6th difference is used: at
    this spacing the smooth part of a 4th difference (``f'''' delta^4``) could exceed the
    noise it measures.  Returns the number of evaluations."""
    rows = np.flatnonzero(np.any(where, axis=1))
    pts = _noise_points(x, dirs[rows], delta[rows])
    with np.errstate(all="ignore"):
        wide = _noise_from(_evaluate(f_batch, pts, chunk), f0, _NOISE_STENCILS[-1:])
    noise[rows] = np.where(where[rows], np.maximum(noise[rows], wide), noise[rows])
    return len(pts)


def _unconverged(t: _Tables) -> np.ndarray:
    """Elements whose error estimate is not small against the derivative's size (or the row's
    largest element, for elements near zero)."""
    size = np.abs(t.value)
    floor = _RETRY_FLOOR * np.nanmax(np.where(np.isfinite(size), size, 0.0), axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        return ~(t.error <= CONVERGED_RTOL * np.maximum(size, floor))


def _merge(old: _Tables, new: _Tables) -> _Tables:
    """Per element, take ``new`` where ``old`` had not converged and ``new`` is better."""
    take = _unconverged(old) & (new.error < np.where(np.isfinite(old.error), old.error, np.inf))
    take |= ~np.isfinite(old.value) & np.isfinite(new.value)

    def pick(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(take, b, a)

    return _Tables(pick(old.value, new.value), pick(old.error, new.error),
                   pick(old.left, new.left), pick(old.left_err, new.left_err),
                   pick(old.right, new.right), pick(old.right_err, new.right_err),
                   old.central, pick(old.curvature, new.curvature))


def _evaluate(f_batch: BatchFn, points: np.ndarray, chunk: int) -> np.ndarray:
    outs = [_evaluate_chunk(f_batch, points[i : i + chunk]) for i in range(0, len(points), chunk)]
    out = np.concatenate(outs, axis=0)
    return out.reshape(len(points), -1)


def _evaluate_rows(f_batch: BatchFn, count: int, per_call: int,
                   row: Callable[[int, np.ndarray], None], n: int) -> np.ndarray:
    """``f`` at ``count`` points, ``(count, m)``, made on demand by ``row(r, out)`` (writes
    point ``r`` into ``out``), ``per_call`` points per batched call: the points are held one
    call's worth at a time (one reused buffer) and the values written into one array, so the
    oracle's memory is its values, not its points, and a large ``n`` calls ``f`` on one point
    at a time (:data:`BATCH_ELEMENTS`), keeping the function's own intermediates small."""
    buf = np.empty((min(per_call, count), n))
    out: np.ndarray | None = None
    for start in range(0, count, per_call):
        stop = min(start + per_call, count)
        pts = buf[: stop - start]
        for r in range(start, stop):
            row(r, pts[r - start])
        got = _evaluate_chunk(f_batch, pts)
        if out is None:
            out = np.empty((count, got.shape[1]))
        out[start:stop] = got
    return np.empty((0, 0)) if out is None else out


def _table_row(x: np.ndarray, dirs: np.ndarray, steps: np.ndarray, r: int,
               out: np.ndarray) -> None:
    """Point ``r`` of one attempt's ``2 K P`` points ``x +- h_k u_p``, in the order
    :func:`_tables` reads, written into ``out``."""
    P, K = steps.shape
    p, rest = divmod(r, 2 * K)
    sign, k = divmod(rest, K)
    np.multiply(steps[p, k], dirs[p], out=out)
    if sign:
        np.subtract(x, out, out=out)
    else:
        np.add(x, out, out=out)


def _noise_row(x: np.ndarray, dirs: np.ndarray, delta: np.ndarray, r: int,
               out: np.ndarray) -> None:
    """Point ``r`` of :func:`_noise_points` (the same bits), written into ``out``."""
    p, t = divmod(r, 6)
    np.multiply(delta[p] * _NOISE_T[t], dirs[p], out=out)
    np.add(x, out, out=out)


def _evaluate_chunk(f_batch: BatchFn, points: np.ndarray) -> np.ndarray:
    """One batched call; if it raises, row by row, and rows that raise count as non-finite (a
    function that validates its domain raises where another returns nan).  Re-raises when every
    row raises: then the function is broken, not merely evaluated outside its domain."""
    try:
        return np.asarray(f_batch(points), dtype=np.float64).reshape(len(points), -1)
    except Exception as exc:
        first: Exception = exc
    rows: list[np.ndarray | None] = []
    for row in points:
        try:
            rows.append(np.asarray(f_batch(row[None]), dtype=np.float64).reshape(-1))
        except Exception:
            rows.append(None)
    good = [r for r in rows if r is not None]
    if not good:
        raise first
    nan = np.full_like(good[0], np.nan)
    return np.stack([nan if r is None else r for r in rows])


#: elements of one block of :func:`_tables`, ``P K`` per output element: every Richardson
#: temporary of one block stays in the CPU's cache (the tables are elementwise in the output
#: element, so the results are the same bits as one pass over all of them; measured at
#: m = 1e5, P = 3, K = 7, best of 3, CPU time: 0.19 s in blocks of 2^15 elements against
#: 0.28 s in one pass)
TABLE_CHUNK = 2**15


def _tables(values: np.ndarray, steps: np.ndarray, f0: np.ndarray, noise: np.ndarray,
            one_sided: bool = True) -> _Tables:
    """The three Richardson tables from ``f`` at the points of :func:`_table_row` (``(2 K P, m)``),
    computed over blocks of :data:`TABLE_CHUNK` output elements (bounded temporaries)."""
    P, K = steps.shape
    m = values.shape[1] if values.ndim == 2 else values.size // (2 * K * P)
    values = values.reshape(P, 2, K, m)
    f0 = np.asarray(f0, dtype=np.float64).ravel()
    central = np.empty((P, K, m))
    outs = [np.empty((P, m)) for _ in range(7)]
    per_block = max(64, TABLE_CHUNK // (P * K))
    for start in range(0, m, per_block):
        block = slice(start, min(start + per_block, m))
        _tables_block(values[..., block], steps, f0[block], noise[:, block], one_sided,
                      central[..., block], [o[:, block] for o in outs])
    c_val, c_err, l_val, l_err, r_val, r_err, curvature = outs
    return _Tables(c_val, c_err, l_val, l_err, r_val, r_err, central, curvature)


def _tables_block(values: np.ndarray, steps: np.ndarray, f0: np.ndarray, noise: np.ndarray,
                  one_sided: bool, central_out: np.ndarray, outs: list[np.ndarray]) -> None:
    """:func:`_tables` on one block of output elements (``values``: ``(P, 2, K, b)``),
    written into ``central_out`` and ``outs`` (value, error, left, left error, right, right
    error, curvature)."""
    P, K = steps.shape
    with np.errstate(all="ignore"):
        fp, fm = values[:, 0], values[:, 1]  # (P, K, b)
        hk = steps[:, :, None]
        central = (fp - fm) / (2 * hk)
        central_out[...] = central
        nz = _NOISE_BOUND * noise[:, None, :]  # measured noise, bounds each value of f
        ap, am = (np.maximum(EPS64 * np.abs(v), nz) for v in (fp, fm))
        round_c = (ap + am) / (2 * hk)
        c_val, c_err = _richardson(central, round_c, 4.0, ahead=True)
        if one_sided:
            right = (fp - f0) / hk
            left = (f0 - fm) / hk
            a0 = np.maximum(EPS64 * np.abs(f0), nz)
            round_1 = (ap + am + 2 * a0) / hk
            # both one-sided tables in one call (elementwise arithmetic: the same results)
            lr_val, lr_err = _richardson(np.concatenate([right, left]),
                                         np.concatenate([round_1, round_1]), 2.0)
            r_val, l_val = lr_val[:P], lr_val[P:]
            r_err, l_err = lr_err[:P], lr_err[P:]
        else:
            r_val = r_err = l_val = l_err = np.full_like(c_val, np.nan)
        mid = K // 2
        curvature = (fp[:, mid] - 2 * f0 + fm[:, mid]) / steps[:, mid, None] ** 2
    for out, got in zip(outs, (c_val, c_err, l_val, l_err, r_val, r_err, curvature),
                        strict=True):
        out[...] = got


def _richardson(d: np.ndarray, rounding: np.ndarray, base: float, *, ahead: bool = False
                ) -> tuple[np.ndarray, np.ndarray]:
    """Richardson-extrapolate ``d`` (shape ``(P, K, m)``) along K; return best value and error.

    ``base`` is 4 for central differences (even powers) and 2 for one-sided ones.
    ``ahead``: an entry's error estimate also covers its distance from the entries below it in
    its column (smaller steps) beyond what their rounding explains (:func:`_ahead`).
    """
    P, K, m = d.shape
    # Candidates are visited column by column (j), row by row, keeping a running minimum of
    # the error per element: the same choice as an argmin over all candidates (strict ``<``
    # keeps the first minimum; NaN and infinite errors never win) without materialising the
    # (P, C, m) candidate stack.  In-place updates keep the floating-point results identical.
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
        prev_col, prev = prev[:, 1:], cur
        if cur.shape[1] < 2:
            # a single entry has no neighbour in its column to confirm that it converged: its
            # correction |T[k,j] - T[k,j-1]| alone is tiny by construction (divided by 4^j - 1)
            # even when T[k,j-1] is far off, so it is never a candidate
            break
        trunc = cur - prev_col
        np.abs(trunc, out=trunc)
        stab = np.abs(np.diff(cur, axis=1))
        np.maximum(trunc[:, 1:], stab, out=trunc[:, 1:])
        np.maximum(trunc[:, 0], stab[:, 0], out=trunc[:, 0])
        if ahead and cur.shape[1] > 2:  # with two entries, |T[1] - T[0]| is counted already
            np.maximum(trunc[:, :-1], _ahead(cur, amp * rounding[:, j:]), out=trunc[:, :-1])
        err = trunc
        err += amp * rounding[:, j:]
        # row by row against the running minimum (strict: the first minimum stays; NaN
        # never wins): a column has at most K - 1 rows, and two masked copies per row cost
        # less than an argmin and two gathers along a short axis
        better = np.empty(best_err.shape, dtype=bool)
        for r in range(err.shape[1]):
            np.less(err[:, r], best_err, out=better)  # finite value => finite error
            np.copyto(best_err, err[:, r], where=better)
            np.copyto(best_val, cur[:, r], where=better)
    return best_val, best_err


def _ahead(col: np.ndarray, rounding: np.ndarray) -> np.ndarray:
    """Per entry ``T[k, j]`` of the column ``col`` (``(P, R, m)``) but the last: how far it is
    from the last entry ``T[K-1, j]`` (the smallest steps) beyond the rounding bounds of both
    (``rounding``: the column's, amplified), ``(P, R - 1, m)``.

    The estimate ``max(|T[k,j] - T[k,j-1]|, |T[k,j] - T[k-1,j]|)`` looks only at larger steps.
    Where the even-power model holds, the last entry is the closest to ``J u`` but for its
    rounding, and this distance is at most the estimate.  Where it does not (``f`` not smooth
    between the steps: ``|t|^2.5`` with ``t`` = 0.009 and steps 0.5 .. 0.008), entries from
    large steps can agree with each other on a wrong value, and the steps below that
    non-smooth scale move away from it: the distance is the error the model missed.  A
    non-finite last entry gives no evidence (0); a non-finite entry stays non-finite.
    """
    last, r_last = col[:, -1:], rounding[:, -1:]
    excess = col[:, :-1] - last
    np.abs(excess, out=excess)
    excess -= rounding[:, :-1]
    excess -= r_last
    return np.fmax(excess, 0.0, out=excess)


# -- the fast screen's estimate ------------------------------------------------------------------

SCREEN_LEVELS = DEFAULT_MODEL.screen_levels
# elements of the points (or outputs) one batched call of the screen's streamed table holds at
# most: 2^20 float64 (8 MiB); from n = 2^19 on a pair of points no longer fits and each point
# is a call of its own.  Larger batches are slower per point at n = 1e6: the function's
# elementwise intermediates grow with the batch, and beyond a few times 8 MiB the allocator
# returns them to the system after every call (glibc trims a free heap top above twice its
# adaptive mmap threshold), so every call page-faults its intermediates afresh (measured at
# n = 1e6, torch: 41,000 page faults per check with two points per call, none with one).
BATCH_ELEMENTS = 2**20
_SCREEN_H0_SHRINK = DEFAULT_MODEL.screen_h0_shrink


@dataclass(frozen=True)
class ProjectedEstimate:
    """Projected directional derivatives ``w_pr . (J u_p)`` for ``P`` directions and ``R``
    projections each (the fast screen, :func:`projected_derivatives`).

    ``value``, ``error`` and ``magnitude`` (``sum_i |w_pri| |(J u_p)_i|`` at the smallest step,
    the scale of the terms) have shape ``(P, R)``.  ``jump`` is the extrapolated difference of
    the right and left derivatives projected the same way, ``jump_bound`` what a smooth
    function's jump can reach (rounding plus a ``1e-6`` relative share): ``kink`` is True where
    it is exceeded.  ``table`` holds the projected central differences ``(P, K, R)`` at
    ``steps`` ``(P, K)``; ``directions`` the rounded directions (project AD on these).
    """

    value: np.ndarray
    error: np.ndarray
    magnitude: np.ndarray
    jump: np.ndarray
    jump_bound: np.ndarray
    steps: np.ndarray
    table: np.ndarray
    directions: np.ndarray
    evaluations: int
    #: with ``elements=True`` only: the per-element estimate ``(J u_p)_i`` and its error
    #: estimate (``(P, m)``), extrapolated from the same evaluations (the failing path's
    #: localization, :mod:`gradcheck.numeric.projected_failure`); ``None`` otherwise
    element_value: np.ndarray | None = None
    element_error: np.ndarray | None = None
    #: with ``tables=True`` only: the per-element central differences ``(P, K, m)`` and the
    #: per-element second differences ``(f(x + h u) + f(x - h u) - 2 f(x)) / h`` at the last
    #: two steps ``(P, 2, m)``, from which :func:`reprojected` projects the same evaluations
    #: on other cotangents and :func:`element_kinks` tests each element for a kink
    element_table: np.ndarray | None = None
    element_second: np.ndarray | None = None
    #: the output elements the per-element arrays hold (``keep``), None: every one
    element_index: np.ndarray | None = None

    @property
    def kink(self) -> np.ndarray:
        """Where the one-sided derivatives disagree beyond a smooth function's reach."""
        with np.errstate(invalid="ignore"):
            return ~(np.abs(self.jump) <= self.jump_bound)

    @property
    def finite(self) -> np.ndarray:
        """Estimates with a finite value and error."""
        return np.isfinite(self.value) & np.isfinite(self.error)


def projected_derivatives(
    f_batch: BatchFn,
    x: np.ndarray,
    directions: np.ndarray,
    projections: np.ndarray,
    *,
    f0: np.ndarray,
    levels: int = SCREEN_LEVELS,
    chunk: int = 4096,
    h0: np.ndarray | None = None,
    elements: bool = False,
    tables: bool = False,
    keep: np.ndarray | None = None,
) -> ProjectedEstimate:
    """A cheap estimate of ``w . (J u)`` with an error estimate, for the fast screen.

    Unlike :func:`directional_derivatives` the central differences are projected on each
    ``w = projections[p, r]`` (shape ``(P, R, m)``) *before* extrapolating: one Richardson table
    per compared scalar instead of one per output element, ``2 levels P`` evaluations (8 per
    direction by default) and no noise points, no retries.  The steps start ``2^-4`` times
    below the oracle's (``levels`` halvings down to ``2^-(7 + levels - 1) max(1, rms(x))``),
    where a smooth, well-scaled function's table converges to ~1e-12 in 4 levels.  The price is
    robustness: the estimate assumes eps-accurate evaluations and a single step range, so the
    screen that uses it passes a check only when the estimate converged far below what it
    compares, and hands everything else to the full oracle.  Kinks are screened with the
    one-sided jump ``w . (f(x+hu) - 2 f(x) + f(x-hu)) / h``, which is ``O(h)`` for a smooth
    function (extrapolated once, ``O(h^3)``) and the change of slope at a kink.

    ``h0``: the largest step per direction instead of the screen's (the failing path's
    estimates, :mod:`gradcheck.numeric.projected_failure`); ``elements``: also keep the
    central differences per output element (``P K m`` values) and extrapolate them per element
    (:attr:`ProjectedEstimate.element_value`), for localization without another evaluation;
    ``tables``: also keep the per-element
    central and second differences (``(K + 2) m`` values per direction,
    :attr:`ProjectedEstimate.element_table`), for :func:`reprojected` and
    :func:`element_kinks` (the screen's split, :mod:`gradcheck.numeric.screen_split`).
    ``keep``: the output elements (flat indices) the per-element arrays hold, instead of all
    of them (:attr:`ProjectedEstimate.element_index`).
    """
    if levels < 3:
        raise ValueError(f"levels={levels} must be at least 3 (a column needs two entries)")
    x = np.asarray(x, dtype=np.float64).ravel()
    raw = np.atleast_2d(np.asarray(directions, dtype=np.float64))
    W = np.asarray(projections, dtype=np.float64)
    f0 = np.asarray(f0, dtype=np.float64).ravel()
    h = (np.array([screen_step(x, u) for u in raw]) if h0 is None
         else np.asarray(h0, dtype=np.float64).reshape(len(raw)))
    dirs = representable_directions(x, raw, h, levels - 1)
    steps = h[:, None] * 0.5 ** np.arange(levels)[None, :]
    P, K = steps.shape
    R = W.shape[1]
    # the table is streamed: per call, as many (x + h u, x - h u) pairs as BATCH_ELEMENTS allow,
    # reduced at once to the projected scalars; memory O(n + m) per pair, not O(P K (n + m))
    central = np.empty((P, K, R))  # w . (f(x + h u) - f(x - h u)) / (2 h)
    second = np.empty((P, 2, R))  # w . (f(x + h u) + f(x - h u) - 2 f(x)) / h, last 2 levels
    magnitude = np.empty((P, R))
    kept = f0.size if keep is None else len(keep)
    per_element = np.empty((P, K, kept)) if elements or tables else None
    per_second = np.empty((P, 2, kept)) if tables else None
    pairs = [(p, k) for p in range(P) for k in range(K)]
    # |W| is not held whole (P R copies of the output: at n = 1e7, 240 MB more at the table's
    # peak, and every page the process touches for the first time costs, docs/cost-model.md):
    # each row's |w| . |a| is made in one work array (abs_dot), reused by every row
    work: list[np.ndarray] = []
    f0x2 = 2 * f0  # exact
    rows = BATCH_ELEMENTS // max(x.size, f0.size, 1)
    per_call = max(1, min(chunk // 2, rows // 2))  # pairs per call; one point per call if 0
    # the points' and the differences' buffers are reused from call to call (a fresh 16 MB
    # array page-faults on every call)
    buf = np.empty((2 * min(per_call, len(pairs)), x.size))
    d = np.empty(f0.size)
    with np.errstate(all="ignore"):
        for start in range(0, len(pairs), per_call):
            block = pairs[start:start + per_call]
            pts = buf[:2 * len(block)]
            for b, (p, k) in enumerate(block):
                np.multiply(dirs[p], steps[p, k], out=pts[2 * b])
                np.subtract(x, pts[2 * b], out=pts[2 * b + 1])
                pts[2 * b] += x
            # the values are read only, and before buf is rewritten
            values: np.ndarray | list[np.ndarray] = (
                _evaluate_chunk(f_batch, pts) if rows >= 2
                else [_evaluate_chunk(f_batch, pts[r:r + 1])[0] for r in range(len(pts))])
            for b, (p, k) in enumerate(block):
                fp, fm = values[2 * b], values[2 * b + 1]
                hk = steps[p, k]
                np.subtract(fp, fm, out=d)
                central[p, k] = W[p] @ d / (2 * hk)
                if per_element is not None:
                    np.divide(d if keep is None else d[keep], 2 * hk, out=per_element[p, k])
                if k == K - 1:
                    np.abs(d, out=d)
                    magnitude[p] = [abs_dot(w, d, work) / (2 * hk) for w in W[p]]
                if k >= K - 2:
                    np.add(fp, fm, out=d)
                    d -= f0x2
                    second[p, k - (K - 2)] = W[p] @ d / hk
                    if per_second is not None:
                        np.divide(d if keep is None else d[keep], hk,
                                  out=per_second[p, k - (K - 2)])
            del values
        del buf, d
    f0_kept = f0 if keep is None else f0[keep]
    ev, ee = (_per_element(per_element, steps, f0_kept) if elements and per_element is not None
              else (None, None))
    a_f0 = np.abs(f0)
    a0 = np.array([[abs_dot(w, a_f0, work) for w in W[p]] for p in range(P)])
    del a_f0, work
    out = _projected(central, second, magnitude, a0, steps, dirs,
                     2 * len(pairs), ev, ee, per_element if tables else None, per_second)
    return out if keep is None else replace(out, element_index=keep)


def abs_dot(a: np.ndarray, b_abs: np.ndarray, work: list[np.ndarray]) -> float:
    """``|a| . b_abs``, ``|a|`` written into a work array reused across calls of one shape
    (``work``: empty at first, then that array): no ``|a|`` held per row."""
    a = a.ravel()
    if not work or work[0].shape != a.shape or work[0].dtype != a.dtype:
        work[:] = [np.empty_like(a)]
    return float(np.abs(a, out=work[0]) @ b_abs)


def _projected(central: np.ndarray, second: np.ndarray, magnitude: np.ndarray,
               a0: np.ndarray, steps: np.ndarray, dirs: np.ndarray, evaluations: int,
               ev: np.ndarray | None, ee: np.ndarray | None, table: np.ndarray | None,
               per_second: np.ndarray | None) -> ProjectedEstimate:
    """The estimate from the projected central differences ``central`` ``(P, K, R)``, second
    differences at the last two steps ``second`` ``(P, 2, R)``, ``magnitude`` and
    ``a0 = sum |w| |f(x)|`` ``(P, R)`` (:func:`projected_derivatives`, :func:`reprojected`)."""
    with np.errstate(all="ignore"):
        hk = steps[:, :, None]
        # the rounding of the evaluations, eps sum |w| (|f(x + h u)| + |f(x - h u)|), from its
        # triangle-inequality bound to first order in h, 2 sum |w| |f(x)| + 2 h sum |w| |J u|:
        # no pass over the points per level (the term matters at the small steps, where the
        # bound is tight; at the large ones it is the smallest term of the table's error)
        sums = 2 * a0[:, None, :] + 2 * hk * magnitude[:, None, :]
        value, error = _richardson(central, EPS64 * sums / (2 * hk), 4.0)
        round2 = EPS64 * (sums[:, -2:] + 2 * a0[:, None]) / hk[:, -2:]
        jump = 2 * second[:, 1] - second[:, 0]
        bound = (_KINK_FACTOR * (2 * round2[:, 1] + round2[:, 0])
                 + _KINK_RELATIVE * 2 * magnitude)
    return ProjectedEstimate(value, error, magnitude, jump, bound, steps, central, dirs,
                             evaluations, ev, ee, table, per_second)


def reprojected(est: ProjectedEstimate, projections: np.ndarray, f0: np.ndarray
                ) -> ProjectedEstimate:
    """``est``'s evaluations projected on other cotangents ``projections`` (``(P, R', m)``),
    no evaluation of ``f``: the same estimate as :func:`projected_derivatives` at ``est``'s
    steps and directions would give on them (up to the rounding of the order of the sums).
    ``est`` must keep its tables (``tables=True``); where it kept some elements only
    (``keep``), ``projections`` must vanish outside them."""
    table, sec = est.element_table, est.element_second
    if table is None or sec is None:
        raise ValueError("the estimate kept no per-element tables (tables=True)")
    W = np.asarray(projections, dtype=np.float64)
    f0 = np.asarray(f0, dtype=np.float64).ravel()
    if est.element_index is not None:  # the cotangents vanish outside the kept elements
        W, f0 = W[..., est.element_index], f0[est.element_index]
    aW = np.abs(W)
    with np.errstate(all="ignore"):
        central = np.einsum("prm,pkm->pkr", W, table)
        second = np.einsum("prm,pkm->pkr", W, sec)
        magnitude = np.einsum("prm,pm->pr", aW, np.abs(table[:, -1]))
    return _projected(central, second, magnitude, aW @ np.abs(f0), est.steps, est.directions,
                      0, None, None, None, None)


def element_kinks(est: ProjectedEstimate, f0: np.ndarray) -> np.ndarray:
    """``(P, m)``: the output elements whose own one-sided jump (the projected kink test of
    :func:`projected_derivatives`, element by element) exceeds a smooth function's reach.
    ``est`` must keep its tables (``tables=True``); the elements are its kept ones
    (:attr:`ProjectedEstimate.element_index`)."""
    table, sec = est.element_table, est.element_second
    if table is None or sec is None:
        raise ValueError("the estimate kept no per-element tables (tables=True)")
    f0 = np.asarray(f0, dtype=np.float64).ravel()
    if est.element_index is not None:
        f0 = f0[est.element_index]
    # the projected test's bound per element: the rounding of the two second differences,
    # eps (4 |f(x)| / h_k + 2 |D|) at the last two steps (2 x the smaller's plus the
    # larger's), and the 1e-6 relative share; linear in |f(x)| and |D|: two coefficients
    # per direction, few passes over the elements
    out = np.empty(table[:, -1].shape, dtype=bool)
    with np.errstate(all="ignore"):
        for p in range(len(table)):
            h_big, h_small = (float(v) for v in est.steps[p, -2:])
            a = _KINK_FACTOR * EPS64 * 4 * (2 / h_small + 1 / h_big)
            b = _KINK_FACTOR * EPS64 * 6 + _KINK_RELATIVE * 2
            jump = sec[p, 1] * 2
            jump -= sec[p, 0]
            np.abs(jump, out=jump)
            bound = np.abs(table[p, -1])
            bound *= b
            bound += a * np.abs(f0)
            np.greater(jump, bound, out=out[p])
            out[p] |= np.isnan(jump) | np.isnan(bound)
    return out


def _per_element(central: np.ndarray, steps: np.ndarray, f0: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The Richardson estimate per output element of the central differences ``central``
    (``(P, K, m)`` at ``steps``), over blocks of :data:`TABLE_CHUNK` elements; the rounding of
    each difference bounded as the projected table bounds it, ``eps (|f(x)| / h + |D(h)|)``
    (the values at the points are not kept)."""
    P, K, m = central.shape
    value, error = np.empty((P, m)), np.empty((P, m))
    hk = steps[:, :, None]
    per_block = max(64, TABLE_CHUNK // (P * K))
    with np.errstate(all="ignore"):
        for start in range(0, m, per_block):
            b = slice(start, min(start + per_block, m))
            d = central[:, :, b]
            rounding = EPS64 * (np.abs(f0[b])[None, None, :] / hk + np.abs(d))
            value[:, b], error[:, b] = _richardson(d, rounding, 4.0, ahead=True)
    return value, error


# -- the scaled estimate's constants (its maths: gradcheck.oracle.scaled) ------------------

#: the step families of :func:`gradcheck.oracle.scaled.scaled_central`: base and exponents
#: (relative steps: the direction is already scaled per element); two families whose steps
#: never coincide
SCALED_FAMILIES = ((2.0, (12, 13, 14, 15)), (3.0, (8, 9, 10, 11)))

#: a kink on the direction: one-sided differences at the smallest step apart by more than this
#: (relative to the central difference, beyond their rounding) ...
SCALED_KINK = DEFAULT_MODEL.scaled_kink
#: ... and a gap at the smallest step at least this fraction of the gap at twice that step (a
#: smooth function's gap, h |f''| |u|^2, halves with the step; a kink's stays)
SCALED_KINK_PERSISTS = DEFAULT_MODEL.scaled_kink_persists
