"""The fast screen (``gradcheck.check(..., fast=True)``): a cheap projected check that either
passes with a small allowance or hands the run to the full check.

What it compares is what the full check compares, ``<J^T v, u>`` (reverse mode) and
``<v, J u>`` (forward mode) against finite differences, for the same seeded probes; what it
saves is the oracle's robustness machinery:

* the probes share one tangent: probe ``p`` is ``(v_p, u)`` with ``P`` seeded cotangents and
  one seeded tangent ``u`` per input, so one finite-difference directional derivative ``J u``
  serves every cotangent (``<J^T v_p, u>`` and ``<v_p, J u>`` against ``v_p . (J u)_FD``) and
  one JVP ``J u`` serves every forward comparison (``docs/error-model.md`` 2b: what that
  costs in detection, and what it does not);
* the central differences are projected on every ``v_p`` before extrapolating
  (:func:`gradcheck.fd.projected_derivatives`): one Richardson table per compared scalar, 8
  evaluations in all instead of 20 per probe, no noise measurement, no retries, and one
  cheap kink test instead of two one-sided tables per output element;
* only the backend's primary reverse path runs (no eager-vs-functional comparison), and no
  forward-vs-reverse comparison.

It only passes.  Anything it cannot vouch for goes to the full check, whose results are then
the answer (with ``details["fast_screen"]`` saying why it ran):

* any disagreement beyond the error model's allowance (a wrong gradient, or an estimate the
  screen got wrong: the full oracle decides which);
* an FD error estimate above ``SCREEN_FLOOR`` times the comparison's absolute terms
  ``sum |v||J||u|``: the screen's estimate did not converge well enough to see small errors;
* a suspected kink, a non-finite estimate, an adapter error.

The floor is what the screen can guarantee: when it passes, a relative error in
``<v, J u>`` larger than about ``10 * SCREEN_FLOOR * terms / |<v, J u>|`` would have failed it.
The full check's own FD error is typically another 10-100 times smaller, and it draws ``P``
independent tangents.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .. import fd, tolerance
from ..results import CheckKind, Status
from .numeric import (
    _ad_scalars,
    _batch_fn,
    _compare_alternatives,
    _Ctx,
    _emit,
    _f0,
    _forward,
    _message,
    _no_forward_mode,
    _out_slices,
    _probe_ratios,
    _Probes,
    _probes,
    _reverse,
    _rows,
    _stacked,
    _terms,
)

SCREEN_FLOOR = 1e-11  # the screen's FD error must be below this fraction of sum |v||J||u|
# probes of the screen's eager-vs-functional comparison: two AD paths judged at rounding level,
# where one Gaussian probe misses a difference between them only with a probability of the
# order of its allowance over the difference (docs/error-model.md 2b)
ALTERNATIVE_PROBES = 1


def applies(ctx: _Ctx) -> bool:
    """The screen covers float64 rule checks of engines with float64 (the rounding check of a
    lower dtype and the rule check of float32-only engines always run in full)."""
    return ctx.dtype == "float64" and ctx.rule_dtype == "float64" and ctx.oracle is None


def label(ctx: _Ctx) -> tuple[str, str]:
    """The details key and the message label of the screen's results: ``fast_screen`` /
    "fast screen" under ``fast=True``, ``screen`` / "projected screen" in the default check."""
    return ("fast_screen", "fast screen") if ctx.cfg.fast else ("screen", "projected screen")


def screen(ctx: _Ctx) -> str | None:
    """Run the screen; if every comparison passes, record the results on ``ctx`` and return
    ``None``, else record nothing and return why the full check must run.

    In the default check (not ``fast``) the comparisons of two AD values run as well, with
    no finite differences: forward vs reverse and eager vs functional (their verdict, a pass
    or a failure, is recorded as in the full check; only the comparisons with the oracle
    decide whether the screen hands over)."""
    pr = _probes(ctx, tangents=1)  # P cotangents, one tangent per input (module docstring)
    slices = _out_slices(ctx)
    f0 = _f0(ctx)
    P = ctx.cfg.probes
    R = len(ctx.float_outs)
    # the projections: probe p's cotangent on output i's slice, zeros elsewhere (every input),
    # all P R of them on the one direction
    if R == 1:  # the cotangents themselves (one array, no copy)
        W = _stacked([v.ravel() for v in pr.v[ctx.float_outs[0]]]).reshape(1, P, f0.size)
    else:
        W = np.zeros((1, P * R, f0.size))
        for r, i in enumerate(ctx.float_outs):
            for p in range(P):
                W[0, p * R + r, slices[i]] = pr.v[i][p].ravel()
    est: dict[int, fd.ProjectedEstimate] = {}
    for j in ctx.diff:
        try:
            one = fd.projected_derivatives(
                _batch_fn(ctx, j), ctx.args64[j].ravel(),
                _stacked([u.ravel() for u in pr.u[j]]), W, f0=f0)
        except Exception as exc:
            return f"evaluating the function for finite differences raised: {exc!r:.200}"
        est[j] = _per_probe(one, P, R)
        pr.u[j] = _rows(one.directions.reshape((1,) + ctx.args64[j].shape))
    # each AD result is reduced to its compared scalars as soon as it arrives, and dropped: the
    # check never holds more than one reverse path's P gradients
    scalars: dict[CheckKind, dict[tuple[int, int], Any]] = {}
    if "fwd" in ctx.cfg.modes and ctx.backend.supports_jvp:
        # one JVP per input (J u), projected on every cotangent
        jvps = _forward(ctx, pr)
        scalars[CheckKind.JVP] = _reduced(ctx, CheckKind.JVP, {
            (j, p): jvps[(j, 0)] for j in ctx.diff for p in range(P)}, pr)
        del jvps
    pr.u = {j: pr.u[j] * P for j in ctx.diff}  # probe p is (v_p, u): the same array P times
    if "rev" in ctx.cfg.modes:
        scalars = {CheckKind.VJP: _reduced(
            ctx, CheckKind.VJP, _reverse(ctx, pr, ctx.args64, np.float64, False), pr), **scalars}
    cross = not ctx.cfg.fast
    # the eager-vs-functional comparison (two AD paths, no FD) on the first probe
    # (ALTERNATIVE_PROBES, docs/error-model.md 2b)
    first = _Probes({i: v[:ALTERNATIVE_PROBES] for i, v in pr.v.items()},
                    {j: u[:ALTERNATIVE_PROBES] for j, u in pr.u.items()})
    alt = (_reverse(ctx, first, ctx.args64, np.float64, True)
           if cross and CheckKind.VJP in scalars else {})
    staged: list[tuple[int, int, int, dict, list[dict[str, Any]]]] = []
    for r, i in enumerate(ctx.float_outs):
        for j in ctx.diff:
            e = est[j]
            if not np.all(e.finite[:, r]):
                return f"output {i} / input {j}: the FD estimate is not finite"
            if np.any(e.kink[:, r]):
                return f"output {i} / input {j}: one-sided derivatives differ (possible kink)"
            ad: dict[CheckKind, tuple[np.ndarray, np.ndarray]] = {}
            skipped: list[dict[str, Any]] = []
            for kind, table in scalars.items():
                vals = table[(i, j)]
                if isinstance(vals, NotImplementedError):  # skipped, as in the full check
                    skipped.append({"kind": kind.value, "status": Status.SKIPPED,
                                    "output_index": i, "input_index": j, "message": str(vals)})
                elif isinstance(vals, Exception):
                    return f"the backend's {kind.value.upper()} raised"
                else:
                    ad[kind] = vals
            if not ad:
                return f"output {i} / input {j}: no derivative to compare"
            terms = _terms(e.magnitude[:, r], ad)  # as the full check counts them
            judged = []
            for kind, (s_ad, _) in ad.items():
                verdict = _judge(ctx, kind, i, j, r, e, s_ad, terms)
                if isinstance(verdict, str):
                    return verdict
                judged.append(verdict)
            staged.append((i, j, r, ad, skipped + judged))
    text = label(ctx)[1]
    if "fwd" in ctx.cfg.modes and not ctx.backend.supports_jvp:
        _no_forward_mode(ctx)
    for i, j, r, ad, judged in staged:
        for kw in judged:
            res = ctx.result(**kw)
            if res.status is Status.PASSED:
                ctx.results[-1] = replace(res, message=_message(res, text))
        if not cross:
            continue
        where = {"output_index": i, "input_index": j}
        terms = _terms(est[j].magnitude[:, r], ad)
        if CheckKind.VJP in ad and CheckKind.JVP in ad:
            _emit(ctx, CheckKind.FWD_REV, where, ad[CheckKind.JVP][0], ad[CheckKind.VJP][0],
                  np.zeros(len(terms)), terms, ctx.rule_dtype, (), pr, None)
        if CheckKind.VJP in ad:
            _compare_alternatives(ctx, where, alt, first, i, j,
                                  ad[CheckKind.VJP][0][:ALTERNATIVE_PROBES],
                                  est[j].magnitude[:ALTERNATIVE_PROBES, r])
    return None


def _reduced(ctx: _Ctx, kind: CheckKind, source: dict[tuple[int, int], Any], pr: _Probes
             ) -> dict[tuple[int, int], Any]:
    """(output i, input j) -> the compared scalars and magnitudes of ``kind``'s AD results
    (or the adapter's exception), for every pair."""
    return {(i, j): _ad_scalars(kind, source, pr, i, j)
            for i in ctx.float_outs for j in ctx.diff}


def _per_probe(one: fd.ProjectedEstimate, P: int, R: int) -> fd.ProjectedEstimate:
    """The estimate along one direction projected on ``P R`` cotangents, as ``P`` probes
    (``(P, R)`` scalars, ``(P, K, R)`` table) that share the direction."""
    K = one.steps.shape[1]

    def pr(a: np.ndarray) -> np.ndarray:
        return a.reshape(P, R)

    return replace(one, value=pr(one.value), error=pr(one.error), magnitude=pr(one.magnitude),
                   jump=pr(one.jump), jump_bound=pr(one.jump_bound),
                   steps=np.broadcast_to(one.steps, (P, K)),
                   table=one.table.reshape(K, P, R).transpose(1, 0, 2),
                   directions=np.broadcast_to(one.directions, (P,) + one.directions.shape[1:]))


def _judge(ctx: _Ctx, kind: CheckKind, i: int, j: int, r: int, e: fd.ProjectedEstimate,
           s_ad: np.ndarray, terms: np.ndarray) -> dict[str, Any] | str:
    """The result of one (kind, output, input) comparison, or why the screen cannot pass it."""
    s_fd, e_fd = e.value[:, r], e.error[:, r]
    what = f"{kind.value.upper()} of output {i} w.r.t. input {j}"
    for p in range(len(s_ad)):
        if not e_fd[p] <= SCREEN_FLOOR * terms[p]:
            return (f"{what}, probe {p}: the screen's FD error estimate {e_fd[p]:.3g} is above "
                    f"{SCREEN_FLOOR:g} x terms {terms[p]:.3g}")
    ratios, allows = _probe_ratios(ctx, s_ad, s_fd, e_fd, terms, "float64")
    # resolution before verdict, as the full check judges it (the floor above implies it)
    model = [tolerance.model_allowance(float(e_fd[p]), float(terms[p]), "float64").allowed
             for p in range(len(s_ad))]
    for p in range(len(s_ad)):
        if not tolerance.resolved(model[p], float(terms[p])):
            return (f"{what}, probe {p}: allowed error {model[p]:.3g} not resolved against "
                    f"terms {terms[p]:.3g}")
    resolution = max(m / float(t) if t > 0 else 0.0 for m, t in zip(model, terms, strict=True))
    for p, ratio in enumerate(ratios):
        if not (ratio <= 1.0 and np.isfinite(s_ad[p])):
            return (f"{what}, probe {p}: {float(s_ad[p]):.10g} vs FD {float(s_fd[p]):.10g}, "
                    f"ratio {ratio:.3g}")
    p = int(np.argmax(ratios))
    key, text = label(ctx)
    disc = abs(float(s_ad[p]) - float(s_fd[p]))
    rel = disc / abs(float(s_fd[p])) if s_fd[p] != 0 else (0.0 if disc == 0 else np.inf)
    return {
        "kind": kind.value, "status": Status.PASSED, "output_index": i, "input_index": j,
        "expected": float(s_fd[p]), "actual": float(s_ad[p]), "discrepancy": disc,
        "relative_discrepancy": float(rel), "allowed": allows[p].allowed,
        "allowed_source": f"{allows[p].source} ({text})",
        "discrepancy_ratio": float(ratios[p]),
        "convergence": tuple((float(h), float(c))
                             for h, c in zip(e.steps[p], e.table[p, :, r], strict=True)),
        "details": {"probe": p, "probes": len(s_ad), key: "passed", "resolution": resolution,
                    "fd_evaluations": e.evaluations},
    }
