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
* a VJP failure where output ``i`` and input ``j`` have one shape is first named from the
  gradient ``g = J^T v`` (the probe's VJP, handed over by the projected failing path, else
  one VJP row), as if ``J`` were diagonal (a function applied elementwise): then ``g_r u_r``
  is ``v_r (J u)_r``, compared with the table's element by element.  That is a hypothesis,
  verified before anything is reported, by one VJP row whose cotangent is ``v`` on the
  elements the hypothesis finds within their allowance, ``c_t v_t`` on the :data:`WORST`
  named elements (distinct random ``c_t``) and zero on the other elements over their
  allowance.  Its result must be, element by element within rounding, ``g`` on the first,
  ``c_t g_t`` on the named and zero on the rest: as a polynomial in ``c`` that holds only
  where each named row of ``J`` has its one element on the diagonal, of value ``g_t / v_t``
  (a row with any other element, or another value, breaks it for all but a null set of
  weights).  Each named element's value is read from that row, and the elements within
  their allowance must be within it as one group, from the same row.  One VJP row (two
  where the gradient was not handed over), whatever ``m``.  Where the other probes'
  gradients are handed over too, they test the hypothesis first, free: a diagonal ``J``
  gives ``g_r / v_r`` the same on every probe, so where it differs at most elements of a
  random sample the row is not paid for (it could only reject).  Where any of that fails
  (a Jacobian that is not diagonal: ``details["localize_hypothesis"]`` says why), the
  transposition below runs;
* a VJP failure of any Jacobian, where the backend can differentiate its own VJP again
  (``supports_order2_for``): the VJP ``w -> J^T w`` is linear in ``w``, so one VJP of it
  (:meth:`~gradcheck.backends.base.Backend.vjp_function`) along ``u`` is the backend's
  ``J u`` for every output element at once: the values a bisection looks for.  The
  bisection's best-first search below runs on them instead of on VJP rows, so it reaches
  the elements the bisection would.  That too is a hypothesis (the engine's derivative of
  the user's backward, not the backward itself), verified before anything is reported by
  one batched VJP call of two rows, each a random combination (a weight ``c_r`` per
  element, uniform in [1, 2]) that must give ``<J^T (c v), u> = sum_r c_r v_r (J u)_r``
  within the rounding of its terms: one of every element's cotangent (a transposition
  wrong at any element breaks it for all but a null set of weights, as in Freivalds' check
  of a matrix product), one of the named elements' alone (their values, to the rounding
  of their own few terms, where the first row's tolerance grows with ``m``: a value off by
  ``X`` times that rounding passes with probability at most ``2 / X``).  Each named element
  must be over its allowance.  Where the other probes' gradients ``J^T v_q`` are handed
  over (the projected failing path), they are the combinations of every element's
  cotangent, already made: ``<v_q, J u> = <J^T v_q, u>`` for each, with the probes'
  Gaussian ``v_q``, drawn independently of the ``v`` the transposition is taken at, and
  the call is the named elements' row alone.  Two VJP rows (one with the other probes'
  gradients) and one VJP of the VJP, whatever ``m`` (from :data:`TRANSPOSE_ELEMENTS`
  output elements on).  Where the backend cannot, or the
  verification fails (``details["localize_transposed"]`` says why), the bisection below
  runs;
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
#: elements of the cotangents (or gradients) one vectorized VJP call holds at most (the
#: backward pass batched: its intermediates grow with the rows): 8 rows at n = 1e6
CALL_ELEMENTS = 2**23
#: ... and one looped call, where not even two rows fit vectorized: one forward pass, then
#: one backward pass per row, the rows stacked (6 rows at n = 1e7: one forward pass per 6
#: rows, not one per row)
LOOP_ELEMENTS = 2**26
#: output elements from which the transposed VJP is tried: below, a bisection is a few small
#: batched calls and neither wins clearly (a torch custom backward at m = 1e3: 13.5-20 ms
#: transposed against 15-19 ms bisected; JAX's first call compiles the nested VJP: 0.99 s
#: against 0.87 s at 1e3, 0.82 s against 1.02 s at 1e4), so small blocks keep the bisection
TRANSPOSE_ELEMENTS = 2**12
#: how :attr:`CheckResult.localized` starts for a block localized by this module
PREFIX = "along the tangent"


def bisect(prep: Prepared, kind: CheckKind, i: int, j: int, est: fd.FDEstimate, pr: Probes,
           p: int, sl: slice, gradients: Sequence[np.ndarray] | None = None
           ) -> tuple[str, tuple[WorstElement, ...], dict[str, object]]:
    """The worst output elements of output ``i`` along probe ``p``'s tangent of input ``j``
    (module docstring): ``(how, worst, details)``; ``how`` names what was compared, or the
    call that failed.  ``est``: the estimate the verdict rests on (its rows go with ``pr``);
    ``sl``: output ``i``'s slice of its elements; ``gradients``: the backend's ``J^T v_q`` for
    input ``j`` of every probe ``q`` of ``pr`` where the caller has them (the diagonal
    hypothesis starts from probe ``p``'s; the others test it, and verify a transposition)."""
    budget, worst = BUDGET_ROWS, WORST
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
    rows = 0
    others = _other_probes(pr, i, p, gradients)
    not_diagonal = (_not_diagonal(v, gradients[p], others, prep.cfg.seed)
                    if gradients is not None else "")
    if hypothesis_applies(prep, i, j) and not not_diagonal:
        found_h = hypothesize(prep, i, j, v, u, fd_r, err_r,
                              None if gradients is None else gradients[p])
        if isinstance(found_h, AdapterFailure):
            return f"failed: {found_h.text}", (), {}
        rows = found_h.rows
        if found_h.worst:
            return (f"{PREFIX} of probe {p + 1}: {m} output elements, named from the "
                    f"gradient as a diagonal Jacobian and verified, {rows} VJP "
                    f"row{'' if rows == 1 else 's'}",
                    found_h.worst, {"localize_rows": rows, "localize_hypothesis": "verified"})
        rejected: dict[str, object] = {"localize_hypothesis": f"rejected: {found_h.why}"}
    elif hypothesis_applies(prep, i, j):
        rejected = {"localize_hypothesis": f"rejected: {not_diagonal}"}
    else:
        rejected = {}
    if m >= TRANSPOSE_ELEMENTS and transposition_applies(prep):
        found_t = transpose(prep, i, j, v, u, fd_r, err_r, others)
        if isinstance(found_t, AdapterFailure):
            rejected["localize_transposed"] = f"unavailable: {found_t.text}"
        elif not found_t.why:
            rows += found_t.rows
            return (f"{PREFIX} of probe {p + 1}: {m} output elements, named from the "
                    f"transposed VJP (one VJP of the VJP) and verified, {rows} VJP "
                    f"row{'' if rows == 1 else 's'}{found_t.stopped}", found_t.worst,
                    {"localize_rows": rows, **rejected, "localize_transposed": "verified"})
        else:
            rows += found_t.rows
            rejected["localize_transposed"] = f"rejected: {found_t.why}"
    # VJP: best-first bisection over groups of output elements
    searched = _search(v, fd_r, err_r, out_shape, model, dtype, budget - rows,
                       lambda parts: _vjp_groups(prep, i, j, v, u, parts))
    rows += searched.rows
    if searched.failure is not None:
        return (f"failed: {searched.failure.text}", searched.leaves,
                {"localize_rows": rows, **rejected})
    how = (f"{PREFIX} of probe {p + 1}: {m} output elements bisected, {rows} VJP "
           f"rows{searched.stopped}")
    return how, searched.leaves, {"localize_rows": rows, **rejected}


#: a search's scalars of groups of output elements: ``<J^T (v 1_R), u>`` and its magnitude
#: for each group ``[lo, hi)`` (VJP rows, or the transposed VJP's values)
GroupScalars = Callable[[list[tuple[int, int]]],
                        "tuple[list[float], list[float]] | AdapterFailure"]


@dataclass(frozen=True)
class Search:
    """What a best-first search found: the worst elements (leaves), the groups it evaluated
    (each a VJP row where they are VJP rows), why it stopped before an element where it did,
    and the adapter's failure where a call failed."""

    leaves: tuple[WorstElement, ...]
    rows: int
    stopped: str = ""
    failure: AdapterFailure | None = None
    flat: tuple[int, ...] = ()  # the leaves' flat indices among the output's elements


def _search(v: np.ndarray, fd_r: np.ndarray, err_r: np.ndarray, out_shape: tuple[int, ...],
            model: ErrorModel, dtype: str, budget: int, scalars: GroupScalars) -> Search:
    """Best-first search over groups of output elements (module docstring): the group whose
    AD scalar exceeds its allowance the most is split next into :data:`BRANCH` groups, down to
    :data:`WORST` single elements, within ``budget`` groups evaluated."""
    m = fd_r.size
    av, afd, aerr = np.abs(v), np.abs(fd_r), np.abs(err_r)
    heap: list[tuple[float, int, int]] = [(-np.inf, 0, m)]
    leaves: list[WorstElement] = []
    single: dict[int, float] = {}  # the AD scalar of each single-element group evaluated
    flat: list[int] = []
    rows = 0
    stopped = ""
    while heap and len(leaves) < WORST:
        neg, a, b = heapq.heappop(heap)
        if -neg <= 1.0:
            if not leaves:
                stopped = (" (no group of elements over its allowance: the error is spread "
                           "over elements each within its own)")
            break
        if b - a == 1 and a in single:  # (a one-element root is evaluated first)
            leaves.append(_leaf(a, v, fd_r, err_r, out_shape, model, dtype, single[a]))
            flat.append(a)
            continue
        parts = _split(a, b, BRANCH)
        if rows + len(parts) > budget:
            if not leaves:
                stopped = " (budget spent before an element was reached)"
            break
        groups = scalars(parts)
        if isinstance(groups, AdapterFailure):
            return Search(tuple(leaves), rows, failure=groups, flat=tuple(flat))
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
    return Search(tuple(leaves), rows, stopped, flat=tuple(flat))


@dataclass(frozen=True)
class Hypothesis:
    """What a hypothesis (the diagonal one, or the transposition) named: the worst elements,
    verified (empty where the hypothesis was rejected, ``why`` says why), and the VJP rows it
    took; ``stopped``: why the transposition's search reached no element, where it did
    not."""

    worst: tuple[WorstElement, ...]
    rows: int
    why: str = ""
    stopped: str = ""


def hypothesis_applies(prep: Prepared, i: int, j: int) -> bool:
    """Output ``i`` and input ``j`` have one shape (more than one element): element ``r`` of
    one may be element ``r`` of the other, as for a function applied elementwise."""
    return np.shape(prep.outs64[i]) == prep.args64[j].shape and prep.args64[j].size > 1


def hypothesize(prep: Prepared, i: int, j: int, v: np.ndarray, u: np.ndarray,
                fd_r: np.ndarray, err_r: np.ndarray, gradient: np.ndarray | None = None
                ) -> Hypothesis | AdapterFailure:
    """The worst elements named as if ``J`` were diagonal, then verified (module docstring).
    ``gradient``: the backend's ``J^T v`` where the caller has it (else one VJP row).  Then
    one VJP row verifies the named elements (random weights) and gives the group of the
    elements within their allowance."""
    model, dtype = prep.cfg.error_model, prep.rule_dtype
    out_shape = np.shape(prep.outs64[i])
    rows = 0
    if gradient is None:
        made = _vjp_row(prep, i, j, v)
        if isinstance(made, AdapterFailure):
            return made
        gradient, rows = made, 1
    g = np.asarray(gradient, dtype=np.float64).reshape(-1)
    uf = u.ravel()
    a = g * uf  # the AD terms of <J^T v, u>: v_r (J u)_r where J is diagonal
    av = np.abs(v)
    with np.errstate(all="ignore"):
        # |a - v fd| over the allowance of the element (docs/error-model.md: as a leaf)
        ratio = np.abs(a - v * fd_r) / np.maximum(
            model.allowed(av * np.abs(err_r), np.abs(a) + av * np.abs(fd_r), dtype), 1e-300)
    ratio[np.isnan(ratio)] = np.inf
    ratio[v == 0] = 0.0  # (an element with a zero cotangent is in no VJP row's sum)
    over = ratio > 1.0
    n_over = int(np.count_nonzero(over))
    if n_over == 0:
        return Hypothesis((), rows, "no element over its allowance from the gradient")
    k = min(WORST, n_over)
    top = np.argpartition(-ratio, k - 1)[:k] if ratio.size > k else np.arange(ratio.size)
    top = top[np.argsort(-ratio[top], kind="stable")]
    top = top[ratio[top] > 1.0]
    k = top.size
    comp = ~over
    # one VJP row: the named elements' cotangents weighted by random c_t, the elements within
    # their allowance (the complement) unweighted.  Where J is diagonal, J^T w is c_t g_t at
    # each named t, g at the complement and zero at the other elements over their allowance;
    # as a polynomial in c, that equality holds only where each named row of J has its one
    # element on the diagonal, of value g_t / v_t, and the complement's rows sum to g there:
    # a row of J with any other element, or another value, breaks it for all but a null set
    # of c (found within rounding: each element of J^T w against the allowance of its terms)
    c = np.random.default_rng(prep.cfg.seed).uniform(1.0, 2.0, k)
    w = np.where(comp, v, 0.0)
    w[top] = c * v[top]
    row = _vjp_row(prep, i, j, w)
    if isinstance(row, AdapterFailure):
        return row
    rows += 1
    want = np.where(comp, g, 0.0)
    want[top] = c * g[top]
    if not np.all(np.abs(row - want) <= model.allowed(0.0, np.abs(row) + np.abs(want),
                                                      dtype)):
        return Hypothesis((), rows, "the named elements' rows of J are not what the gradient "
                                    "gives them as a diagonal Jacobian")
    leaves = []
    for e, t in enumerate(top):
        # the element's own value from the verifying row: (J u)_t = row_t u_t / (c_t v_t)
        leaf = _judged(int(t), float(row[t] * uf[t] / (c[e] * v[t])), fd_r, err_r,
                       out_shape, model, dtype)
        if not abs(leaf.actual - leaf.expected) > leaf.allowed:
            return Hypothesis((), rows, f"output element {int(t)} is within its allowance")
        leaves.append(leaf)
    if comp.any():  # the elements not named and not over: within their allowance as a group
        au = np.abs(uf)
        s_c = float(row @ uf) - float(row[top] @ uf[top])
        mag_c = float(np.abs(row) @ au)
        f_c = float(np.where(comp, v * fd_r, 0.0).sum())
        e_c = float(np.where(comp, av * np.abs(err_r), 0.0).sum())
        allowed_c = model.allowed(e_c, mag_c + float(np.where(comp, av * np.abs(fd_r),
                                                              0.0).sum()), dtype)
        if not abs(s_c - f_c) <= allowed_c:
            return Hypothesis((), rows, f"the {int(comp.sum())} elements not named are over "
                                        "their allowance as a group")
    leaves.sort(key=lambda w: -abs(w.actual - w.expected) / max(w.allowed, 1e-300))
    return Hypothesis(tuple(leaves), rows)


#: elements of the output the probes' gradients are compared at, for
#: :func:`_not_diagonal` (a random sample: the test is a shortcut, not a verdict)
DIAGONAL_SAMPLE = 4096
#: relative difference of ``g_p v_q`` and ``g_q v_p`` that no diagonal Jacobian's rounding
#: reaches (their difference is one product's rounding apart where ``J`` is diagonal)
DIAGONAL_TOLERANCE = 1e-6


def _other_probes(pr: Probes, i: int, p: int, gradients: Sequence[np.ndarray] | None
                  ) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(v_q, J^T v_q)`` (flattened, float64) of every probe ``q`` but ``p`` whose gradient
    the caller handed over."""
    if gradients is None:
        return []
    return [(np.asarray(pr.v[i][q], dtype=np.float64).ravel(),
             np.asarray(gradients[q], dtype=np.float64).ravel())
            for q in range(min(len(gradients), len(pr.v[i]))) if q != p]


def _not_diagonal(v: np.ndarray, g: np.ndarray, others: list[tuple[np.ndarray, np.ndarray]],
                  seed: int) -> str:
    """Why the probes' gradients already show ``J`` is not diagonal, or "" where they do not:
    a diagonal ``J`` gives ``g_r = d_r v_r`` on every probe, so ``g_r v_qr`` and ``g_qr v_r``
    agree for each element ``r`` and probe ``q`` (within a product's rounding).  Where they
    differ by more than :data:`DIAGONAL_TOLERANCE` at most elements of a random sample of
    :data:`DIAGONAL_SAMPLE`, the hypothesis's verifying row is not paid for (it could only
    reject it).  A few differing elements decide nothing here (the verifying row does)."""
    g = np.asarray(g, dtype=np.float64).ravel()
    if not others or g.size != v.size:
        return ""
    m = v.size
    at = (np.random.default_rng(seed).choice(m, DIAGONAL_SAMPLE, replace=False)
          if m > DIAGONAL_SAMPLE else np.arange(m))
    vs, gs = v[at], g[at]
    differs = np.zeros(at.size, dtype=bool)
    for v_q, g_q in others:
        if g_q.size != m:
            return ""
        with np.errstate(all="ignore"):
            a, b = gs * v_q[at], g_q[at] * vs
            differs |= np.abs(a - b) > DIAGONAL_TOLERANCE * (np.abs(a) + np.abs(b))
    if not np.count_nonzero(differs) * 2 > at.size:
        return ""
    return (f"the probes' gradients are not a diagonal Jacobian's: g_r / v_r differs between "
            f"probes at {int(np.count_nonzero(differs))} of {at.size} elements sampled")


def transposition_applies(prep: Prepared) -> bool:
    """The backend can differentiate its own VJP of ``prep``'s function (order 2), so that its
    transposition gives ``J u`` (module docstring); an adapter whose answer raises: no."""
    known = prep.backend.call("supports_order2_for", prep.backend.backend.supports_order2_for,
                              prep.fn)
    return known is True


def transpose(prep: Prepared, i: int, j: int, v: np.ndarray, u: np.ndarray,
              fd_r: np.ndarray, err_r: np.ndarray,
              others: Sequence[tuple[np.ndarray, np.ndarray]] = ()
              ) -> Hypothesis | AdapterFailure:
    """The worst elements named from the transposed VJP, then verified (module docstring):
    ``why`` empty where verified (``worst`` empty where the search reached no element, as a
    bisection's), else why not; an :class:`AdapterFailure` where the backend could not
    transpose.  ``others``: ``(v_q, J^T v_q)`` of the other probes, where the caller has
    them: each is a combination of every element's cotangent already made (``v_q`` drawn
    independently of ``v``, at which the transposition is taken), so the verifying call
    needs only the named elements' row."""
    model, dtype = prep.cfg.error_model, prep.rule_dtype
    out_shape = np.shape(prep.outs64[i])
    a = _transposed(prep, i, j, v, u)
    if isinstance(a, AdapterFailure):
        return a
    if a.shape != v.shape:
        return Hypothesis((), 0, f"the transposed VJP has {a.size} elements, not {v.size}")
    with np.errstate(all="ignore"):
        va = v * a  # each element's term of <J^T v, u>, as the transposition gives it
        ava = np.abs(va)

    def scalars(parts: list[tuple[int, int]]) -> tuple[list[float], list[float]]:
        return ([float(va[lo:hi].sum()) for lo, hi in parts],
                [float(ava[lo:hi].sum()) for lo, hi in parts])

    # the bisection's search on the transposition's values: the groups it would evaluate,
    # the elements it would reach (no VJP row each; no budget but the search's own bound)
    found = _search(v, fd_r, err_r, out_shape, model, dtype, BRANCH * v.size, scalars)
    top = list(found.flat)
    # the whole transposition against the other probes' VJPs: <v_q, J u> = <J^T v_q, u>
    # within the rounding of their terms (Freivalds' check, with the probes' Gaussian v_q)
    uf = u.ravel()
    au, aa = np.abs(uf), np.abs(a)
    for q, (v_q, g_q) in enumerate(others):
        with np.errstate(all="ignore"):
            want = float(v_q @ a)
            allowed = model.allowed(0.0, float(np.abs(v_q) @ aa) + float(np.abs(g_q) @ au),
                                    dtype)
            if not abs(float(g_q @ uf) - want) <= allowed:
                return Hypothesis((), 0, "the VJP and the transposed VJP differ on another "
                                         f"probe's cotangent (probe {q + 1} of the others)")
    # the rows still to make, in one call, each a random combination (weights c_r, distinct
    # per row): of every element's cotangent (the whole transposition), where no other
    # probe checked it, and of the named elements' alone (their values, within the rounding
    # of their own terms), where the search named any
    c = np.random.default_rng(prep.cfg.seed).uniform(1.0, 2.0, (2, v.size))
    named = np.array(top, dtype=np.int64)
    kinds = [k for k, wanted in enumerate((not others, bool(top))) if wanted]
    if not kinds:
        return _verified(top, found, 0)

    def fill(w: np.ndarray, rows: range) -> None:
        for b, r in enumerate(rows):
            if kinds[r] == 0:
                np.multiply(c[0], v, out=w[b])
            else:
                w[b, named] = c[1, named] * v[named]

    got = _vjp_scalars(prep, i, j, u, len(kinds), fill)
    if isinstance(got, AdapterFailure):
        return got
    s, mag = got
    rows = len(s)
    for k, s_k, mag_k in zip(kinds, s, mag, strict=True):
        weights, on, what = ((c[0], va, "every element's cotangent") if k == 0 else
                             (c[1, named], va[named], "the named elements' cotangents"))
        with np.errstate(all="ignore"):
            want = float(weights @ on)
            allowed = model.allowed(0.0, mag_k + float(weights @ np.abs(on)), dtype)
        if not abs(s_k - want) <= allowed:
            return Hypothesis((), rows, "the VJP and the transposed VJP differ on a random "
                                        f"combination of {what}")
    return _verified(top, found, rows)


def _verified(top: list[int], found: Search, rows: int) -> Hypothesis:
    """The transposition's search's leaves, each over its allowance, worst first."""
    for t, leaf in zip(top, found.leaves, strict=True):  # (the search's leaves, judged)
        if not abs(leaf.actual - leaf.expected) > leaf.allowed:
            return Hypothesis((), rows, f"output element {t} is within its allowance")
    leaves = sorted(found.leaves, key=lambda w: -abs(w.actual - w.expected)
                    / max(w.allowed, 1e-300))
    return Hypothesis(tuple(leaves), rows, "", found.stopped)


def _transposed(prep: Prepared, i: int, j: int, v: np.ndarray, u: np.ndarray
                ) -> np.ndarray | AdapterFailure:
    """The backend's ``J u`` of output ``i`` (flattened) as the VJP of its VJP function along
    ``u`` (input ``j``), taken at the cotangent ``v`` (the VJP is linear in it)."""
    n_args = len(prep.args64)
    g = prep.backend.vjp_function(prep.fn, prep.diff, n_args)
    if isinstance(g, AdapterFailure):
        return g
    cts = [v.reshape(np.shape(o)) if k == i else np.zeros(np.shape(o))
           for k, o in enumerate(prep.outs64)]
    # (a copy: the probes' tangents are read-only, which torch warns of as it wraps them)
    along = [np.array(u).reshape(prep.args64[k].shape) if k == j
             else np.zeros(prep.args64[k].shape) for k in prep.diff]
    got = prep.backend.vjp(g, [*prep.args64, *cts], [n_args + i], along, prep.device)
    if isinstance(got, AdapterFailure):
        return got
    return np.asarray(got[0], dtype=np.float64).reshape(-1)


def _vjp_row(prep: Prepared, i: int, j: int, w: np.ndarray) -> np.ndarray | AdapterFailure:
    """The backend's ``J^T w`` (input ``j``, flattened) for one cotangent ``w`` of output
    ``i``: one VJP on the rule's own path (not vectorized: one row needs no batching rule)."""
    cts = [w.reshape((1,) + np.shape(o)) if k == i else np.zeros((1,) + np.shape(o))
           for k, o in enumerate(prep.outs64)]
    got = prep.backend.vjp_batch(prep.fn, prep.args64, prep.diff, cts, prep.device,
                                 vectorize=False)
    if isinstance(got, AdapterFailure):
        return got
    return np.asarray(got[prep.diff.index(j)], dtype=np.float64).reshape(-1)


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
    return _judged(r, actual, fd_r, err_r, out_shape, model, dtype)


def _judged(r: int, actual: float, fd_r: np.ndarray, err_r: np.ndarray,
            out_shape: tuple[int, ...], model: ErrorModel, dtype: str) -> WorstElement:
    """Output element ``r``'s AD value ``actual`` against the oracle's, with its allowance."""
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
    def fill(w: np.ndarray, rows: range) -> None:
        for b, r in enumerate(rows):
            lo, hi = parts[r]
            w[b, lo:hi] = v[lo:hi]

    return _vjp_scalars(prep, i, j, u, len(parts), fill)


def _vjp_scalars(prep: Prepared, i: int, j: int, u: np.ndarray, count: int,
                 fill: Callable[[np.ndarray, range], None]
                 ) -> tuple[list[float], list[float]] | AdapterFailure:
    """``<J^T w, u>`` and ``sum |J^T w| |u|`` for ``count`` cotangents ``w`` of output ``i``,
    written by ``fill(block, rows)`` into a zeroed block (one row per cotangent of ``rows``):
    vectorized calls of at most :data:`CALL_ELEMENTS` elements, or, where not even two rows
    fit one, looped calls of at most :data:`LOOP_ELEMENTS`."""
    out_shape = np.shape(prep.outs64[i])
    m = int(np.prod(out_shape, dtype=np.int64))
    size = max(m, u.size, 1)
    vectorize = count > 1 and CALL_ELEMENTS // size >= 2  # (one row needs no batching rule)
    per_call = max(1, min(count, (CALL_ELEMENTS if vectorize else LOOP_ELEMENTS) // size))
    uf = u.ravel()
    au = np.abs(uf)
    s: list[float] = []
    mag: list[float] = []
    for start in range(0, count, per_call):
        rows = range(start, min(count, start + per_call))
        B = len(rows)
        w = np.zeros((B, m))
        fill(w, rows)
        cts = [w.reshape((B,) + out_shape) if k == i else np.zeros((B,) + np.shape(o))
               for k, o in enumerate(prep.outs64)]
        got = prep.backend.vjp_batch(prep.fn, prep.args64, prep.diff, cts, prep.device,
                                     vectorize=vectorize)
        if isinstance(got, AdapterFailure):
            return got
        g = np.asarray(got[prep.diff.index(j)], dtype=np.float64).reshape(B, -1)
        s += [float(row @ uf) for row in g]
        a = np.empty(g.shape[1])  # (|row| into one buffer: no fresh array per row)
        mag += [float(np.abs(row, out=a) @ au) for row in g]
        del got, g, w, cts, a
    return s, mag
