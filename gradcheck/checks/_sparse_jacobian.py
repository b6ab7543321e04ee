"""The FD Jacobian of a localization, compressed by column colouring where the Jacobian is sparse.

Localization (:func:`gradcheck.checks.numeric._localize`) needs every element of a block
``J`` (m x n).  One FD direction per column costs ``16 n`` evaluations of ``f``; most of them
are wasted on a sparse ``J`` (an elementwise op has one nonzero per row).

*Compression* (Curtis, Powell and Reid): columns that never share a nonzero row can be
differentiated together.  Partition the columns into groups ("colours") such that within a
group at most one column is nonzero in any row; the directional derivative along the group's
direction ``d_g = sum_{c in g} w_c e_c`` then holds, in row ``r``, ``w_c J[r, c]`` for the one
column ``c`` of ``g`` that is nonzero in row ``r``.  FD needs as many directions as colours: 1 for
an elementwise op, 3 for a tridiagonal one, ``n`` for a dense one (not compressed).

*Where the pattern comes from, and why that is safe.*  The only sparsity pattern available
without ``n`` evaluations is the AD Jacobian's, and the AD Jacobian is what is under test: a
backward that routes a gradient to the wrong element, or drops a coupling term, has the wrong
pattern.  Three measures keep the comparison complete:

1. The weights ``w_c`` are random (sign times uniform in [0.5, 1]), and each cell ``(g, r)`` is
   compared as ``(J d_g)_r`` by FD against ``(J_ad d_g)_r``: a projected check of the row.  Any
   difference between ``J[r, g]`` and ``J_ad[r, g]``, inside or outside the AD pattern, changes
   the cell unless the random weights cancel it (probability zero), so a cell that agrees says
   that every element of the row's group agrees.
2. A cell that disagrees is attributed to an element only when a second, independent weighting
   of its group gives the same per-element value (``C1 / w1_c == C2 / w2_c`` within the FD
   errors).  A hidden second nonzero ``c'`` makes the two differ (the ratio ``w_c' / w_c``
   changes), and so does a gradient routed to the wrong column.
3. A group with a cell that cannot be attributed (inconsistent, no AD nonzero to attribute to,
   a non-finite estimate) is *refined*: each of its columns is differentiated on its own.

The cost on a correct function is one FD direction per colour; on a broken one, two per
colour plus ``16`` evaluations per column of the groups that had to be refined.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import fd, tolerance

_COMPRESS_BELOW = 3  # compress only when the colours number at most n / this
_DIRECTIONS_PER_CALL = 128  # FD directions per batched call (bounds memory, as fd.jacobian)
_MIN_WEIGHT = 0.25  # a (rounded) weight below this cannot attribute safely: refine its group


@dataclass(frozen=True)
class FDJacobian:
    """An FD Jacobian block and how it was obtained.

    ``value``/``error``: ``(m, n)``.  ``directions``: FD directions evaluated (each costs 6
    noise points and ``2 x levels`` table points, plus retries).  ``how``: one line for the
    report, e.g. ``"compressed: 1 colour group, 1 verified, 0 of 1000 columns refined"``.
    """

    value: np.ndarray
    error: np.ndarray
    directions: int
    evaluations: int
    how: str


def colour_columns(pattern: np.ndarray, max_colours: int) -> np.ndarray | None:
    """Greedy colouring of the columns of ``pattern`` (m x n, bool): two columns sharing a
    ``True`` row never get the same colour.  ``None`` when more than ``max_colours`` are
    needed (or when some row alone has more nonzeros than that): a dense pattern."""
    m, n = pattern.shape
    colours = np.zeros(n, dtype=np.intp)
    if m == 0 or n == 0 or not pattern.any():
        return colours
    per_row = int(pattern.sum(axis=1).max())
    if per_row > max_colours:
        return None
    if per_row == 1:  # elementwise, gathers, permutations: no two columns share a row
        return colours
    cols, rows = np.nonzero(pattern.T)
    bounds = np.searchsorted(cols, np.arange(n + 1))
    used = np.zeros((m, max_colours + 1), dtype=bool)  # row r already holds colour k
    top = 0  # colours 0..top-1 are in use
    for c in range(n):
        r = rows[bounds[c]:bounds[c + 1]]
        if r.size == 0:
            continue
        taken = used[r, :top + 1].any(axis=0)  # colours 0..top: the used ones and a new one
        k = int(np.argmin(taken))  # the first colour free in all of c's rows
        if taken[k] or k >= max_colours:
            return None
        top = max(top, k + 1)
        colours[c] = k
        used[r, k] = True
    return colours


def _weights(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.choice((-1.0, 1.0), size=n) * rng.uniform(0.5, 1.0, size=n)


def _fd_along(f_batch: Callable, x: np.ndarray, D: np.ndarray, h0: float, f0: np.ndarray,
              levels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """FD along the rows of ``D``, a chunk of directions per batched call: values and errors
    ``(len(D), m)``, the directions actually used (rounded), evaluations."""
    vals, errs, dirs, evals = [], [], [], 0
    for start in range(0, len(D), _DIRECTIONS_PER_CALL):
        est = fd.directional_derivatives(f_batch, x, D[start:start + _DIRECTIONS_PER_CALL],
                                         levels=levels, h0=h0, f0=f0, one_sided=False)
        vals.append(est.value)
        errs.append(est.error)
        dirs.append(est.directions)
        evals += est.evaluations
    return np.concatenate(vals), np.concatenate(errs), np.concatenate(dirs), evals


def _group_directions(colours: np.ndarray, groups: np.ndarray, w: np.ndarray) -> np.ndarray:
    D = np.zeros((len(groups), colours.size))
    for row, g in enumerate(groups):
        cols = np.flatnonzero(colours == g)
        D[row, cols] = w[cols]
    return D


def _allowed(err: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The localization's allowance for comparing ``a`` and ``b`` (FD error ``err``)."""
    return tolerance.FD_SAFETY * err + tolerance.ROUNDING_GAMMA * tolerance.eps("float64") * (
        np.abs(a) + np.abs(b))


@dataclass(frozen=True)
class _Problem:
    """What every FD pass of one block shares."""

    f_batch: Callable
    x: np.ndarray
    J_ad: np.ndarray
    nonzero: tuple[np.ndarray, np.ndarray]  # rows and columns of the AD pattern
    colours: np.ndarray
    h0: float
    f0: np.ndarray
    levels: int
    sl: slice

    def fd(self, D: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        val, err, used, evaluations = _fd_along(self.f_batch, self.x, D, self.h0, self.f0,
                                                self.levels)
        return val[:, self.sl], err[:, self.sl], used, evaluations


class _Pass:
    """One weighting of some groups: per (group, row) FD cells and the weights used."""

    def __init__(self, pb: _Problem, groups: np.ndarray, w: np.ndarray):
        colours = pb.colours
        self.groups = groups
        self.value, self.error, used, self.evaluations = pb.fd(
            _group_directions(colours, groups, w))  # (G', m)
        self.weight = np.zeros(colours.size)  # the rounded weight of every column of the pass
        for row, g in enumerate(groups):
            cols = np.flatnonzero(colours == g)
            self.weight[cols] = used[row, cols]
        # (J_ad d_g)_r per cell along the rounded directions, summed over the AD nonzeros
        row_of = np.full(int(colours.max()) + 1, -1)  # group -> its row in this pass
        row_of[groups] = np.arange(len(groups))
        rr, cc = pb.nonzero
        keep = row_of[colours[cc]] >= 0
        rr, cc = rr[keep], cc[keep]
        m = self.value.shape[1]
        ad = np.bincount(row_of[colours[cc]] * m + rr, weights=pb.J_ad[rr, cc] * self.weight[cc],
                         minlength=len(groups) * m).reshape(len(groups), m)
        with np.errstate(invalid="ignore"):
            self.fails = ~(np.abs(self.value - ad) <= _allowed(self.error, self.value, ad))


def fd_jacobian(f_batch: Callable, x: np.ndarray, J_ad: np.ndarray, sl: slice, *,
                f0: np.ndarray, seed: int, levels: int = 5) -> FDJacobian:
    """The FD block ``J[sl, :]`` of ``f_batch`` at ``x``, compressed by the colouring of
    ``J_ad``'s pattern where that needs at most ``n / 3`` colours, else one column per
    direction (:func:`gradcheck.fd.jacobian`).  See the module docstring for why a wrong AD
    pattern cannot hide an error."""
    x = np.asarray(x, dtype=np.float64).ravel()
    m, n = J_ad.shape
    pattern = J_ad != 0  # NaN counts as nonzero
    colours = colour_columns(pattern, n // _COMPRESS_BELOW)
    h0 = fd.initial_step(x, np.ones(1))  # as fd.jacobian: the step of every coordinate
    if colours is None:  # what fd.jacobian computes, with the evaluations counted
        val, err, _, evaluations = _fd_along(f_batch, x, np.eye(n), h0, f0, levels)
        return FDJacobian(val[:, sl].T, err[:, sl].T, n, evaluations,
                          "one FD direction per column (dense pattern: not compressed)")
    rr, cc = np.nonzero(pattern)
    pb = _Problem(f_batch, x, J_ad, (rr, cc), colours, h0, f0, levels, sl)
    rng = np.random.default_rng(seed)
    G = int(colours.max()) + 1
    first = _Pass(pb, np.arange(G), _weights(rng, n))
    owner = np.full((G, m), -1)  # the column of group g that is nonzero in row r (AD pattern)
    owner[colours[cc], rr] = cc
    value, error = _attribute(first, (rr, cc), colours, m)
    evaluations, directions = first.evaluations, G
    small = np.zeros(G, dtype=bool)  # a group with a weight rounded too small to attribute
    np.logical_or.at(small, colours, np.abs(first.weight) < _MIN_WEIGHT)
    suspect = np.flatnonzero(first.fails.any(axis=1) | small)
    refine = np.zeros(G, dtype=bool)
    if suspect.size:
        second = _Pass(pb, suspect, _weights(rng, n))
        evaluations += second.evaluations
        directions += suspect.size
        refine[suspect] = _unattributable(first, second, owner[suspect], colours)
    cols = np.flatnonzero(refine[colours])
    if cols.size:
        val, err, _, ev = pb.fd(np.eye(n)[cols])
        value[:, cols], error[:, cols] = val.T, err.T
        evaluations += ev
        directions += cols.size
    how = (f"compressed: {G} colour group{'s' if G != 1 else ''}, {suspect.size} verified with "
           f"a second weighting, {cols.size} of {n} columns refined one by one")
    return FDJacobian(value, error, directions, evaluations, how)


def _attribute(p: _Pass, nonzero: tuple[np.ndarray, np.ndarray], colours: np.ndarray, m: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per element in the AD pattern (``nonzero``: its rows and columns), the cell of its group
    in its row divided by its weight; 0 elsewhere (the cell of a correct group holds only the
    pattern's element).  The error is the cell's, divided by the weight."""
    rr, cc = nonzero
    with np.errstate(invalid="ignore", divide="ignore"):
        inv = 1.0 / np.abs(np.where(p.weight != 0, p.weight, np.nan))
        error = np.take(p.error, colours, axis=0).T * inv[None, :]  # (m, n)
        value = np.zeros((m, colours.size))
        value[rr, cc] = p.value[colours[cc], rr] / p.weight[cc]
    return value, error


def _unattributable(first: _Pass, second: _Pass, owner: np.ndarray, colours: np.ndarray
                    ) -> np.ndarray:
    """Per verified group: True where some cell cannot be attributed to one element (the two
    weightings disagree on it, it has no AD nonzero yet FD sees one, or a weight is too small
    or an estimate non-finite)."""
    bad = np.zeros(len(second.groups), dtype=bool)
    for k, g in enumerate(second.groups):
        c = owner[k]
        cols = np.flatnonzero(colours == g)
        if np.any(np.abs(first.weight[cols]) < _MIN_WEIGHT) or np.any(
                np.abs(second.weight[cols]) < _MIN_WEIGHT):
            bad[k] = True
            continue
        v1, e1 = first.value[g], first.error[g]
        v2, e2 = second.value[k], second.error[k]
        has = c >= 0
        w1 = np.where(has, first.weight[np.maximum(c, 0)], 1.0)
        w2 = np.where(has, second.weight[np.maximum(c, 0)], 1.0)
        a, b = v1 / w1, v2 / w2
        with np.errstate(invalid="ignore"):
            agree = np.abs(a - b) <= _allowed(e1 / np.abs(w1) + e2 / np.abs(w2), a, b)
            # no AD nonzero in this row of the group: FD must see none either, in both passes
            zero = (np.abs(v1) <= _allowed(e1, v1, 0.0)) & (np.abs(v2) <= _allowed(e2, v2, 0.0))
        bad[k] = not bool(np.all(np.where(has, agree, zero)))
    return bad
