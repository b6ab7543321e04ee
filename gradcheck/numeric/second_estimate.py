"""The oracle's second estimate: before a check abstains or fails, estimate again with every
step ``2^-8`` times smaller (``docs/error-model.md`` section 2).

Differentiability and the derivative at ``x`` are local, and the table's steps are not:

* the large steps can cross a jump or a non-smooth point near ``x``, so the table sees a
  staircase's average slope (``fmod``, ``round(x, 3)``);
* they can see a kink that is only near ``x`` (a max-like ``logsumexp`` at 1e4).

Smaller steps along the same directions see the function at ``x``.  They are not trusted on
their own either, since at ``logsumexp`` at 3e4 they are still too coarse.  So the second
estimate can only vindicate the backend:

* a check becomes a pass when every AD value agrees with it and it is sharp (its error within
  1e-8 of the terms compared, :func:`sharp`): a wide estimate agrees with a wrong rule as readily;
* a failure becomes an abstention when the two estimates contradict each other on some
  output element beyond both error estimates (so the first's error model does not hold at
  ``x``) and the second is too coarse to judge with but consistent with the AD values
  (``round(x, 3)``: the large steps see the staircase's mean slope with an error estimate
  of 1e-13 where the small steps see 0);
* otherwise the first verdict stands, a failure or an abstention.

A wrong rule can therefore only be passed if it matches a wrong second estimate, and an
abstention never becomes a failure.  Where neither estimate vindicates the backend, the
scaled estimate (:mod:`._scaled_estimate`: directions scaled per element) may, on the same
terms; where it cannot judge either and the steps the failure rests on cross an element's
scale, a failure of finite AD values is an abstention.  On a smooth function the two
estimates agree within their errors, and a wrong rule is failed with that confirmation.  The
second estimate costs nothing on checks that pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from gradcheck.backends.guarded import AdapterFailed
from gradcheck.numeric import scaled_estimate
from gradcheck.numeric.context import Prepared
from gradcheck.numeric.judge import AllowanceModel, Comparison, probe_ratios
from gradcheck.numeric.probes import Probes, batch_fn, f0
from gradcheck.numeric.scalars import AdScalars, FdSide, fd_side
from gradcheck.numeric.stages import ReverseSamples
from gradcheck.oracle import error_model, fd
from gradcheck.oracle.scaled import crossing


@dataclass(frozen=True)
class Judged:
    """The estimate to judge with (None: abstain), its side of the comparison and a note for
    the result's ``details["oracle"]`` (on an abstention: why, empty where the first estimate's
    kink or non-finite value is the reason)."""

    estimate: fd.FDEstimate | None
    side: FdSide | None
    note: str
    probes: Probes | None = None  # the probes the estimate goes with (None: the run's own)
    got: AdScalars | None = None  # the AD scalars along those probes (None: the run's own)
    earlier: FdSide | None = None  # with other probes: the run's own probes' side, if any
    # an abstention where steps crossed elements' scales: the verdict that stands for a kind
    # whose AD value agrees with its estimate (another kind disagreed) or is not finite (it
    # fails against any finite estimate)
    stands: Judged | None = None


@dataclass
class SecondEstimates:
    """The second estimates of one run, computed at most once per input (``None``: it could
    not be had)."""

    by_input: dict[int, fd.FDEstimate | None] = field(default_factory=dict)
    reverse: ReverseSamples = field(default_factory=dict)  # the run's VJPs (scaled estimate)
    scaled_by_input: dict[int, scaled_estimate.Scaled | scaled_estimate.Declined] = \
        field(default_factory=dict)
    # per input and estimate a failure rests on (the first or the second): the elements its
    # steps cross, and the estimate without them
    crossings: dict[tuple[int, int], tuple[np.ndarray, float | None]] = \
        field(default_factory=dict)
    uncrossed_by: dict[tuple[int, int], scaled_estimate.Scaled | scaled_estimate.Declined] = \
        field(default_factory=dict)

    def revisit(self, prep: Prepared, pr: Probes, i: int, j: int, sl: slice,
                fde: fd.FDEstimate, got: AdScalars) -> Judged:
        """How output ``i`` / input ``j`` is judged (module docstring); ``got``: the AD
        scalars and magnitudes per check kind.  Where neither the first estimate nor the
        second vindicates the backend, the scaled estimate (:mod:`._scaled_estimate`) may."""
        judged, settled = self._smaller_steps(prep, pr, i, j, sl, fde, got)
        if settled or not got:
            return judged
        confirmed = self._confirmed_uncrossed(prep, pr, i, j, sl, fde, got, judged)
        if confirmed is not None:
            return confirmed
        scaled, why, refuted = self._scaled(prep, pr, i, j, sl, got)
        if scaled is not None:
            return replace(scaled, earlier=judged.side)
        if judged.estimate is not None and judged.side is not None and not refuted:
            rests_on = self._rests_on(j, fde, sl)
            key, mask, smallest = self._crossing(prep, j, rests_on)
            if smallest is not None:
                confined, where = self._uncrossed(prep, pr, i, j, sl, got, rests_on, mask, key)
                why = f"{why}; {where}"
                stands = replace(judged, note=(f"{judged.note}; " if judged.note else "") +
                                 f"along directions scaled per element: {why}")
                if not confined:  # the elements the steps do not cross disagree too
                    return stands
                return Judged(None, None, _crossed_note(judged, rests_on, smallest, got, why),
                              earlier=judged.side, stands=stands)
        if not judged.note:  # the first estimate's kink or non-finite value says why
            return judged
        return replace(judged, note=f"{judged.note}; along directions scaled per element: "
                                    f"{why}")

    def _crossing(self, prep: Prepared, j: int, rests_on: fd.FDEstimate
                  ) -> tuple[tuple[int, int], np.ndarray, float | None]:
        """The key of input ``j``'s estimate ``rests_on`` in :attr:`crossings`, and the
        elements its steps cross with the smallest such step (:func:`crossing`, once)."""
        key = (j, id(rests_on))
        if key not in self.crossings:
            self.crossings[key] = crossing(prep.args64[j], rests_on)
        mask, smallest = self.crossings[key]
        return key, mask, smallest

    def _confirmed_uncrossed(self, prep: Prepared, pr: Probes, i: int, j: int, sl: slice,
                             fde: fd.FDEstimate, got: AdScalars, judged: Judged
                             ) -> Judged | None:
        """The failure, confirmed before any scaled estimate is made, where the steps it
        rests on cross some elements' scales and the estimate without those elements (an
        ordinary table whose steps cross nothing, :meth:`_uncrossed`) is sharp and refutes
        the AD values; else ``None`` (the scaled estimate is tried, as before).  The scaled
        estimate can only vindicate, and where a sharp estimate that crosses no element
        refutes the rule, a vindication along other directions would contradict it: this
        saves the failing path the scaled estimate's groups (about ten times the work of one
        estimate: ``docs/cost-model.md``)."""
        if judged.estimate is None or judged.side is None:
            return None
        rests_on = self._rests_on(j, fde, sl)
        key, mask, smallest = self._crossing(prep, j, rests_on)
        if smallest is None:
            return None
        confined, where = self._uncrossed(prep, pr, i, j, sl, got, rests_on, mask, key)
        if confined:
            return None
        return replace(judged, note=(f"{judged.note}; " if judged.note else "") + where)

    def _uncrossed(self, prep: Prepared, pr: Probes, i: int, j: int, sl: slice,
                   got: AdScalars, rests_on: fd.FDEstimate, mask: np.ndarray,
                   key: tuple[int, int]) -> tuple[bool, str]:
        """Whether a disagreement may lie only in the elements the steps of ``rests_on``
        cross (``mask``): ``False`` where the estimate along the other elements
        (:func:`._scaled_estimate.uncrossed`) is sharp and an AD value disagrees with it; and
        what that estimate gave."""
        if key not in self.uncrossed_by:
            self.uncrossed_by[key] = scaled_estimate.uncrossed(prep, pr, j, rests_on, mask)
        un = self.uncrossed_by[key]
        if isinstance(un, scaled_estimate.Declined):
            return True, f"without the crossed elements: not estimated ({un.reason})"
        got2 = un.ad(prep, self.reverse, i, j, list(got))
        if got2 is None:
            return True, "without the crossed elements: the backend's JVP failed"
        if not decidable(un.estimate, sl):
            return True, "without the crossed elements: a kink or a non-finite value"
        side2 = fd_side(un.estimate, un.probes, i, sl, got2)
        what = (f"without the crossed elements, the steps {_step_range(un.estimate)} give "
                f"{_fmt(side2.values)} (error {_fmt(side2.errors)})")
        if not sharp(side2):
            return True, f"{what}, too coarse to judge with"
        ad2 = {kind: vals[0] for kind, vals in got2.items()}
        if agrees(prep, ad2, side2):
            return True, f"{what}, and the AD values there, {_fmt(next(iter(ad2.values())))}, " \
                         "agree"
        return False, f"{what}, and the AD values there, " \
                      f"{_fmt(next(iter(ad2.values())))}, disagree with it too: confirmed " \
                      "where the steps cross no element"

    def _rests_on(self, j: int, fde: fd.FDEstimate, sl: slice) -> fd.FDEstimate:
        """The estimate a failure rests on: the second where it was had and is decidable,
        else the first."""
        small = self.by_input.get(j)
        return small if small is not None and decidable(small, sl) else fde

    def _scaled(self, prep: Prepared, pr: Probes, i: int, j: int, sl: slice, got: AdScalars
                ) -> tuple[Judged | None, str, bool]:
        """The judgement by the scaled estimate where it vindicates the backend, else
        ``None``, what it gave, and whether it refutes the AD values (sharp, and they
        disagree with it)."""
        if j not in self.scaled_by_input:
            self.scaled_by_input[j] = scaled_estimate.estimate(prep, pr, j)
        sc = self.scaled_by_input[j]
        if isinstance(sc, scaled_estimate.Declined):
            return None, f"not estimated ({sc.reason})", False
        where = f"{sc.groups} group(s) of scales"
        if sc.width > scaled_estimate.GROUP_BINADES:
            where += f" of up to {sc.width} binades"
        got2 = sc.ad(prep, self.reverse, i, j, list(got))
        if got2 is None:
            return None, f"{where}, the backend's JVP along them failed", False
        est = _per_group(sc, i, sl, got2)
        if not decidable(est, sl):
            return None, f"{where}, a kink or a non-finite value along them", False
        side2 = fd_side(est, sc.probes, i, sl, got2)
        ad2 = {kind: vals[0] for kind, vals in got2.items()}
        what = f"{where}, steps {_all_steps(est)}, give {_fmt(side2.values)} (error " \
               f"{_fmt(side2.errors)})"
        if not sharp(side2, scaled_estimate.SHARP):
            return None, (f"{what}, an estimate too coarse to judge with (error up to "
                          f"{_worst(side2):.2g} of the terms)"), False
        # a sharp estimate that one AD path agrees with is corroborated: every kind is judged
        # with it (a JVP right at a pole of 3e-300 passes, the VJP that gives inf there fails)
        agreeing = [kind for kind in ad2 if agrees(prep, {kind: ad2[kind]}, side2)]
        if not agreeing:
            return None, f"{what}, and the AD values disagree with it too", True
        others = [kind for kind in ad2 if kind not in agreeing]
        also = (f" ({', '.join(str(getattr(k, 'value', k)) for k in agreeing)}; "
                f"{', '.join(str(getattr(k, 'value', k)) for k in others)} disagree)"
                if others else "")
        return Judged(est, side2, (
            "the steps of the first estimates are one size for every element; "
            f"along directions scaled per element ({what}) the AD values "
            f"{_fmt(ad2[agreeing[0]])} agree{also}: judged with those"),
            probes=sc.probes, got=got2), "", False

    def _smaller_steps(self, prep: Prepared, pr: Probes, i: int, j: int, sl: slice,
                       fde: fd.FDEstimate, got: AdScalars) -> tuple[Judged, bool]:
        """The judgement by the first and the second estimate, and whether it settles the
        check (the backend vindicated)."""
        ad = {kind: vals[0] for kind, vals in got.items()}
        if not decidable(fde, sl):
            small = self.second(prep, j, fde)
            if small is None or not decidable(small, sl) or not ad:
                return Judged(None, None, ""), False
            side2 = fd_side(small, pr, i, sl, got)
            if not sharp(side2) or not agrees(prep, ad, side2):
                return Judged(None, None, ""), False
            return Judged(small, side2, (
                f"the steps {_step_range(fde)} saw a kink or a non-finite value; the steps "
                f"{_step_range(small)} do not, and the AD values agree with them: judged with "
                "those")), True
        side = fd_side(fde, pr, i, sl, got)
        if agrees(prep, ad, side):
            return Judged(fde, side, ""), True
        small = self.second(prep, j, fde)
        if small is None or not decidable(small, sl):
            return Judged(fde, side, ""), False
        side2 = fd_side(small, pr, i, sl, got)
        s_fd, e_fd, terms = side.values, side.errors, side.terms
        s2, e2, terms2 = side2.values, side2.errors, side2.terms
        second = f"the steps {_step_range(small)} give {_fmt(s2)} (error {_fmt(e2)})"
        model = prep.cfg.error_model
        broken = contradicted(fde, small, sl, model)
        if not broken and np.all(model.estimates_agree(s_fd, e_fd, s2, e2, terms + terms2)):
            return Judged(fde, side, f"confirmed: {second}"), False
        if sharp(side2) and agrees(prep, ad, side2):
            return Judged(small, side2, (
                f"the steps {_step_range(fde)} gave {_fmt(s_fd)} (error {_fmt(e_fd)}); "
                f"{second}, which the AD values agree with: the large steps crossed a jump or "
                "a non-smooth point; judged with the small ones")), True
        if broken and agrees(prep, ad, side2):
            return Judged(None, None, (
                f"inconclusive: the steps {_step_range(fde)} and {_step_range(small)} "
                f"contradict each other on {broken} output element(s) beyond both error "
                "estimates, so f is not smooth on the scale of the steps (a jump or non-smooth "
                f"point nearby) and the large steps' {_fmt(s_fd)} (error {_fmt(e_fd)}) cannot "
                f"be trusted; {second}, too coarse to judge with (a wrong rule would agree "
                "with it as readily)")), False
        if not sharp(side2):
            return Judged(fde, side, f"not confirmed: {second}, an estimate too coarse to "
                                     "judge with"), False
        return Judged(fde, side, f"not confirmed: {second}, and the AD values disagree with "
                                 "it too"), False

    def second(self, prep: Prepared, j: int, fde: fd.FDEstimate) -> fd.FDEstimate | None:
        """The estimate along the same directions with every step ``2^-8`` times smaller, no
        retries, the first estimate's measured noise reused (measured again with fewer
        halvings, the noise points would sit at the table's own scale, where a kink looks like
        noise); once per input; ``None`` if it cannot be had.  The directions were rounded for
        these steps already (the retries' halvings), so the AD side's projections stay
        valid."""
        if j not in self.by_input:
            small: fd.FDEstimate | None = None
            try:
                est = fd.directional_derivatives_split(
                    batch_fn(prep, j), prep.args64[j].ravel(), fde.directions,
                    h0=fde.steps[:, 0] * prep.cfg.error_model.second_shrink, retries=0,
                    f0=f0(prep), noise=fde.noise)
                if np.array_equal(est.directions, fde.directions):
                    small = est
            except AdapterFailed:  # the first estimate stands; its own verdict is reported
                small = None
            self.by_input[j] = small
        return self.by_input[j]


def _per_group(sc: scaled_estimate.Scaled, i: int, sl: slice, got: AdScalars
               ) -> fd.FDEstimate:
    """Per group of the scaled estimate, its own steps' rows where they are decidable and
    sharp on the output slice ``sl``, else the extended ladder's (chosen by the estimates'
    own quality, not by agreement with the AD values)."""
    if sc.extended is None:
        return sc.estimate
    own = fd_side(sc.estimate, sc.probes, i, sl, got)
    parts = []
    for g in range(sc.groups):
        r = sc.rows(g)
        mine = fd.rows_of(sc.estimate, r)
        rows = FdSide(own.values[r], own.errors[r], own.magnitudes[r], own.terms[r])
        ok = decidable(mine, sl) and sharp(rows, scaled_estimate.SHARP)
        parts.append(mine if ok else fd.rows_of(sc.extended, r))
    return fd.stack(parts)


def _crossed_note(judged: Judged, rests_on: fd.FDEstimate, smallest: float, got: AdScalars,
                  why: str) -> str:
    """Why a disagreement with the first estimates is an abstention where the steps it rests
    on (``rests_on``) cross elements' scales and the scaled estimate cannot judge."""
    assert judged.side is not None
    ad = "; ".join(f"{kind.value.upper()} {_fmt(vals[0])}" for kind, vals in got.items())
    return (f"inconclusive: the AD values ({ad}) disagree with the first estimates, "
            f"{_fmt(judged.side.values)} (error {_fmt(judged.side.errors)}), but the steps "
            f"that disagreement rests on, {_step_range(rests_on)}, move elements by more than "
            f"their own size (the smallest such element is {smallest:.3g}): across an element "
            "a step estimates a secant, not the derivative at x, and the error estimate does "
            "not bound the difference, so they cannot refute the rule; along directions scaled "
            f"per element: {why}" + ("" if judged.note == "" else f" (before: {judged.note})"))


def contradicted(first: fd.FDEstimate, second: fd.FDEstimate, sl: slice,
                 model: error_model.ErrorModel = error_model.DEFAULT_MODEL) -> int:
    """How many elements (probe x output element on ``sl``) of the two estimates differ by
    more than the sum of their error estimates (with the rule check's safety factor): where
    one does, at least one error model does not hold at ``x``."""
    v1, e1 = first.value[:, sl], first.error[:, sl]
    v2, e2 = second.value[:, sl], second.error[:, sl]
    agree = model.estimates_agree(v1, e1, v2, e2, np.abs(v1) + np.abs(v2))
    return int(np.sum(~agree & np.isfinite(v1) & np.isfinite(v2)))


def decidable(fde: fd.FDEstimate, sl: slice) -> bool:
    """No kink and a finite estimate for every probe on the output slice ``sl``."""
    return not np.any(fde.kink[:, sl]) and bool(np.all(fde.finite[:, sl]))


def sharp(side: FdSide, rtol: float = fd.CONVERGED_RTOL) -> bool:
    """Whether the estimate ``side`` (:func:`~.numeric.scalars.fd_side`) is sharp: its error
    within 1e-8 of the compared scalar's absolute terms on every probe (the oracle's
    convergence criterion, ``fd.CONVERGED_RTOL``, at the scale of the comparison).  Only a
    sharp estimate may vindicate: an honest but wide error estimate agrees with a wrong rule as
    readily as with the right one (``logsumexp`` at 3e4, where the small steps are still too
    coarse).  ``rtol``: the criterion (the scaled estimate's is
    :data:`._scaled_estimate.SHARP`)."""
    return bool(np.all(side.errors <= rtol * side.terms))


def _worst(side: FdSide) -> float:
    """The largest error / terms over the probes."""
    with np.errstate(all="ignore"):
        r = np.where(side.terms > 0, side.errors / side.terms, np.inf)
    return float(np.max(r)) if r.size else 0.0


def agrees(prep: Prepared, ad: dict, side: FdSide) -> bool:
    """Whether every AD value of every probe is within the rule check's allowance of the
    estimate ``side`` (:func:`~.numeric.scalars.fd_side`), as :func:`~.numeric.judge.judge`
    judges it without the conditioning term, which only widens it."""
    model = AllowanceModel(prep.cfg.atol, prep.cfg.rtol, prep.cfg.error_model)
    return all(all(r <= 1.0 for r in probe_ratios(
        Comparison(kind, s_ad, side.values, side.errors, side.terms, prep.rule_dtype),
        model)[0]) for kind, s_ad in ad.items())


def _step_range(fde: fd.FDEstimate) -> str:
    steps = fde.steps[:, : fd.DEFAULT_LEVELS]
    return f"{float(np.min(steps)):.3g}..{float(np.max(steps)):.3g}"


def _all_steps(fde: fd.FDEstimate) -> str:
    return f"{float(np.nanmin(fde.steps)):.3g}..{float(np.nanmax(fde.steps)):.3g}"


def _fmt(a: np.ndarray) -> str:
    return ", ".join(f"{float(v):.10g}" for v in np.ravel(a))
