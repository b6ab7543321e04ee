"""The one finite-difference Jacobian of the oracle: :func:`fd_jacobian`.

Every FD Jacobian gradcheck builds comes from :func:`fd_jacobian`, by one of its methods:

* ``"table"``: one coordinate direction per column, each through the Richardson table of
  :func:`gradcheck.oracle.fd.directional_derivatives`, every coordinate stepped from the same
  ``h0 = 2^-3 * max(1, rms(x))`` (``initial_step`` of a unit vector ``e_b`` would be
  ``sqrt(n)`` times larger: steps of ~4 at n = 1000), without the kink tables, ``columns``
  directions per batched call (memory ``2 * levels * columns`` points per call, plus the noise
  points and retries).  The default without a ``pattern`` (the audit's gradient-flow map).
* ``"coordinates"``: the same unit directions, each with its own step and the one-sided
  (kink) tables, all in one call: the semantic probes' small Jacobians (``_detach``).
* ``"stencil"``: a 5-point stencil per column with one noise measurement for the whole
  Jacobian, guarded by the table (:mod:`gradcheck.oracle._stencil`).
* ``"coloured"``: compressed by a colouring of the columns of ``pattern`` (the AD Jacobian)
  where that needs at most ``n / 3`` colours, else the stencil.  The default with a
  ``pattern`` (localization, :func:`gradcheck.numeric.localize.localize`).

The coloured method
-------------------
Localization needs every element of a block ``J`` (m x n).  One FD direction per column costs
``16 n`` evaluations of ``f``; most of them are wasted on a sparse ``J`` (an elementwise op has
one nonzero per row).

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
   a non-finite estimate) is *refined*: halved, and each half solved again like a group (one
   weighting, a second one if it disagrees, halved again if it cannot be attributed), down
   to sets of at most ``_LEAF`` columns, which are differentiated column by column.  A gradient
   routed to the wrong element of a 1000-column group costs ~4 directions per halving (~40)
   instead of 1000.

The cost on a correct function is one FD direction per colour; on a broken one with a correct
pattern, two per colour; each FD direction costs ``6 + 2 levels`` evaluations (plus retries).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gradcheck.oracle import _stencil, error_model, fd

_COMPRESS_BELOW = error_model.DEFAULT_MODEL.sparse_compress_below
_DIRECTIONS_PER_CALL = 128  # FD directions per batched call (bounds memory)
_MIN_WEIGHT = error_model.DEFAULT_MODEL.sparse_min_weight
_LEAF = error_model.DEFAULT_MODEL.sparse_leaf

Method = Literal["auto", "table", "coordinates", "stencil", "coloured"]


@dataclass(frozen=True)
class FDJacobian:
    """An FD Jacobian block and how it was obtained.

    ``value``/``error``: ``(m, n)``.  ``directions``: FD directions evaluated (each costs 6
    noise points and ``2 x levels`` table points, plus retries; a dense block's ``n`` columns
    cost 5 points each, see :mod:`gradcheck.oracle._stencil`).  ``evaluations``: points of
    ``f`` evaluated.  ``how``: one line for the report, e.g. ``"compressed: 1 colour group, 1
    verified, 0 of 1000 columns refined"``.  ``recomputed``: columns the stencil left to the
    Richardson table.
    """

    value: np.ndarray
    error: np.ndarray
    directions: int
    evaluations: int
    how: str
    recomputed: int = 0


def fd_jacobian(f_batch: Callable, x: np.ndarray, pattern: np.ndarray | None = None, *,
                method: Method = "auto", rows: slice | None = None,
                f0: np.ndarray | None = None, seed: int = 0, levels: int = 5,
                model: error_model.ErrorModel = error_model.DEFAULT_MODEL, chunk: int = 4096,
                columns: int = _DIRECTIONS_PER_CALL) -> FDJacobian:
    """The FD Jacobian ``J[rows, :]`` (``(m, n)``, default every row) of ``f_batch`` (points
    ``(B, n)`` -> values ``(B, M)``) at ``x`` (flattened), with its error estimate.

    ``method`` (module docstring): ``"auto"`` is ``"coloured"`` with a ``pattern`` (the AD
    Jacobian block, ``(m, n)``; NaN counts as nonzero), else ``"table"``.  ``f0``: ``f(x)``,
    evaluated when not given.  ``seed``: the random weights and spot checks of the coloured
    and stencil methods.  ``levels``: the Richardson table's (``"coordinates"`` uses
    :data:`gradcheck.oracle.fd.DEFAULT_LEVELS` whatever this says, and its own steps).  ``model``
    judges whether two FD cells (or an FD cell and the pattern's) agree.  ``chunk``:
    points per call of ``f_batch``; ``columns``: directions per call of the table."""
    x = np.asarray(x, dtype=np.float64).ravel()
    if method == "auto":
        method = "table" if pattern is None else "coloured"
    if method == "coordinates":
        est = fd.directional_derivatives(f_batch, x, np.eye(x.size))
        return _sliced(FDJacobian(est.value.T, est.error.T, x.size, est.evaluations,
                                  "Richardson table per coordinate"), rows)
    if f0 is None:
        f0 = fd._evaluate(f_batch, x[None, :], chunk)[0]
    f0 = np.asarray(f0, dtype=np.float64).ravel()
    h0 = fd.initial_step(x, np.ones(1))  # the step of every coordinate
    if method == "table":
        return _sliced(_table(f_batch, x, h0, f0, levels, chunk, columns), rows)
    if method == "stencil":
        return _sliced(_dense(f_batch, x, h0, f0, levels, seed, model), rows)
    if method != "coloured":
        raise ValueError(f"unknown FD Jacobian method {method!r}")
    if pattern is None:
        raise ValueError("the coloured FD Jacobian needs a pattern")
    return _coloured(f_batch, x, pattern, slice(None) if rows is None else rows, f0=f0,
                     seed=seed, levels=levels, model=model, h0=h0)


def _sliced(est: FDJacobian, rows: slice | None) -> FDJacobian:
    if rows is None:
        return est
    return FDJacobian(est.value[rows], est.error[rows], est.directions, est.evaluations,
                      est.how, est.recomputed)


def _table(f_batch: Callable, x: np.ndarray, h0: float, f0: np.ndarray, levels: int,
           chunk: int, columns: int) -> FDJacobian:
    """The ``"table"`` method: unit directions, ``columns`` per batched call."""
    n = x.size
    J = np.empty((f0.size, n))
    E = np.empty((f0.size, n))
    evaluations = 0
    for start in range(0, n, columns):
        stop = min(start + columns, n)
        dirs = np.zeros((stop - start, n))
        dirs[np.arange(stop - start), np.arange(start, stop)] = 1.0
        est = fd.directional_derivatives(f_batch, x, dirs, levels=levels, h0=h0, chunk=chunk,
                                         f0=f0, one_sided=False)
        J[:, start:stop] = est.value.T
        E[:, start:stop] = est.error.T
        evaluations += est.evaluations
    return FDJacobian(J, E, n, evaluations, "Richardson table per column")


def _dense(f_batch: Callable, x: np.ndarray, h0: float, f0: np.ndarray, levels: int,
           seed: int, model: error_model.ErrorModel) -> FDJacobian:
    """The ``"stencil"`` method: a 5-point stencil per column, guarded by the table."""
    n = x.size

    def table(cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        val, err, _, evaluations = _fd_along(f_batch, x, np.eye(n)[cols], h0, f0, levels)
        return val, err, evaluations

    est = _stencil.stencil_jacobian(f_batch, x, f0, table=table, seed=seed, model=model)
    return FDJacobian(est.value, est.error, n, est.evaluations, est.how, est.recomputed)


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
        # colours 0..top: the used ones and a new one
        taken = np.asarray(used[r, :top + 1].any(axis=0))
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


def _allowed(err: np.ndarray, a: np.ndarray, b: np.ndarray | float,
             model: error_model.ErrorModel = error_model.DEFAULT_MODEL) -> np.ndarray:
    """The localization's allowance for comparing ``a`` and ``b`` (FD error ``err``, the terms
    ``|a| + |b|``): :meth:`gradcheck.oracle.error_model.ErrorModel.allowed`."""
    return model.allowed(err, np.abs(a) + np.abs(b))


@dataclass
class _Problem:
    """What every FD pass of one block shares, and the block being filled in."""

    f_batch: Callable
    x: np.ndarray
    J_ad: np.ndarray
    nonzero: tuple[np.ndarray, np.ndarray]  # rows and columns of the AD pattern
    h0: float
    f0: np.ndarray
    levels: int
    sl: slice
    rng: np.random.Generator
    value: np.ndarray  # (m, n) the FD Jacobian, filled in pass by pass
    error: np.ndarray
    model: error_model.ErrorModel = error_model.DEFAULT_MODEL  # judges each cell
    evaluations: int = 0
    directions: int = 0
    verified: int = 0  # sets evaluated with a second weighting
    unit_columns: int = 0  # columns differentiated on their own

    def fd(self, D: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        val, err, used, evaluations = _fd_along(self.f_batch, self.x, D, self.h0, self.f0,
                                                self.levels)
        self.evaluations += evaluations
        self.directions += len(D)
        return val[:, self.sl], err[:, self.sl], used


class _Pass:
    """One random weighting of some column sets (each one FD direction): per (set, row) the FD
    cell, whether it disagrees with the AD cell, and the weights used."""

    def __init__(self, pb: _Problem, sets: list[np.ndarray]):
        m, n = pb.J_ad.shape
        w = _weights(pb.rng, n)
        D = np.zeros((len(sets), n))
        self.set_of = np.full(n, -1)  # column -> its set in this pass
        for k, cols in enumerate(sets):
            D[k, cols] = w[cols]
            self.set_of[cols] = k
        self.value, self.error, used = pb.fd(D)  # (len(sets), m)
        self.weight = np.zeros(n)  # the rounded weight of every column of the pass
        for k, cols in enumerate(sets):
            self.weight[cols] = used[k, cols]
        # (J_ad d_k)_r per cell along the rounded directions, summed over the AD nonzeros;
        # owner: the column of set k that is nonzero in row r in the AD pattern (at most one)
        rr, cc = pb.nonzero
        keep = self.set_of[cc] >= 0
        rr, cc = rr[keep], cc[keep]
        k_of = self.set_of[cc]
        ad = np.bincount(k_of * m + rr, weights=pb.J_ad[rr, cc] * self.weight[cc],
                         minlength=len(sets) * m).reshape(len(sets), m)
        self.owner = np.full((len(sets), m), -1)
        self.owner[k_of, rr] = cc
        with np.errstate(invalid="ignore"):
            self.fails = ~(np.abs(self.value - ad) <= _allowed(self.error, self.value, ad,
                                                               pb.model))
        self.sets = sets
        self.model = pb.model

    def attribute(self, pb: _Problem) -> None:
        """Into ``pb``: per element of the pass's columns in the AD pattern, its cell divided
        by its weight; 0 for the others (the cell of a correct set holds only the pattern's
        element); the error is the cell's divided by the weight."""
        cols = np.flatnonzero(self.set_of >= 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(self.weight != 0, self.weight, np.nan)
            pb.error[:, cols] = (self.error[self.set_of[cols]] / np.abs(w[cols])[:, None]).T
            pb.value[:, cols] = 0.0
            k = self.owner >= 0
            owners = self.owner[k]
            rows = np.nonzero(k)[1]
            pb.value[rows, owners] = self.value[k] / w[owners]

    def suspects(self) -> list[int]:
        """Sets with a disagreeing cell, or a weight rounded too small to attribute by."""
        return [k for k, cols in enumerate(self.sets)
                if self.fails[k].any() or np.any(np.abs(self.weight[cols]) < _MIN_WEIGHT)]


def _coloured(f_batch: Callable, x: np.ndarray, J_ad: np.ndarray, sl: slice, *,
              f0: np.ndarray, seed: int, levels: int, model: error_model.ErrorModel,
              h0: float) -> FDJacobian:
    """The ``"coloured"`` method: the FD block ``J[sl, :]``, compressed by the colouring of
    ``J_ad``'s pattern where that needs at most ``n / 3`` colours, else the ``"stencil"``
    method.  See the module docstring for why a wrong AD pattern cannot hide an error."""
    m, n = J_ad.shape
    pattern = J_ad != 0  # NaN counts as nonzero
    colours = colour_columns(pattern, n // _COMPRESS_BELOW)
    if colours is None:  # dense: a 5-point stencil per column, guarded by the table
        return _sliced(_dense(f_batch, x, h0, f0, levels, seed, model), sl)
    rows, cols = np.nonzero(pattern)
    pb = _Problem(f_batch, x, J_ad, (rows, cols), h0, f0, levels, sl,
                  np.random.default_rng(seed), np.zeros((m, n)), np.zeros((m, n)), model)
    G = int(colours.max()) + 1
    order = np.argsort(colours, kind="stable")
    groups = np.split(order, np.searchsorted(colours[order], np.arange(1, G)))
    _solve(pb, groups)
    how = (f"compressed: {G} colour group{'s' if G != 1 else ''}, {pb.verified} column "
           f"set{'s' if pb.verified != 1 else ''} verified with a second weighting, "
           f"{pb.unit_columns} of {n} columns refined one by one, {pb.directions} FD directions")
    return FDJacobian(pb.value, pb.error, pb.directions, pb.evaluations, how)


def _solve(pb: _Problem, sets: list[np.ndarray]) -> None:
    """Fill in the columns of ``sets`` (each free of AD-pattern conflicts): one weighting;
    a second one for the sets that disagree; the sets that cannot be attributed are halved
    and solved again (a wrong element hides in one half), down to single columns."""
    first = _Pass(pb, sets)
    first.attribute(pb)
    suspect = first.suspects()
    if not suspect:
        return
    pb.verified += len(suspect)
    second = _Pass(pb, [sets[k] for k in suspect])
    children = []
    for k2, k in enumerate(suspect):
        if not _attributable(first, second, k, k2):
            cols = sets[k]
            if cols.size <= _LEAF:
                val, err, _ = pb.fd(np.eye(pb.value.shape[1])[cols])
                pb.value[:, cols], pb.error[:, cols] = val.T, err.T
                pb.unit_columns += cols.size
            else:
                children += [cols[:cols.size // 2], cols[cols.size // 2:]]
    if children:
        _solve(pb, children)


def _attributable(first: _Pass, second: _Pass, k: int, k2: int) -> bool:
    """Whether every cell of set ``k`` of ``first`` (set ``k2`` of ``second``) belongs to one
    element: both weightings give it the same value, or both see zero where the AD pattern
    has no element; and no weight is too small and no estimate non-finite."""
    cols = first.sets[k]
    if np.any(np.abs(first.weight[cols]) < _MIN_WEIGHT) or np.any(
            np.abs(second.weight[cols]) < _MIN_WEIGHT):
        return False
    c = first.owner[k]
    v1, e1 = first.value[k], first.error[k]
    v2, e2 = second.value[k2], second.error[k2]
    has = c >= 0
    w1 = np.where(has, first.weight[np.maximum(c, 0)], 1.0)
    w2 = np.where(has, second.weight[np.maximum(c, 0)], 1.0)
    a, b = v1 / w1, v2 / w2
    with np.errstate(invalid="ignore"):
        agree = np.abs(a - b) <= _allowed(e1 / np.abs(w1) + e2 / np.abs(w2), a, b, first.model)
        # no AD nonzero in this row of the set: FD must see none either, in both weightings
        zero = ((np.abs(v1) <= _allowed(e1, v1, 0.0, first.model))
                & (np.abs(v2) <= _allowed(e2, v2, 0.0, first.model)))
    return bool(np.all(np.where(has, agree, zero)))
