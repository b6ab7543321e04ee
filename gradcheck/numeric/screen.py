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
  (:func:`gradcheck.oracle.fd.projected_derivatives`): one Richardson table per compared scalar, 8
  evaluations in all instead of 20 per probe, no noise measurement, no retries, and one
  cheap kink test instead of two one-sided tables per output element;
* only the backend's primary reverse path is compared with finite differences; the default
  check runs the comparisons of two AD values beside it (eager vs functional, forward vs
  reverse: no finite differences), ``fast`` leaves them out.

It passes, or fails a disagreement clear enough to be confirmed by two more projected
estimates (:mod:`.projected_failure`, under ``fast`` as in the default check).  Where a few
output elements spoil its one table, its split (:mod:`.screen_split`) judges them apart.
Anything else it cannot vouch for goes to the full check, whose results are then the answer
(with ``details["screen"]``, ``details["fast_screen"]`` under ``fast``, saying why it ran):

* a disagreement beyond the error model's allowance that is not clear (a wrong gradient, or
  an estimate the screen got wrong: the full oracle decides which);
* an FD error estimate above ``screen_floor`` (:class:`~gradcheck.oracle.error_model.ErrorModel`)
  times the comparison's absolute terms ``sum |v||J||u|``: the screen's estimate did not
  converge well enough to see small errors;
* a suspected kink, a non-finite estimate, an adapter error.

The floor is what the screen can guarantee: when it passes, a relative error in
``<v, J u>`` larger than about ``10 * screen_floor * terms / |<v, J u>|`` would have failed it.
The full check's own FD error is typically another 10-100 times smaller, and it draws ``P``
independent tangents.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gradcheck.backends.guarded import AdapterFailed, AdapterFailure
from gradcheck.core.results import CheckKind, CheckResult, Status
from gradcheck.numeric import projected_failure, screen_split
from gradcheck.numeric.compare import compare_alternatives, emit_fwd_rev, model_of
from gradcheck.numeric.context import Finished, Prepared
from gradcheck.numeric.judge import Comparison, agreement_message, probe_ratios
from gradcheck.numeric.prepare import deterministic
from gradcheck.numeric.probes import (
    Probes,
    batch_fn,
    draw,
    f0,
    out_slices,
    projections,
    stacked,
)
from gradcheck.numeric.scalars import AdScalars, ad_scalars, terms
from gradcheck.numeric.stages import (
    AlternativeSamples,
    ForwardSamples,
    ReverseSamples,
    alternatives,
    forward,
    no_forward_mode,
    reverse_primal,
)
from gradcheck.oracle import fd


def applies(prep: Prepared) -> bool:
    """The screen covers float64 rule checks of engines with float64 (the rounding check of a
    lower dtype and the rule check of float32-only engines always run in full)."""
    return prep.dtype == "float64" and prep.rule_dtype == "float64" and prep.oracle is None


def label(prep: Prepared) -> tuple[str, str]:
    """The details key and the message label of the screen's results: ``fast_screen`` /
    "fast screen" under ``fast=True``, ``screen`` / "projected screen" in the default check."""
    return ("fast_screen", "fast screen") if prep.cfg.fast else ("screen", "projected screen")


@dataclass(frozen=True)
class _Staged:
    """One comparison the screen passed, to be recorded once the whole screen passed."""

    kind: CheckKind
    i: int
    j: int
    fields: dict[str, Any]
    message: str = ""  # a skipped comparison's reason; a pass's message is its verdict's


@dataclass(frozen=True)
class _Fails:
    """One comparison the screen failed on its ratio alone: why (the full check's reason to
    run) and what the projected failing path needs to confirm it."""

    reason: str
    failing: projected_failure.Failing


@dataclass(frozen=True)
class _Pair:
    i: int
    j: int
    r: int
    ad: AdScalars
    terms: np.ndarray  # the comparison's absolute terms per probe, as the full check counts them
    judged: list[_Staged]


class Troubled(str):
    """A reason to decline that lies in the screen's estimate alone (not finite, a suspected
    kink, an FD error above the floor, an allowance not resolved): the split
    (:mod:`.screen_split`) may resolve it.  ``probes``: the probes the screen drew (the split
    draws the same from the seed; handed over, they are not drawn twice), where known."""

    probes: Probes | None = None

    def drawn(self, pr: Probes) -> Troubled:
        """This reason, with the probes the screen drew."""
        out = Troubled(self)
        out.probes = pr
        return out


def screen(prep: Prepared, split: screen_split.Split | None = None
           ) -> str | Finished | None:
    """Run the screen; if every comparison passes, record the results and return ``None``,
    else record nothing and return why the full check must run; :class:`Finished` where the
    determinism check it completes (:attr:`Prepared.determinism_deferred`) found ``f``
    nondeterministic (its ``inconclusive`` result recorded: nothing else runs).

    In the default check (not ``fast``) the comparisons of two AD values run as well, with
    no finite differences: forward vs reverse and eager vs functional (their verdict, a pass
    or a failure, is recorded as in the full check; only the comparisons with the oracle
    decide whether the screen hands over).

    ``split``: the screen again on its probes split in groups of output elements, each group
    with its own estimate (:mod:`.screen_split`); it then only passes or declines."""
    slices = out_slices(prep)
    # P cotangents, one tangent per input (module docstring); the split's: P per group of
    # output elements, from the probes it drew
    pr = draw(prep, tangents=1) if split is None else split.cotangents(slices)
    drawn = pr
    f_0 = f0(prep)
    P = len(pr.v[prep.float_outs[0]])
    R = len(prep.float_outs)
    model = prep.cfg.error_model
    floors = (np.full(P, model.screen_floor) if split is None
              else np.repeat(split.floors, prep.cfg.probes))

    def per_group(each: list[Any]) -> list[Any]:  # one row per group -> one per probe
        return [each[q // prep.cfg.probes] for q in range(P)]

    # the projections: all P R of them on the one direction (every input)
    W = projections(prep, pr.v)
    est: dict[int, fd.ProjectedEstimate] = {}
    for j in prep.diff:
        try:
            # the split's evaluations, after the screen's own (2 K)
            one = (replace(_joined([_per_probe(e, prep.cfg.probes, R)
                                    for e in split.estimates[j]]),
                           evaluations=sum(e.evaluations for e in split.estimates[j])
                           + 2 * model.screen_levels)
                   if split is not None else _per_probe(fd.projected_derivatives(
                       batch_fn(prep, j), prep.args64[j].ravel(),
                       stacked([u.ravel() for u in pr.u[j]]), W, f0=f_0),
                       P, R))
        except AdapterFailed as exc:
            if not deterministic(prep, None):  # decided before the full check runs
                return Finished("nondeterministic")
            shown = exc.failure.exception or exc.failure.text
            return f"evaluating the function for finite differences raised: {shown!r:.200}"
        est[j] = one
        # one tangent per group (the split's groups each have their own: the joined
        # estimate's directions are one row per group, _joined)
        pr = pr.with_tangents(j, [d.reshape(prep.args64[j].shape) for d in
                                  (one.directions if split is not None
                                   else one.directions[:1])])
    if split is None:  # an estimate the split may mend: before any AD path is paid for
        for r, i in enumerate(prep.float_outs):
            for j in prep.diff:
                trouble = _troubled(prep, est[j], i, j, r)
                if trouble is not None:
                    return trouble.drawn(drawn)
    # each AD result is reduced to its compared scalars as soon as it arrives, and dropped: the
    # check never holds more than one reverse path's P gradients (a VJP comparison that its
    # ratio fails keeps them: the projected failing path reads them, not a second VJP call)
    scalars: dict[CheckKind, _Reduced] = {}
    kept: ReverseSamples | None = None
    if "fwd" in prep.cfg.modes and prep.backend.supports_jvp:
        # one JVP per input (J u), projected on every cotangent
        fwd: ForwardSamples = {j: (t if isinstance(t, AdapterFailure) else per_group(t))
                               for j, t in forward(prep, pr).items()}
        # the terms sum |v_p| |J u|, |v_p| made in one work array (not held)
        scalars[CheckKind.JVP] = _reduced(prep, CheckKind.JVP, {}, fwd, pr)
        del fwd
    # probe p is (v_p, u): the same array P times (per group)
    pr = Probes(pr.v, {j: per_group(pr.u[j]) for j in prep.diff})
    if "rev" in prep.cfg.modes:
        rev, again = reverse_primal(prep, pr)
        # the determinism check, deferred by preparation: the first evaluation at the point
        # against the forward pass the reverse path just differentiated (nothing recorded yet)
        if not deterministic(prep, again):
            return Finished("nondeterministic")
        del again
        scalars = {CheckKind.VJP: _reduced(prep, CheckKind.VJP, rev, {}, pr), **scalars}
        if projected_failure.applies(prep) and _over(prep, est, scalars):
            kept = rev
        del rev
    cross = not prep.cfg.fast
    # the eager-vs-functional comparison (two AD paths, no FD) on the first probe
    # (ErrorModel.alternative_probes, docs/error-model.md 2b): two AD paths judged at rounding
    # level, where one Gaussian probe misses a difference between them only with a
    # probability of the order of its allowance over the difference
    n_alt = prep.cfg.error_model.alternative_probes
    first = Probes({i: v[:n_alt] for i, v in pr.v.items()},
                   {j: u[:n_alt] for j, u in pr.u.items()})
    alt: AlternativeSamples = (alternatives(prep, first)
                               if cross and CheckKind.VJP in scalars else {})
    staged: list[_Pair] = []
    fails: list[_Fails] = []
    for r, i in enumerate(prep.float_outs):
        for j in prep.diff:
            e = est[j]
            trouble = _troubled(prep, e, i, j, r)
            if trouble is not None:
                return trouble
            ad: AdScalars = {}
            skipped: list[_Staged] = []
            for kind, table in scalars.items():
                vals = table[(i, j)]
                if isinstance(vals, AdapterFailure):
                    if not vals.unsupported:
                        return f"the backend's {kind.value.upper()} raised"
                    skipped.append(_Staged(kind, i, j, {"status": Status.SKIPPED},
                                           vals.reason))  # skipped, as in the full check
                else:
                    ad[kind] = vals
            if not ad:
                return f"{prep.output(i)} / {prep.input(j)}: no derivative to compare"
            t = terms(e.magnitude[:, r], ad)  # as the full check counts them
            judged = []
            for kind, (s_ad, _) in ad.items():
                verdict = _judge(prep, kind, i, j, r, e, s_ad, t, floors)
                if isinstance(verdict, Troubled):
                    return verdict.drawn(drawn)
                if isinstance(verdict, str):
                    return verdict
                if isinstance(verdict, _Fails):
                    fails.append(verdict)
                    continue
                judged.append(verdict)
            staged.append(_Pair(i, j, r, ad, t, skipped + judged))
    confirmed: list[projected_failure.Confirmed] = []
    if fails:  # a clear failure is confirmed by projected estimates, anything else escalates
        if not projected_failure.applies(prep):
            return fails[0].reason
        got = (projected_failure.confirm(prep, pr, W, est, [f.failing for f in fails],
                                         _per_probe, kept) if split is None
               else _confirm_settled(prep, pr, W, est, fails, split.settled_first, kept))
        if isinstance(got, str):
            return f"{fails[0].reason}; not confirmed by projected estimates: {got}"
        confirmed = got
    text = label(prep)[1]
    if split is not None:
        text = f"{text}, split"
        prep = prep.with_recorder(prep.recorder.with_details(
            {"screen_split": screen_split.note(split)}))
    if "fwd" in prep.cfg.modes and not prep.backend.supports_jvp:
        no_forward_mode(prep)
    for pair in staged:
        for c in pair.judged:
            _record(prep, c, text)
        for f in confirmed:
            if (f.failing.i, f.failing.j) == (pair.i, pair.j):
                projected_failure.record(prep, f, label(prep)[0])
        if not cross:
            continue
        where = {"output_index": pair.i, "input_index": pair.j}
        if CheckKind.VJP in pair.ad and CheckKind.JVP in pair.ad:
            emit_fwd_rev(prep, where, pr, pair.ad[CheckKind.JVP][0], pair.ad[CheckKind.VJP][0],
                         pair.terms)
        if CheckKind.VJP in pair.ad:
            compare_alternatives(prep, where, alt, first, pair.i, pair.j,
                                 pair.ad[CheckKind.VJP][0][:n_alt],
                                 est[pair.j].magnitude[:n_alt, pair.r])
    return None


# (output i, input j) -> the compared scalars and magnitudes, or the call's failure
_Reduced = dict[tuple[int, int], tuple[np.ndarray, np.ndarray] | AdapterFailure]


def _reduced(prep: Prepared, kind: CheckKind, rev: ReverseSamples, fwd: ForwardSamples,
             pr: Probes) -> _Reduced:
    """Every pair's compared scalars of ``kind``'s AD results (or the adapter's failure)."""
    return {(i, j): ad_scalars(kind, rev, fwd, pr, i, j, prep.diff.index(j))
            for i in prep.float_outs for j in prep.diff}


def _over(prep: Prepared, est: dict[int, fd.ProjectedEstimate],
          scalars: dict[CheckKind, _Reduced]) -> bool:
    """Some VJP comparison is over its allowance (or not finite), as :func:`_judge` will find
    it: its ratio alone, from the scalars in hand."""
    model = model_of(prep)
    for r, i in enumerate(prep.float_outs):
        for j in prep.diff:
            ad: AdScalars = {}
            for kind, table in scalars.items():
                got = table[(i, j)]
                if not isinstance(got, AdapterFailure):
                    ad[kind] = got
            if CheckKind.VJP not in ad:
                continue
            e = est[j]
            c = Comparison(CheckKind.VJP, ad[CheckKind.VJP][0], e.value[:, r], e.error[:, r],
                           terms(e.magnitude[:, r], ad), "float64")
            with np.errstate(all="ignore"):
                if not np.all(np.asarray(probe_ratios(c, model)[0]) <= 1.0):
                    return True
    return False


def _record(prep: Prepared, c: _Staged, text: str) -> CheckResult:
    fields = dict(c.fields)
    status = fields.pop("status", Status.PASSED)
    where = {"output_index": c.i, "input_index": c.j}
    if status is Status.SKIPPED:
        return prep.result(c.kind, status, **where, message=c.message)
    return prep.result(c.kind, status, **where, **fields,
                       message=lambda r: agreement_message(r, text))


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


def _confirm_settled(prep: Prepared, pr: Probes, W: np.ndarray,
                     est: dict[int, fd.ProjectedEstimate], fails: list[_Fails],
                     settled_first: bool, gradients: ReverseSamples | None = None
                     ) -> list[projected_failure.Confirmed] | str:
    """The split's failures confirmed as the screen's are (:mod:`.projected_failure`), on
    its first group alone: the elements settled at the screen's steps, along the screen's
    direction, its probes the first ``P`` (``gradients``: the screen's VJPs, every group's
    probes, where it kept them).  A disagreement in the other group (the elements
    below the screen's steps) is left to the full check."""
    P = prep.cfg.probes
    if not settled_first:
        return "every element is below the screen's steps (the full check judges it)"
    model = model_of(prep)
    failing = []
    for f in fails:
        g = f.failing
        e = est[g.j]
        c = Comparison(g.kind, g.ad[:P], e.value[:P, g.r], e.error[:P, g.r], g.terms[:P],
                       "float64")
        if not max(probe_ratios(c, model)[0]) > 1.0:
            return ("a disagreement among the elements below the screen's steps (the full "
                    "check judges it)")
        failing.append(replace(g, ad=g.ad[:P], terms=g.terms[:P]))
    first = Probes({i: v[:P] for i, v in pr.v.items()}, {j: u[:P] for j, u in pr.u.items()})
    R = len(prep.float_outs)
    return projected_failure.confirm(prep, first, W[:, :P * R],
                                     {j: _first_probes(e, P) for j, e in est.items()},
                                     failing, _per_probe, gradients)


def _first_probes(e: fd.ProjectedEstimate, P: int) -> fd.ProjectedEstimate:
    return replace(e, value=e.value[:P], error=e.error[:P], magnitude=e.magnitude[:P],
                   jump=e.jump[:P], jump_bound=e.jump_bound[:P], steps=e.steps[:P],
                   table=e.table[:P], directions=e.directions[:P])


def _troubled(prep: Prepared, e: fd.ProjectedEstimate, i: int, j: int, r: int
              ) -> Troubled | None:
    """Why output ``i`` / input ``j``'s estimate cannot be judged (not finite, a suspected
    kink), or None."""
    if not np.all(e.finite[:, r]):
        return Troubled(f"{prep.output(i)} / {prep.input(j)}: the FD estimate is not finite")
    if np.any(e.kink[:, r]):
        return Troubled(f"{prep.output(i)} / {prep.input(j)}: one-sided derivatives differ "
                        "(possible kink)")
    return None


def _joined(parts: list[fd.ProjectedEstimate]) -> fd.ProjectedEstimate:
    """The per-probe estimates of the split's groups as one, group after group; its
    directions one row per group (a group's probes share its direction: not one copy of the
    input per probe)."""
    if len(parts) == 1:
        return replace(parts[0], directions=parts[0].directions[:1])
    K = max(e.steps.shape[1] for e in parts)

    def cat(name: str) -> np.ndarray:
        arrays = [getattr(e, name) for e in parts]
        if name in ("steps", "table"):  # a group without a table: no steps shown (NaN)
            arrays = [np.concatenate([a, np.full((a.shape[0], K - a.shape[1]) + a.shape[2:],
                                                 np.nan)], axis=1) for a in arrays]
        return np.concatenate(arrays)

    return fd.ProjectedEstimate(cat("value"), cat("error"), cat("magnitude"), cat("jump"),
                                cat("jump_bound"), cat("steps"), cat("table"),
                                np.concatenate([e.directions[:1] for e in parts]),
                                sum(e.evaluations for e in parts))


def _judge(prep: Prepared, kind: CheckKind, i: int, j: int, r: int, e: fd.ProjectedEstimate,
           s_ad: np.ndarray, t: np.ndarray, floors: np.ndarray) -> _Staged | _Fails | str:
    """The result of one (kind, output, input) comparison, or why the screen cannot pass it
    (:class:`_Fails` where only its ratio does: :mod:`.projected_failure` may confirm it);
    ``floors``: per probe, the floor of its FD error against its terms."""
    s_fd, e_fd = e.value[:, r], e.error[:, r]
    what = f"{kind.value.upper()} of {prep.output(i)} w.r.t. {prep.input(j)}"
    for p in range(len(s_ad)):
        if not e_fd[p] <= floors[p] * t[p]:
            return Troubled(f"{what}, probe {p}: the screen's FD error estimate {e_fd[p]:.3g} "
                            f"is above {floors[p]:g} x terms {t[p]:.3g}")
    model = model_of(prep)
    ratios, allows = probe_ratios(Comparison(kind, s_ad, s_fd, e_fd, t, "float64"), model)
    # resolution before verdict, as the full check judges it (the floor above implies it)
    models = [model.modelled(float(e_fd[p]), float(t[p]), "float64") for p in range(len(s_ad))]
    for p in range(len(s_ad)):
        if not model.resolved(models[p], float(t[p])):
            return Troubled(f"{what}, probe {p}: allowed error {models[p]:.3g} not resolved "
                            f"against terms {t[p]:.3g}")
    resolution = max(m / float(x) if x > 0 else 0.0 for m, x in zip(models, t, strict=True))
    for p, ratio in enumerate(ratios):
        if not (ratio <= 1.0 and np.isfinite(s_ad[p])):
            why = (f"{what}, probe {p}: {float(s_ad[p]):.10g} vs FD {float(s_fd[p]):.10g}, "
                   f"ratio {ratio:.3g}")
            if not np.all(np.isfinite(s_ad)):
                return why
            return _Fails(why, projected_failure.Failing(kind, i, j, r, s_ad, t))
    p = int(np.argmax(ratios))
    key, text = label(prep)
    disc = abs(float(s_ad[p]) - float(s_fd[p]))
    rel = disc / abs(float(s_fd[p])) if s_fd[p] != 0 else (0.0 if disc == 0 else np.inf)
    return _Staged(kind, i, j, {
        "expected": float(s_fd[p]), "actual": float(s_ad[p]), "discrepancy": disc,
        "relative_discrepancy": float(rel), "allowed": allows[p].allowed,
        "allowed_source": f"{allows[p].source} ({text})",
        "discrepancy_ratio": float(ratios[p]),
        "convergence": tuple((float(h), float(c))
                             for h, c in zip(e.steps[p], e.table[p, :, r], strict=True)
                             if np.isfinite(h)),
        "probe": p, "probes": len(s_ad),
        "details": {key: "passed", "resolution": resolution, "fd_evaluations": e.evaluations},
    })
