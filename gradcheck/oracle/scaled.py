"""The oracle's scaled estimates: finite differences along directions scaled per element.

One step size does not fit elements that span many decades (``1e-15`` next to ``1e-3``): a
step that moves the large ones crosses the small ones many times over.  A direction scaled
per element, ``u_i = z_i s_i`` with ``s_i = |x_i|`` (:func:`element_scales`), moves each
element relative to its own size.  Two modes use it:

* **The sweep's two-family mode**, :func:`scaled_central` -> :class:`ScaledEstimate`: central
  differences along one scaled direction at two step families that never coincide
  (:data:`gradcheck.oracle.fd.SCALED_FAMILIES`), each Richardson-extrapolated once, with kink
  detection (the sweep's resolution checks, :mod:`gradcheck.sweep.resolution`).
* **The grouped mode** of the numeric pipeline (:mod:`gradcheck.numeric.scaled_estimate` is
  the step that runs it): the elements grouped by scale, a few binades per group
  (:func:`groups`, :func:`width`), one scaled direction per group and probe
  (:func:`directions`), each through the Richardson table of
  :func:`gradcheck.oracle.fd.directional_derivatives` with its ladder extended upward
  (:func:`ladder`); made only where the first estimate's steps cross an element's scale
  (:func:`crossed`, :func:`crossing`, :func:`first_steps`).  Its tuning values (binades per
  group, the cap on groups, the ladder's limits, the largest move) are arguments: the
  pipeline step owns them.

``docs/error-model.md`` section 2 gives the reasoning and the measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gradcheck.oracle import fd


def element_scales(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Per element step scale: ``|x_i|``, and for an exact zero the smallest nonzero ``|x|``
    of all inputs (1 where every element is zero).  A direction ``u_i = z_i s_i`` perturbs each
    element relative to its own size, so ``x + h u`` resolves 1e-300 next to 1e300."""
    nonzero = [np.abs(a[a != 0]) for a in arrays]
    sizes = [m for m in nonzero if m.size]
    floor = float(min(m.min() for m in sizes)) if sizes else 1.0
    return [np.where(a != 0, np.abs(a), floor) for a in arrays]


@dataclass(frozen=True)
class ScaledEstimate:
    """``J u`` per output element by central differences along a per-element scaled ``u``:
    the estimate, its error estimate (the spread between the two step families plus each
    family's last Richardson change plus the rounding of the differences), both flattened."""

    value: np.ndarray
    error: np.ndarray
    #: where the one-sided differences disagree by an amount that does not shrink with the
    #: step (a kink or a tie on the direction: :func:`scaled_central` with ``kinks``)
    kink: np.ndarray | None = None


def scaled_central(f: Callable[[list[np.ndarray]], np.ndarray], x: list[np.ndarray],
                   u: list[np.ndarray], kinks: bool = False) -> ScaledEstimate:
    """The sweep's two-family mode: central differences of ``f`` (inputs -> flat float64
    vector) along ``u`` at the :data:`gradcheck.oracle.fd.SCALED_FAMILIES`, each
    Richardson-extrapolated once in ``h^2``.  Non-finite estimates get an infinite error (a
    step left the domain); so does everything where the smallest step moves an element by
    more than 1e-3 (relative) off ``h u`` (subnormals), and a smaller argument rounding is
    added to the error.  With ``kinks`` (one evaluation more, at ``x``), an output element
    whose one-sided differences at the first family's two smallest steps differ by more than
    :data:`gradcheck.oracle.fd.SCALED_KINK` of the central one, beyond their rounding, by a gap that
    does not halve with the step (:data:`gradcheck.oracle.fd.SCALED_KINK_PERSISTS`), is a kink:
    ``kink`` marks it, its estimate is NaN and its error infinite (``min(x, y)`` at a tie
    ``x = y``: the central difference averages the two sides)."""
    fams: list[tuple[np.ndarray, np.ndarray]] = []
    gaps: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    f0 = np.asarray(f(list(x)), dtype=np.float64) if kinks else None
    for base, exps in fd.SCALED_FAMILIES:
        steps = [base ** -k for k in exps]
        # the arguments' rounding: x +- h u is not x +- h u exactly (a subnormal x moves by
        # whole multiples of 2^-1074, or not at all); relative to the step, per element
        h = steps[-1]
        with np.errstate(all="ignore"):
            moved = [np.abs(((a + h * b) - a) - h * b) / np.abs(h * b)
                     for a, b in zip(x, u, strict=True)]
        arg = max((float(np.max(np.where(b != 0, np.where(np.isfinite(m), m, np.inf), 0.0),
                                initial=0.0))
                   for m, b in zip(moved, u, strict=True)), default=0.0)
        if not arg <= 1e-3:  # a step that does not move an element: nothing to estimate
            n = int(np.asarray(f(list(x))).size)
            return ScaledEstimate(np.full(n, np.nan), np.full(n, np.inf))
        d, noise = [], None
        for k, h in enumerate(steps):
            up = np.asarray(f([a + h * b for a, b in zip(x, u, strict=True)]), dtype=np.float64)
            dn = np.asarray(f([a - h * b for a, b in zip(x, u, strict=True)]), dtype=np.float64)
            d.append((up - dn) / (2 * h))
            if k == len(steps) - 1:  # the smallest step's (the only one read)
                # each value rounded relative to its size, and by up to the smallest normal
                # number below it (an engine that flushes subnormal results to zero, an
                # intermediate that underflows): a difference of two values near 1e-308
                # resolves nothing below that
                noise = (fd.EPS64 * (np.abs(up) + np.abs(dn)) + 2 * fd.TINY64) / (2 * h)
            if f0 is not None and not fams and k >= len(steps) - 2:
                # the first family: its one-sided gaps at its two smallest steps (the kink
                # test reads those)
                with np.errstate(all="ignore"):
                    gaps.append((np.abs(up + dn - 2 * f0) / h, np.abs(d[-1]),
                                 4 * (fd.EPS64 * (np.abs(up) + np.abs(dn) + 2 * np.abs(f0))
                                      + 4 * fd.TINY64) / h))
            del up, dn
        r = base ** 2
        ext = [(r * d[k + 1] - d[k]) / (r - 1) for k in range(len(d) - 1)]
        assert noise is not None
        fams.append((ext[-1], np.abs(ext[-1] - ext[-2]) + 2 * noise * (r + 1) / (r - 1)
                     + 2 * arg * np.abs(ext[-1])))
    (a, ea), (b, eb) = fams
    with np.errstate(all="ignore"):
        err = np.abs(a - b) + ea + eb
    bad = ~(np.isfinite(a) & np.isfinite(b) & np.isfinite(err))
    kink = None
    if len(gaps) >= 2:
        (g1, _, _), (g2, d2, n2) = gaps[-2], gaps[-1]
        with np.errstate(all="ignore"):
            kink = (g2 > fd.SCALED_KINK * d2 + n2) & (g2 >= fd.SCALED_KINK_PERSISTS * g1)
        bad |= kink
    return ScaledEstimate(np.where(bad, np.nan, a), np.where(bad, np.inf, err), kink)


# -- the grouped mode (the numeric pipeline's scaled estimate) ----------------------------

def scales(x: np.ndarray) -> np.ndarray:
    """The per-element scales of ``x`` (flat; :func:`element_scales` of its finite elements,
    0 where ``x`` is not finite: such an element is not moved)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    finite = np.isfinite(x)
    s = np.zeros(x.size)
    if np.any(finite):
        s[finite] = element_scales([x[finite]])[0]
    return s


def groups(x: np.ndarray, *, binades: int, max_groups: int
           ) -> tuple[np.ndarray, list[np.ndarray]]:
    """The per-element scales of ``x`` (:func:`scales`) and the index arrays of its groups,
    smallest scales first: ``binades`` binades per group counted from the smallest scale, or,
    where those would be more than ``max_groups``, the fewest binades per group
    (:func:`width`) that make at most ``max_groups``."""
    s = scales(x)
    idx = np.flatnonzero(s > 0)
    if idx.size == 0:
        return s, []
    exps = np.frexp(s[idx])[1]
    keys = (exps - exps.min()) // binades
    if np.unique(keys).size > max_groups:
        keys = _greedy(exps, width(exps, binades=binades, max_groups=max_groups))
    return s, [idx[keys == k] for k in np.unique(keys)]


def width(exps: np.ndarray, *, binades: int, max_groups: int) -> int:
    """The fewest binades per group (at least ``binades``) that put the binary exponents
    ``exps`` in at most ``max_groups`` groups, each group starting at its smallest exponent
    (the count falls as the width grows: a bisection)."""
    lo, hi = binades, int(np.ptp(exps)) + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if np.unique(_greedy(exps, mid)).size <= max_groups:
            hi = mid
        else:
            lo = mid + 1
    return lo


def widest(s: np.ndarray, parts: list[np.ndarray], *, binades: int) -> int:
    """The most binades one of the groups ``parts`` of scales ``s`` spans (at least
    ``binades``)."""
    spans = [int(np.ptp(np.frexp(s[idx])[1])) + 1 for idx in parts]
    return max([binades, *spans])


def _greedy(exps: np.ndarray, w: int) -> np.ndarray:
    """Group keys of ``exps``: a group opens at the smallest exponent not yet grouped and
    takes every exponent within ``w - 1`` above it."""
    keys = np.empty(exps.size, dtype=np.int64)
    order = np.argsort(exps, kind="stable")
    start, key = None, -1
    for k in order:
        if start is None or exps[k] - start >= w:
            start, key = exps[k], key + 1
        keys[k] = key
    return keys


def crossed(s: np.ndarray, tops: np.ndarray, tangents: list[np.ndarray]) -> float | None:
    """The smallest scale ``s`` (:func:`scales`) of an element that the first estimate's
    largest step along some probe (``tops``, per tangent: :func:`first_steps`) moves by more
    than that scale, or ``None`` where no step does: only then can one step size not fit every
    element, and only then is the scaled estimate made (elsewhere it would be the first
    estimate again, less sharp: ``logsumexp`` at 1e4)."""
    hit = [s[(s > 0) & (top * np.abs(np.ravel(u)) > s)]
           for top, u in zip(tops, tangents, strict=True)]
    smallest = [float(np.min(h)) for h in hit if h.size]
    return min(smallest) if smallest else None


def crossing(x: np.ndarray, est: fd.FDEstimate) -> tuple[np.ndarray, float | None]:
    """Which elements of ``x`` the largest steps of ``est`` move by more than their scale
    (``(P, n)``, per direction; non-finite elements count as crossed: they are not moved),
    and the smallest scale among the finite ones so crossed (:func:`crossed`), or ``None``."""
    s = scales(x)
    hit = np.stack([(s > 0) & (top * np.abs(u) > s)
                    for top, u in zip(est.steps[:, 0], est.directions, strict=True)])
    smallest = float(np.min(np.broadcast_to(s, hit.shape)[hit])) if hit.any() else None
    return hit | (s == 0), smallest


def first_steps(x: np.ndarray, tangents: list[np.ndarray]) -> np.ndarray:
    """The first estimate's largest step along each tangent
    (:func:`gradcheck.oracle.fd.initial_step`)."""
    flat = np.asarray(x, dtype=np.float64).ravel()
    return np.array([fd.initial_step(flat, np.asarray(u, dtype=np.float64).ravel())
                     for u in tangents])


def directions(s: np.ndarray, parts: list[np.ndarray], tangents: list[np.ndarray], *,
               move: float) -> tuple[np.ndarray, np.ndarray]:
    """The scaled directions (``(G P, n)``, group-major) of the groups ``parts`` of scales
    ``s`` (:func:`groups`) and their largest steps (``(G P,)``; NaN where a tangent is zero
    on a group), at which no element moves by more than ``move`` of its size."""
    us = [np.asarray(u, dtype=np.float64).ravel() for u in tangents]
    dirs, steps = [], []
    for idx in parts:
        top = float(np.max(s[idx]))
        for u in us:
            d = np.zeros(s.size)
            d[idx] = u[idx] * (s[idx] / top)
            biggest = float(np.max(np.abs(u[idx])))
            dirs.append(d)
            steps.append(move * top / biggest if biggest > 0 else np.nan)
    return np.stack(dirs), np.array(steps)


def ladder(tops: np.ndarray, h0: np.ndarray, m: int, *, max_ladder: int, ladder_work: int
           ) -> int:
    """The levels of one group's table: its own ``DEFAULT_LEVELS`` steps (largest ``h0`` per
    probe), extended upward, one halving per level, to the first estimate's largest steps
    ``tops`` (:func:`first_steps`), at most ``max_ladder`` levels more and within
    ``ladder_work`` (directions x levels^2 x outputs: the tables' work grows with the square
    of the levels)."""
    with np.errstate(all="ignore"):
        up = float(np.max(np.ceil(np.log2(tops / h0))))
    levels = fd.DEFAULT_LEVELS + (int(min(max(up, 0.0), max_ladder)) if np.isfinite(up)
                                  else 0)
    while levels > fd.DEFAULT_LEVELS and len(h0) * levels**2 * max(m, 1) > ladder_work:
        levels -= 1
    return levels
