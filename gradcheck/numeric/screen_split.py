"""The screen's split: a check the projected screen declined because some output elements
spoil its one table, judged with those elements estimated apart at smaller steps
(``docs/error-model.md`` section 2d).

The screen (:mod:`.screen`) projects the central differences of every output element on each
cotangent before extrapolating, at one range of steps.  One element whose differences do not
converge there spoils the whole projection: ``tan(x)`` with an element ``0.01`` from its
pole, ``lgamma`` near a negative integer, ``arcsin`` near 1.  The screen then declines (a
suspected kink, a non-finite estimate, an FD error above its floor), and the full oracle used
to run: per-element tables along ``P`` fresh tangents, retries, the second and scaled
estimates (``tan`` at n = 1e6: over a minute, and inconclusive).  The split runs first:

1. **Level 0**: the screen's table (its steps, its direction) evaluated again and kept per
   output element (:func:`gradcheck.oracle.fd.projected_derivatives` with ``elements`` and
   ``tables``).  An element is *settled* where its own estimate is finite, shows no kink of
   its own (:func:`gradcheck.oracle.fd.element_kinks`), and its error estimate is within half
   the screen's floor of its size or within ``ROUNDING_LIMITED`` times the rounding of its
   differences (smaller steps would not help it).
2. **Deeper levels** for the others: the same ladder, each level's largest step
   ``LEVEL_SHRINK`` below the previous one's, in bands (``BANDS``: three levels, then one
   more for one differentiable input), each band along its own direction rounded so that its
   steps are exact.  The function is evaluated whole (``2 K`` evaluations per level); only
   the unsettled elements' tables are kept.  Each element keeps its best level (the smallest
   error estimate among its finite, kink-free ones), and settles where that error is within
   half of ``split_floor`` of its size or limited by rounding; a band stops when every
   element is settled or a level settles fewer than half of those left.
3. **Groups**: each cotangent ``v_p`` is split into ``v_p`` on the settled elements and
   ``v_p`` on each band's elements (``G P`` probes; their sum is ``v_p``).  The settled
   group's estimate is the screen's table projected on its cotangents
   (:func:`gradcheck.oracle.fd.reprojected`, no evaluation) or the sum of ``|v_i|`` times the
   elements' own error estimates where smaller; a band's is the sum of ``v_i`` times each
   element's best value, its error the sum of ``|v_i|`` times theirs (each element at its own
   step: the triangle inequality bounds the sum of the errors).
4. **The screen again** (:func:`.screen.screen` with the split) on the ``G P`` probes: the
   same judgement of every comparison, the settled group against ``screen_floor``, the
   bands against ``split_floor``, and the same AD paths.  A disagreement in the settled
   group is confirmed as the screen's (:mod:`.projected_failure`, on that group alone); any
   other verdict than a pass hands the check to the full oracle, as before.

A pass means what the screen's pass means, per group: ``<J^T v_p^g, u_g>`` agrees with an
estimate of ``<v_p^g, J u_g>`` whose error estimate is within the group's floor of the terms;
the groups together see every output element of ``v_p``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gradcheck.backends.guarded import AdapterFailed
from gradcheck.numeric.context import Prepared
from gradcheck.numeric.probes import Probes, batch_fn, draw, f0, projections, rows
from gradcheck.oracle import fd

#: each deeper level's largest step, this factor below the previous level's
LEVEL_SHRINK = 2.0**-8
#: the first band's levels: its last one's largest step is ``2^-24`` below the screen's
#: (the full oracle retries at ``2^-8`` and ``2^-16``); the closest of ``n`` Gaussian points
#: to a pole of ``tan`` is typically about ``2 / n`` away.  One direction serves the band,
#: rounded so that all its steps are exact (a grain of about ``2^-16`` of ``|x_i|`` relative
#: to the band's first step)
LEVELS = 3
#: the bands of deeper levels, each along its own direction rounded for its own steps only
#: (a direction rounded for every level at once would be coarse: steps ``2^-40`` below
#: ``|x_i|`` leave it about 8000 representable values): ``LEVELS`` levels, then one more
#: (one input only; the elements it reaches are few: at n = 1e7, 1 element ``8e-9`` from a
#: pole of ``tan``)
BANDS = (LEVELS, 1)
#: an element whose error estimate is within this factor of the rounding of its differences
#: at the smallest step is limited by rounding: smaller steps would not help it
ROUNDING_LIMITED = 4.0


@dataclass(frozen=True)
class Split:
    """The screen's ``P`` cotangents split in groups of output elements (``masks``, over the
    flattened floating outputs: the elements settled at the screen's steps for every input,
    then the others), each group judged against its own floor (``floors``); per input, each
    group's estimate projected on the group's cotangents (``(1, P R)``, along the group's
    direction), and how it was made."""

    masks: tuple[np.ndarray, ...]
    floors: tuple[float, ...]
    estimates: dict[int, tuple[fd.ProjectedEstimate, ...]]
    why: str  # the screen's reason to decline, which the split answers
    #: per input, elements estimated at each level (level 0: the screen's steps)
    per_level: dict[int, tuple[int, ...]]
    evaluations: int
    #: whether the first group is the elements settled at the screen's steps (along the
    #: screen's direction: a failure there is confirmed as the screen's)
    settled_first: bool
    #: the screen's probes as drawn (``P`` cotangents, one tangent per input)
    probes: Probes

    @property
    def count(self) -> int:
        """Output elements judged below the screen's steps."""
        return int(sum(np.count_nonzero(m) for m in self.masks)
                   - (np.count_nonzero(self.masks[0]) if self.settled_first else 0))

    def cotangents(self, slices: dict[int, slice]) -> Probes:
        """The probes with each output's ``P`` cotangents as ``P`` per group (group-major):
        ``v_p`` times the group's mask, the rows of one array per output (the batched calls
        take it without a copy)."""
        v: dict[int, list[np.ndarray]] = {}
        for i, vs in self.probes.v.items():
            out = np.empty((len(self.masks) * len(vs),) + np.shape(vs[0]))
            for g, m in enumerate(self.masks):
                for p, c in enumerate(vs):
                    np.multiply(c, m[slices[i]].reshape(np.shape(c)),
                                out=out[g * len(vs) + p, ...])
            v[i] = rows(out)
        return Probes(v, self.probes.u)


@dataclass
class _Best:
    """Per output element, its best level so far: value, error, magnitude (``|D|`` at the
    level's smallest step), the level (-1: none finite and kink-free yet), and whether it is
    settled (converged, or limited by rounding)."""

    value: np.ndarray
    error: np.ndarray
    size: np.ndarray
    level: np.ndarray
    settled: np.ndarray

    @classmethod
    def empty(cls, m: int) -> _Best:
        return cls(np.full(m, np.nan), np.full(m, np.inf), np.full(m, np.nan),
                   np.full(m, -1), np.zeros(m, dtype=bool))


def _take(best: _Best, d: fd.ProjectedEstimate, level: int, f_0: np.ndarray,
          floor: float) -> int:
    """Fold level ``level`` (``d``, its kept elements) into ``best``, an element settling
    where its error estimate is within half of ``floor`` of its own size or within
    ``ROUNDING_LIMITED`` times the rounding of its differences; returns how many of them it
    settled."""
    assert d.element_value is not None and d.element_error is not None
    assert d.element_table is not None
    idx = d.element_index
    value, error = d.element_value[0], d.element_error[0]
    size = np.abs(d.element_table[0, -1])
    with np.errstate(invalid="ignore"):
        usable = ~fd.element_kinks(d, f_0)[0]
        usable &= np.isfinite(value)
        usable &= np.isfinite(error)  # finite error: below the initial inf
        better = usable & (error < (best.error if idx is None else best.error[idx]))
        converged = error <= floor / 2 * np.abs(value)
        rounding = np.abs(f_0 if idx is None else f_0[idx])
        rounding /= float(d.steps[0, -1])
        rounding += size  # over eps: |f(x)| / h + |D|, the rounding of D at the smallest step
        settled = converged | (error <= ROUNDING_LIMITED * fd.EPS64 * rounding)
        settled &= usable
    if idx is None:  # every element: masked copies, no gathers
        for out, new in ((best.value, value), (best.error, error), (best.size, size)):
            np.copyto(out, new, where=better)
        best.level[better] = level
        best.settled |= settled
    else:
        take = idx[better]
        best.value[take], best.error[take] = value[better], error[better]
        best.size[take], best.level[take] = size[better], level
        best.settled[idx[settled]] = True
    return int(np.count_nonzero(settled))


def _sums(best: _Best, W: np.ndarray, group: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``W`` (``(1, P R, m)``) on the ``group``'s elements times each element's own value,
    and the same sums of ``|W|`` times their errors and magnitudes (the triangle
    inequality: each element at its own best step), each ``(1, P R)``; one projection at a
    time (no copy of ``W``)."""
    rows = W.shape[1]
    out = np.zeros((3, 1, rows))
    with np.errstate(all="ignore"):
        own = [np.where(group, a, 0.0) for a in (best.value, best.error, best.size)]
        for q in range(rows):
            w = W[0, q]
            out[0, 0, q] = w @ own[0]
            a = np.abs(w)
            out[1, 0, q] = a @ own[1]
            out[2, 0, q] = a @ own[2]
    return out[0], out[1], out[2]


def _estimate(first: fd.ProjectedEstimate, value: np.ndarray, error: np.ndarray,
              magnitude: np.ndarray, evaluations: int, table: bool) -> fd.ProjectedEstimate:
    """A group's estimate from its sums (:func:`_sums`), along ``first``'s direction; with
    ``first``'s steps and projected table (``table``: the group at the screen's steps, the
    convergence shown, from which a failure is confirmed), or none (the elements' steps
    differ: ``details["screen_split"]`` says how); kink-free: kinks were tested element by
    element at each element's level."""
    steps, tab = ((first.steps, first.table) if table
                  else (first.steps[:, :0], np.zeros((1, 0, value.shape[1]))))
    return fd.ProjectedEstimate(value, error, magnitude, np.zeros_like(value),
                                np.ones_like(value), steps, tab, first.directions,
                                evaluations)


def _level0(prep: Prepared, j: int, u: np.ndarray, v0: np.ndarray
            ) -> tuple[fd.ProjectedEstimate, _Best]:
    """Input ``j``'s screen table along ``u`` kept per element, and its elements."""
    f_0 = f0(prep)
    d = fd.projected_derivatives(batch_fn(prep, j), prep.args64[j].ravel(), u[None], v0,
                                 f0=f_0, elements=True, tables=True)
    best = _Best.empty(f_0.size)
    _take(best, d, 0, f_0, prep.cfg.error_model.screen_floor)
    return d, best


def _deeper(prep: Prepared, j: int, u: np.ndarray, v0: np.ndarray, h: float,
            troubled: np.ndarray, band: int) -> tuple[_Best, fd.ProjectedEstimate, int]:
    """Input ``j``'s ``troubled`` elements at band ``band``'s levels along ``u`` (one
    direction, rounded for all of them), each keeping its best level: their estimates (an
    element without a finite, kink-free level keeps level -1), the band's first level's
    estimate (its direction) and the evaluations.  ``h``: the
    screen's largest step; the bands' levels follow each other (``BANDS``)."""
    x = prep.args64[j].ravel()
    f_0 = f0(prep)
    model = prep.cfg.error_model
    K = model.screen_levels
    low = sum(BANDS[:band]) + 1
    count = BANDS[band]
    h1 = h * LEVEL_SHRINK**low
    # one direction for the band: finer than the screen's only by the band's own depth
    direction = fd.representable_directions(x, u[None], np.array([h1]),
                                            (K - 1) + 8 * (count - 1))
    best = _Best.empty(f_0.size)
    best.settled[:] = ~troubled
    evaluations = 0
    first: fd.ProjectedEstimate | None = None
    for level in range(low, low + count):
        left = int(np.count_nonzero(~best.settled))
        d = fd.projected_derivatives(batch_fn(prep, j), x, direction, v0, f0=f_0,
                                     h0=np.array([h1 * LEVEL_SHRINK**(level - low)]),
                                     elements=True, tables=True,
                                     keep=np.flatnonzero(~best.settled))
        evaluations += d.evaluations
        settled = _take(best, d, level, f_0, model.split_floor)
        if first is None:
            first = replace(d, element_value=None, element_error=None, element_table=None,
                            element_second=None, element_index=None)
        del d
        if np.all(best.settled) or 2 * settled < left:
            break
    assert first is not None
    return best, first, evaluations


def diagnose(prep: Prepared, why: str) -> Split | str:
    """The groups and every input's estimates (module docstring), or why the split does not
    apply (then the full check runs); ``why``: the screen's reason to decline."""
    f_0 = f0(prep)
    if not np.all(np.isfinite(f_0)):
        return "f(x) is not finite at every output element"
    # the screen's probes where it handed them over (the same draw from the seed)
    drawn = getattr(why, "probes", None)
    pr = drawn if drawn is not None else draw(prep, tangents=1)
    W = projections(prep, pr.v)
    us = {j: np.asarray(pr.u[j][0], dtype=np.float64).ravel() for j in prep.diff}
    model = prep.cfg.error_model
    level0: dict[int, tuple[fd.ProjectedEstimate, _Best]] = {}
    troubled = np.zeros(f_0.size, dtype=bool)
    # bands of deeper levels, each its own group along its own direction: one input only
    # (the groups of output elements are shared by the inputs)
    bands = len(BANDS) if len(prep.diff) == 1 else 1
    try:
        for j in prep.diff:
            level0[j] = _level0(prep, j, us[j], W[:, :1])
            troubled |= ~level0[j][1].settled
        settled = ~troubled
        masks: list[np.ndarray] = [settled] if np.any(settled) else []
        floors = [model.screen_floor] if np.any(settled) else []
        groups: dict[int, list[fd.ProjectedEstimate]] = {j: [] for j in prep.diff}
        per_level: dict[int, list[int]] = {j: [int(np.count_nonzero(settled))]
                                          for j in prep.diff}
        evaluations = 0
        for j in prep.diff:
            d0, best0 = level0.pop(j)
            evaluations += d0.evaluations
            if np.any(settled):  # the screen's table on them, or their own sums if smaller
                clean = np.where(settled, f_0, 0.0)
                for a in (d0.element_table, d0.element_second):
                    assert a is not None
                    a[..., troubled] = 0.0  # the projections see the settled elements only
                table = fd.reprojected(d0, W, clean)
                value, error, _ = _sums(best0, W, settled)
                take = error < table.error
                groups[j].append(_estimate(table, np.where(take, value, table.value),
                                           np.where(take, error, table.error),
                                           table.magnitude, d0.evaluations, True))
            h = float(d0.steps[0, 0])
            del d0, best0
            left = troubled.copy()
            for band in range(bands):
                if not np.any(left):
                    break
                best, first, spent = _deeper(prep, j, us[j], W[:, :1], h, left, band)
                evaluations += spent
                done = left & (best.level >= 0)
                if np.any(done):
                    groups[j].append(_estimate(first, *_sums(best, W, done), spent, False))
                    if j == prep.diff[0]:
                        masks.append(done)
                        floors.append(model.split_floor)
                low = sum(BANDS[:band]) + 1  # every level of the band: the index is the level
                per_level[j] += [int(np.count_nonzero(done & (best.level == k)))
                                 for k in range(low, low + BANDS[band])]
                left &= ~done
            if np.any(left):
                return (f"{prep.input(j)}: {int(np.count_nonzero(left))} output element(s) "
                        "have no finite, kink-free estimate at any level of steps")
    except AdapterFailed as exc:
        return f"evaluating the function raised: {exc.failure.text:.200}"
    return Split(tuple(masks), tuple(floors), {j: tuple(g) for j, g in groups.items()}, why,
                 {j: tuple(c) for j, c in per_level.items()}, evaluations,
                 bool(np.any(settled)), pr)


def note(split: Split) -> str:
    """``details["screen_split"]`` of the results the split passed."""
    m = split.masks[0].size
    levels = "; ".join(", ".join(f"{c} at level {k}" for k, c in enumerate(counts) if c)
                       for counts in split.per_level.values())
    if split.count == 0:
        return (f"the screen declined ({split.why}); split: every output element settled at "
                "the screen's steps on its own, each element's own error estimate summed "
                f"where smaller than the projected table's ({split.evaluations} evaluations "
                "of f)")
    return (f"the screen declined ({split.why}); split: the {split.count} of {m} "
            "output element(s) not settled at the screen's steps judged apart, against the "
            f"split's floor {split.floors[-1]:g}, each estimated at the level of steps where "
            f"its own estimate is best (level k: largest step 2^-8k x the screen's; {levels}; "
            f"{split.evaluations} evaluations of f)")
