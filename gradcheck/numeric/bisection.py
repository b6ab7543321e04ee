"""Localization on a budget, for a failed check whose Jacobian block is too large to build
(:mod:`.localize` builds blocks up to ``ErrorModel.localize_max_elements``): the worst output
elements along the tangent the oracle already differentiated, found without one more
evaluation of ``f``.

The oracle's estimate is per output element: along the failed probe's tangent ``u`` it holds
``(J u)_r`` with an error estimate for every output element ``r``.  So the finite-difference
side of any group ``R`` of output elements is a sum over the table already evaluated,
``sum_{r in R} v_r (J u)_r`` with cotangent ``v``, and only the AD side costs a call:

* a JVP failure needs no search: one JVP along ``u`` gives the backend's ``(J u)_r`` for every
  ``r``, compared element by element;
* a VJP failure is bisected: the backend's ``<J^T (v 1_R), u>`` for ``B`` groups ``R`` at a
  time (one batched VJP of :data:`BRANCH` rows), best first (the group whose discrepancy
  exceeds its allowance the most is split next) down to single elements, within
  :data:`BUDGET_ROWS` VJP rows in all.  A single wrong element sits in a group that fails
  at every level, so it is found in ``B ceil(log_B m)`` rows (56 at ``m = 1e6``).

Each comparison is judged as the check is: the error model's allowance of the FD error (the
group's sum of ``|v_r|`` times each element's error estimate) and the rounding of the terms.
A worst element is reported per output element (its index is the output's, the input is the
direction ``u``): its AD value ``(J u)_r`` against the oracle's, with its allowance.  Where
the error is spread thinly over many elements (every element within its own allowance) the
search finds none and says so; what it cannot cover within the budget it leaves out."""

from __future__ import annotations

import heapq

import numpy as np

from gradcheck.backends.guarded import AdapterFailure
from gradcheck.core.results import CheckKind, WorstElement
from gradcheck.numeric.context import Prepared
from gradcheck.numeric.probes import Probes
from gradcheck.oracle import fd
from gradcheck.oracle.error_model import ErrorModel

#: groups per split (rows of one batched VJP call)
BRANCH = 8
#: VJP rows one bisection may take (about two paths from the root to an element at m = 1e7)
BUDGET_ROWS = 128
#: the worst elements reported
WORST = 5
#: elements of the cotangents (or gradients) one batched VJP call holds at most: 8 rows at
#: n = 1e6, one row per call at 1e7 (the engine's batched intermediates grow with the rows)
CALL_ELEMENTS = 2**23
#: how :attr:`CheckResult.localized` starts for a block localized by this module
PREFIX = "along the tangent"


def bisect(prep: Prepared, kind: CheckKind, i: int, j: int, est: fd.FDEstimate, pr: Probes,
           p: int, sl: slice) -> tuple[str, tuple[WorstElement, ...], dict[str, object]]:
    """The worst output elements of output ``i`` along probe ``p``'s tangent of input ``j``
    (module docstring): ``(how, worst, details)``; ``how`` names what was compared, or the
    call that failed.  ``est``: the estimate the verdict rests on (its rows go with ``pr``);
    ``sl``: output ``i``'s slice of its elements."""
    branch, budget, worst = BRANCH, BUDGET_ROWS, WORST
    fd_r = est.value[p, sl]
    err_r = est.error[p, sl]
    u = np.asarray(pr.u[j][p], dtype=np.float64)
    v = np.asarray(pr.v[i][p], dtype=np.float64).ravel()
    m = fd_r.size
    out_shape = np.shape(prep.outs64[i])
    model, dtype = prep.cfg.error_model, prep.rule_dtype
    if kind is CheckKind.JVP:
        got = _jvp(prep, i, j, u)
        if isinstance(got, AdapterFailure):
            return f"failed: {got.text}", (), {}
        with np.errstate(all="ignore"):
            allowed = model.allowed(err_r, np.abs(got) + np.abs(fd_r), dtype)
            ratio = np.abs(got - fd_r) / np.maximum(allowed, 1e-300)
        ratio = np.where(np.isnan(ratio), np.inf, ratio)
        order = np.argsort(-ratio, kind="stable")[:worst]
        found = [_element(int(r), float(got[r]), float(fd_r[r]), float(allowed[r]), out_shape)
                 for r in order if ratio[r] > 1.0]
        return (f"{PREFIX} of probe {p + 1}: {m} output elements, one JVP",
                tuple(found), {"localize_rows": 1})
    # VJP: best-first bisection over groups of output elements
    av, afd, aerr = np.abs(v), np.abs(fd_r), np.abs(err_r)
    heap: list[tuple[float, int, int]] = [(-np.inf, 0, m)]
    rows = 0
    leaves: list[WorstElement] = []
    single: dict[int, float] = {}  # the AD scalar of each single-element group evaluated
    stopped = ""
    while heap and len(leaves) < worst:
        neg, a, b = heapq.heappop(heap)
        if -neg <= 1.0:
            if not leaves:
                stopped = (" (no group of elements over its allowance: the error is spread "
                           "over elements each within its own)")
            break
        if b - a == 1 and a in single:  # (a one-element root is evaluated first)
            leaves.append(_leaf(a, v, fd_r, err_r, out_shape, model, dtype, single[a]))
            continue
        parts = _split(a, b, branch)
        if rows + len(parts) > budget:
            if not leaves:
                stopped = " (budget spent before an element was reached)"
            break
        groups = _vjp_groups(prep, i, j, v, u, parts)
        if isinstance(groups, AdapterFailure):
            return f"failed: {groups.text}", tuple(leaves), {"localize_rows": rows}
        s, mag = groups
        rows += len(parts)
        for (lo, hi), s_g, mag_g in zip(parts, s, mag, strict=True):
            w = slice(lo, hi)
            f_g = float(v[w] @ fd_r[w])
            e_g = float(av[w] @ aerr[w])
            allowed = model.allowed(e_g, mag_g + float(av[w] @ afd[w]), dtype)
            diff = abs(s_g - f_g)
            ratio = diff / max(allowed, 1e-300) if np.isfinite(diff) else np.inf
            if hi - lo == 1:
                single[lo] = s_g
            heapq.heappush(heap, (-ratio, lo, hi))
    how = f"{PREFIX} of probe {p + 1}: {m} output elements bisected, {rows} VJP rows{stopped}"
    return how, tuple(leaves), {"localize_rows": rows}


def _split(a: int, b: int, branch: int) -> list[tuple[int, int]]:
    """``[a, b)`` in at most ``branch`` contiguous groups of nearly equal size."""
    edges = np.unique(np.linspace(a, b, min(branch, b - a) + 1).round().astype(int))
    return [(int(lo), int(hi)) for lo, hi in zip(edges[:-1], edges[1:], strict=True)]


def _leaf(r: int, v: np.ndarray, fd_r: np.ndarray, err_r: np.ndarray,
          out_shape: tuple[int, ...], model: ErrorModel, dtype: str, s: float) -> WorstElement:
    """Output element ``r``: the backend's ``(J u)_r`` (its scalar over ``v_r``) against the
    oracle's, with the allowance of that element."""
    vr = float(v[r])
    actual = s / vr if vr != 0 else float("nan")  # (a zero cotangent element: no value)
    allowed = model.allowed(float(err_r[r]), abs(actual) + abs(float(fd_r[r])), dtype)
    return _element(r, actual, float(fd_r[r]), float(allowed), out_shape)


def _element(r: int, actual: float, expected: float, allowed: float,
             out_shape: tuple[int, ...]) -> WorstElement:
    index = tuple(int(t) for t in np.unravel_index(r, out_shape)) if out_shape else ()
    return WorstElement(index, actual, expected, allowed)


def _jvp(prep: Prepared, i: int, j: int, u: np.ndarray) -> np.ndarray | AdapterFailure:
    """The backend's ``J u`` of output ``i`` (flattened), one JVP along ``u`` (input ``j``)."""
    tans = [u.reshape((1,) + prep.args64[k].shape) if k == j else
            np.zeros((1,) + prep.args64[k].shape) for k in prep.diff]
    got = prep.backend.jvp_batch(prep.fn, prep.args64, prep.diff, tans, prep.device,
                                 vectorize=True)
    if isinstance(got, AdapterFailure):
        return got
    return np.asarray(got[i], dtype=np.float64).reshape(-1)


def _vjp_groups(prep: Prepared, i: int, j: int, v: np.ndarray, u: np.ndarray,
                parts: list[tuple[int, int]]
                ) -> tuple[list[float], list[float]] | AdapterFailure:
    """``<J^T (v 1_R), u>`` and ``sum |J^T (v 1_R)| |u|`` for each group ``R`` of ``parts``
    (one batched VJP)."""
    out_shape = np.shape(prep.outs64[i])
    size = max(v.size, u.size, 1)
    per_call = max(1, min(len(parts), CALL_ELEMENTS // size))
    uf = u.ravel()
    au = np.abs(uf)
    s: list[float] = []
    mag: list[float] = []
    for start in range(0, len(parts), per_call):
        block = parts[start:start + per_call]
        B = len(block)
        w = np.zeros((B, v.size))
        for row, (lo, hi) in enumerate(block):
            w[row, lo:hi] = v[lo:hi]
        cts = [w.reshape((B,) + out_shape) if k == i else np.zeros((B,) + np.shape(o))
               for k, o in enumerate(prep.outs64)]
        got = prep.backend.vjp_batch(prep.fn, prep.args64, prep.diff, cts, prep.device,
                                     vectorize=True)
        if isinstance(got, AdapterFailure):
            return got
        g = np.asarray(got[prep.diff.index(j)], dtype=np.float64).reshape(B, -1)
        s += [float(row @ uf) for row in g]
        mag += [float(np.abs(row) @ au) for row in g]
        del got, g, w, cts
    return s, mag
