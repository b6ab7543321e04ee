"""The screen's split: a check the projected screen declined because some output elements
spoil its one table, passed by estimating each element at steps where its own estimate
converges (``docs/error-model.md`` section 2d).

The screen (:mod:`.screen`) projects the central differences of every output element on each
cotangent before extrapolating, at one range of steps.  One element whose differences do not
converge there spoils the whole projection: ``tan(x)`` with an element ``0.01`` from its
pole, ``lgamma`` near a negative integer, ``arcsin`` near 1.  The screen then declines (a
suspected kink, a non-finite estimate, an FD error above its floor), and the full oracle used
to run: per-element tables along ``P`` fresh tangents, retries, the second and scaled
estimates, 60 to several hundred evaluations of ``f`` (``tan`` at n = 1e6: over a minute,
and inconclusive).

The split runs first, along one tangent per input (the screen's, rounded so that every step
below is exact):

1. **Level 0**, the screen's steps (``2 K`` evaluations), its central differences kept per
   output element and extrapolated per element (:func:`gradcheck.oracle.fd.
   projected_derivatives` with ``elements`` and ``tables``).  An element is *settled* where
   its own estimate is finite, shows no kink of its own
   (:func:`gradcheck.oracle.fd.element_kinks`) and its error estimate is within half the
   screen's floor of its size, or is limited by the rounding of its differences (smaller
   steps would not help it).
2. **Deeper levels** for the unsettled elements only: ladders of ``SPLIT_STEPS`` steps,
   each level's largest step ``2^-4`` below the previous one's (``LEVEL_SHRINK``), at most
   ``LEVELS`` of them (``2 SPLIT_STEPS`` evaluations each, the function evaluated whole;
   only the unsettled elements' tables are kept).  An element whose estimate converges
   within ``d`` of a pole needs steps of about ``d / 50``: each level reaches 16 times closer.
   Each element keeps its best level (the smallest error estimate among its finite,
   kink-free ones); the ladder stops when every element is settled, or when a level
   settles fewer than half of those left (what is left is not a matter of steps).
3. **The estimate**: ``<v, J u>`` as the sum over elements of ``v_i`` times each element's
   own extrapolated value, its error estimate the sum of ``|v_i|`` times theirs (the
   triangle inequality: each element at its own best step), its terms the same sum of
   magnitudes.  An element with no finite, kink-free level, and a projected jump at any
   level, leave the split without an estimate (the full check runs).
4. **The screen again** with this estimate in place of its own, along the split's tangent:
   the same judgement of every comparison (its floor against the terms, resolution and
   allowance, per probe), the same AD paths (``P`` VJP rows, one JVP per input, the
   eager-vs-functional and forward-vs-reverse comparisons).  It only passes: anything
   else hands the check to the full oracle, as before.

A pass means what the screen's pass means: ``<J^T v_p, u>`` agrees with an estimate of
``<v_p, J u>`` whose error estimate is within the screen's floor of the terms.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gradcheck.backends.guarded import AdapterFailed
from gradcheck.numeric.context import Prepared
from gradcheck.numeric.probes import Probes, batch_fn, draw, f0, out_slices
from gradcheck.oracle import fd

#: each deeper level's largest step, this factor below the previous level's
LEVEL_SHRINK = 2.0**-8
#: deeper levels at most: the last one's largest step is ``2^-24`` below the screen's (the
#: full oracle retries at ``2^-8`` and ``2^-16``); the closest of ``n`` Gaussian points to a
#: pole of ``tan`` is about ``2 / n`` away, within reach at n = 1e7.  One direction serves
#: every deeper level, rounded so that all their steps are exact: deeper levels would make
#: it coarse (a grain of ``2^-16`` of ``|x_i|`` relative to the steps at 3 levels)
LEVELS = 3
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

    @property
    def count(self) -> int:
        """Output elements judged below the screen's steps."""
        return int(sum(np.count_nonzero(m) for m in self.masks)
                   - (np.count_nonzero(self.masks[0]) if self.settled_first else 0))

    def cotangents(self, pr: Probes, slices: dict[int, slice]) -> Probes:
        """Each output's ``P`` cotangents as ``P`` per group (group-major): ``v_p`` times the
        group's mask."""
        return Probes({i: [v * m[slices[i]].reshape(np.shape(v)) for m in self.masks
                           for v in vs] for i, vs in pr.v.items()}, pr.u)


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
    inequality: each element at its own best step), each ``(1, P R)``."""
    idx = np.flatnonzero(group)
    Wg = W[0][:, idx]
    aW = np.abs(Wg)
    with np.errstate(all="ignore"):
        return ((Wg @ best.value[idx])[None], (aW @ best.error[idx])[None],
                (aW @ best.size[idx])[None])


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
            troubled: np.ndarray) -> tuple[_Best, fd.ProjectedEstimate, int, int] | str:
    """Input ``j``'s ``troubled`` elements at the deeper levels along ``u`` (one direction,
    rounded for all of them), each keeping its best level: their estimates, level 1's
    estimate (its direction), the evaluations and the deepest level run; or why not."""
    x = prep.args64[j].ravel()
    f_0 = f0(prep)
    model = prep.cfg.error_model
    K = model.screen_levels
    h1 = h * LEVEL_SHRINK
    direction = fd.representable_directions(x, u[None], np.array([h1]),
                                            (K - 1) + 8 * (LEVELS - 1))
    best = _Best.empty(f_0.size)
    best.settled[:] = ~troubled
    evaluations, level = 0, 1
    first: fd.ProjectedEstimate | None = None
    for level in range(1, LEVELS + 1):
        left = int(np.count_nonzero(~best.settled))
        d = fd.projected_derivatives(batch_fn(prep, j), x, direction, v0, f0=f_0,
                                     h0=np.array([h1 * LEVEL_SHRINK**(level - 1)]),
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
    missing = troubled & (best.level < 0)
    if np.any(missing):
        return (f"{int(np.count_nonzero(missing))} output element(s) have no finite, "
                "kink-free estimate at any level of steps")
    return best, first, evaluations, level


def diagnose(prep: Prepared, why: str) -> Split | str:
    """The groups and every input's estimates (module docstring), or why the split does not
    apply (then the full check runs); ``why``: the screen's reason to decline."""
    f_0 = f0(prep)
    if not np.all(np.isfinite(f_0)):
        return "f(x) is not finite at every output element"
    pr = draw(prep, tangents=1)
    P = prep.cfg.probes
    R = len(prep.float_outs)
    W = np.zeros((1, P * R, f_0.size))
    for r, (i, sl) in enumerate(out_slices(prep).items()):
        for p in range(P):
            W[0, p * R + r, sl] = np.asarray(pr.v[i][p]).ravel()
    us = {j: np.asarray(pr.u[j][0], dtype=np.float64).ravel() for j in prep.diff}
    model = prep.cfg.error_model
    level0: dict[int, tuple[fd.ProjectedEstimate, _Best]] = {}
    troubled = np.zeros(f_0.size, dtype=bool)
    try:
        for j in prep.diff:
            level0[j] = _level0(prep, j, us[j], W[:, :1])
            troubled |= ~level0[j][1].settled
        settled = ~troubled
        # the settled elements first (judged against the screen's floor), then the others
        masks = tuple(m for m in (settled, troubled) if np.any(m))
        floors = tuple(f for m, f in ((settled, model.screen_floor),
                                      (troubled, model.split_floor)) if np.any(m))
        estimates: dict[int, tuple[fd.ProjectedEstimate, ...]] = {}
        per_level: dict[int, tuple[int, ...]] = {}
        evaluations = 0
        for j in prep.diff:
            d0, best0 = level0.pop(j)
            evaluations += d0.evaluations
            groups = []
            if np.any(settled):  # the screen's table on them, or their own sums if smaller
                table = fd.reprojected(d0, W * settled, f_0)
                value, error, _ = _sums(best0, W, settled)
                take = error < table.error
                groups.append(_estimate(table, np.where(take, value, table.value),
                                        np.where(take, error, table.error),
                                        table.magnitude, d0.evaluations, True))
            counts = [int(np.count_nonzero(settled))]
            if np.any(troubled):
                deeper = _deeper(prep, j, us[j], W[:, :1], float(d0.steps[0, 0]), troubled)
                if isinstance(deeper, str):
                    return f"{prep.input(j)}: {deeper}"
                best, first, spent, deepest = deeper
                evaluations += spent
                groups.append(_estimate(first, *_sums(best, W, troubled), spent, False))
                counts += [int(np.count_nonzero(troubled & (best.level == k)))
                           for k in range(1, deepest + 1)]
            del d0
            estimates[j] = tuple(groups)
            per_level[j] = tuple(counts)
    except AdapterFailed as exc:
        return f"evaluating the function raised: {exc.failure.text:.200}"
    return Split(masks, floors, estimates, why, per_level, evaluations, bool(np.any(settled)))


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
