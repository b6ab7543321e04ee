"""The first-order comparisons of one (output, input) pair, from the stages' samples to the
recorded results: against the oracle (VJP, JVP, after the second estimate where the first
cannot decide), forward vs reverse, eager vs functional, and the low-precision rounding
check.  Each comparison is a :class:`~.judge.Comparison` judged by :func:`~.judge.judge`;
:func:`emit` records its verdict once, localized where it failed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck.backends.guarded import AdapterFailure, attempt
from gradcheck.backends.kernels import KernelTrace
from gradcheck.core.results import CheckKind, CheckResult, Status, shown
from gradcheck.numeric import (
    path_noise,
    rounding,
    second_estimate,
)
from gradcheck.numeric.context import Prepared
from gradcheck.numeric.judge import (
    AllowanceModel,
    Comparison,
    Verdict,
    agreement_message,
    judge,
    rounding_level_note,
    unresolved_message,
)
from gradcheck.numeric.localize import Localization, localize
from gradcheck.numeric.probes import Probes, cotangents
from gradcheck.numeric.scalars import (
    AdScalars,
    FdSide,
    ad_scalars,
    convergence,
    probe_norms,
    reverse_scalars,
    rounding_floors,
    rule_conditioning,
    terms,
)
from gradcheck.numeric.stages import (
    AlternativeSamples,
    Estimates,
    ForwardSamples,
    ReverseSamples,
    RoundingSamples,
)
from gradcheck.oracle import error_model, fd


@dataclass(frozen=True)
class Samples:
    """Everything the first-order stages produced for one run."""

    probes: Probes
    estimates: Estimates
    reverse: ReverseSamples
    forward: ForwardSamples
    alternatives: AlternativeSamples
    rounding: RoundingSamples | None
    second: second_estimate.SecondEstimates


def model_of(prep: Prepared) -> AllowanceModel:
    """The run's allowances: its error model, or its explicit atol/rtol."""
    return AllowanceModel(prep.cfg.atol, prep.cfg.rtol, prep.cfg.error_model)


def compared_kinds(prep: Prepared) -> list[CheckKind]:
    kinds = []
    if "rev" in prep.cfg.modes:
        kinds.append(CheckKind.VJP)
    if "fwd" in prep.cfg.modes and prep.backend.supports_jvp:
        kinds.append(CheckKind.JVP)
    return kinds


def compare_pair(prep: Prepared, s: Samples, i: int, j: int, sl: slice) -> None:
    """Every first-order comparison of output ``i`` / input ``j`` (``sl``: its slice)."""
    pr = s.probes
    kinds = compared_kinds(prep)
    where = {"output_index": i, "input_index": j}
    fde = s.estimates[j]
    if isinstance(fde, AdapterFailure):
        for k in kinds:
            prep.result(k, Status.ERROR, **where,
                        message=f"evaluating the function for finite differences raised: "
                                f"{fde.text}")
        return
    got: AdScalars = {}
    position = prep.diff.index(j)
    for kind in kinds:
        vals = ad_scalars(kind, s.reverse, s.forward, pr, i, j, position)
        if isinstance(vals, AdapterFailure):
            if vals.unsupported:
                prep.result(kind, Status.SKIPPED, **where, message=vals.reason)
            else:
                prep.result(kind, Status.ERROR, **where,
                            message=f"the backend's {kind.value.upper()} raised: {vals.text}")
        else:
            got[kind] = vals
    ad = {kind: vals[0] for kind, vals in got.items()}
    # before abstaining or blaming the backend, the oracle estimates again with smaller steps
    first = fde
    judged = s.second.revisit(prep, pr, i, j, sl, fde, got)
    if judged.estimate is None:  # a kink or no finite estimate at every step size tried,
        # estimates at two step ranges that contradict each other, or steps that cross
        # elements' scales where no scaled estimate judges (then `earlier` is their side,
        # and `stands` the verdict for a kind that agrees with it or is not finite)
        for k in got:
            if judged.stands is not None and judged.stands.side is not None and (
                    not np.all(np.isfinite(ad[k]))
                    or second_estimate.agrees(prep, {k: ad[k]}, judged.stands.side)):
                # a kind the estimate can judge on its own: it agrees (another kind's
                # disagreement made the abstention), or its value is not finite
                _emit_rules(prep, pr, i, sl, where, judged.stands, {k: ad[k]})
            else:
                prep.result(k, Status.INCONCLUSIVE, **where,
                            message=judged.note or kink_message(first, sl))
        if judged.earlier is not None:
            _ad_vs_ad(prep, s, i, j, where, ad, got, judged.earlier)
        return
    fde, side = judged.estimate, judged.side
    assert side is not None
    # the scaled estimate comes with its own probes and AD scalars (its directions)
    pj = judged.probes or pr
    adj = ad if judged.got is None else {kind: vals[0] for kind, vals in judged.got.items()}
    _emit_rules(prep, pr, i, sl, where, judged, adj)
    # the comparisons of two AD values along the run's own probes, their terms sized by the
    # side of those probes (where the scaled estimate judged: the earlier estimates' side, or
    # without one the AD magnitudes alone)
    _ad_vs_ad(prep, s, i, j, where, ad, got, side if judged.got is None else judged.earlier)
    if CheckKind.VJP in ad and s.rounding is not None and prep.rule_dtype == "float64":
        compare_low(prep, where, s.rounding[i], pj, fde, sl)


def _emit_rules(prep: Prepared, pr: Probes, i: int, sl: slice, where: dict[str, int],
                judged: second_estimate.Judged, ad: dict[CheckKind, np.ndarray]) -> None:
    """The AD values ``ad`` per kind against the estimate ``judged`` settled on."""
    fde, side = judged.estimate, judged.side
    assert fde is not None and side is not None
    pj = judged.probes or pr
    conv = [convergence(fde, p, pj.v[i][p].ravel(), sl) for p in range(len(pj.v[i]))]
    for kind, s_ad in ad.items():
        c = Comparison(kind, s_ad, side.values, side.errors, side.terms, prep.rule_dtype,
                       conditioning=rule_conditioning(prep, pj, i, fde, sl),
                       floors=rounding_floors(prep, pj, i, fde, len(s_ad)))
        emit(prep, c, where, pj, conv, oracle_note=judged.note, estimate=fde)


def _ad_vs_ad(prep: Prepared, s: Samples, i: int, j: int, where: dict[str, int],
              ad: dict[CheckKind, np.ndarray], got: AdScalars, own: FdSide | None) -> None:
    """Forward vs reverse and eager vs functional along the run's own probes, their terms
    sized by ``own`` (the side of those probes; without one, the AD magnitudes alone)."""
    pr = s.probes
    if CheckKind.VJP in ad and CheckKind.JVP in ad:
        emit_fwd_rev(prep, where, pr, ad[CheckKind.JVP], ad[CheckKind.VJP],
                     own.terms if own is not None else terms(np.zeros(len(pr.v[i])), got))
    if CheckKind.VJP in ad:
        mags = own.magnitudes if own is not None else got[CheckKind.VJP][1]
        compare_alternatives(prep, where, s.alternatives, pr, i, j, ad[CheckKind.VJP], mags)


def emit_fwd_rev(prep: Prepared, where: dict[str, int], pr: Probes, jvp: np.ndarray,
                 vjp: np.ndarray, terms: np.ndarray, label: str = "") -> None:
    """Forward vs reverse: two AD values, the rounding bound (in the function's working
    dtype where it computes below float64 inside: :func:`_working_precision_extra`)."""
    c = Comparison(CheckKind.FWD_REV, jvp, vjp, np.zeros_like(terms), terms, prep.rule_dtype,
                   measured=_working_precision_extra(prep, where, pr, jvp, vjp, terms),
                   floors=np.zeros(len(jvp)), label=label)
    emit(prep, c, where, pr, ())


def _working_precision_extra(prep: Prepared, where: dict[str, int], pr: Probes,
                             jvp: np.ndarray, vjp: np.ndarray, terms: np.ndarray
                             ) -> np.ndarray | None:
    """What rounding explains beyond the final-terms bound for a function whose reverse path
    runs kernels below float64 inside (:func:`_working_dtype`: ``f(x.float()).double()``,
    mixed precision): the rounding bound of the final terms in that dtype (both modes round
    their tangents and cotangents there).  Only where the final-terms bound is exceeded by
    finite values and the error model (not an explicit tolerance) judges.  A float64
    function gets no credit: forward and reverse mode of a rule that cancels (jax's ``sinc'``
    near 0) still disagree at float64's resolution."""
    if model_of(prep).explicit or prep.rule_dtype != "float64":
        return None
    model = prep.cfg.error_model
    with np.errstate(all="ignore"):
        if (not (np.all(np.isfinite(jvp)) and np.all(np.isfinite(vjp)))
                or np.all(np.abs(jvp - vjp) <= model.rounding(terms))):
            return None
    i = where["output_index"]
    low = _working_dtype(prep, cotangents(prep, i, pr.v[i][0], np.float64))
    if low is None:
        return None
    return np.asarray(model.rounding(terms, low) - model.rounding(terms))


def _working_dtype(prep: Prepared, cts: list[np.ndarray]) -> str | None:
    """The least precise floating dtype below float64 that a kernel of the function's reverse
    path computes in (one traced VJP, :meth:`Backend.trace_kernels`), or None (none, or an
    adapter that does not trace kernels)."""
    backend = prep.backend.backend
    trace = attempt("trace_kernels", backend.trace_kernels,
                    lambda: backend.vjp(prep.fn, prep.args64, prep.diff, cts, prep.device))
    if not isinstance(trace, KernelTrace):  # none, or a failure here: no credit
        return None
    return max({c.dtype for c in trace.calls}, key=error_model.eps, default=None)


def emit(prep: Prepared, c: Comparison, where: dict[str, int], pr: Probes,
         conv: list[tuple[tuple[float, float], ...]] | tuple[()], *, oracle_note: str = "",
         estimate: fd.FDEstimate | None = None, budget: bool = False,
         gradients: Sequence[np.ndarray] | None = None) -> CheckResult:
    """Record the verdict of ``c`` (its worst probe), localized where it failed (``estimate``:
    the oracle's, along ``pr``, for a block too large to build: :mod:`.bisection`; with
    ``budget``, every block so; ``gradients``: the VJPs of ``pr`` already made, per probe)."""
    v = judge(c, model_of(prep))
    i, j = where["output_index"], where["input_index"]
    details: dict[str, object] = {"resolution": v.resolution}
    if oracle_note:
        details["oracle"] = oracle_note
    level = None
    if not v.ok:
        level = prep.cfg.error_model.rounding_level(v.discrepancy, v.terms,
                                                    probe_norms(pr, i, j, v.probe), c.dtype)
    loc = Localization("")
    if not v.ok and c.kind in (CheckKind.VJP, CheckKind.JVP) and prep.cfg.localize:
        loc = localize(prep, c.kind, i, j,
                       None if estimate is None else (estimate, pr, v.probe), budget=budget,
                       gradients=gradients)
        details.update(loc.details())
    oracle = bool(c.fd_error[v.probe] > 0)
    return prep.result(
        c.kind, v.status, **where, expected=v.expected, actual=v.actual,
        discrepancy=v.discrepancy, relative_discrepancy=v.relative, allowed=v.allowed,
        allowed_source=v.source, discrepancy_ratio=v.ratio, worst=loc.worst,
        convergence=conv[v.probe] if conv else (), details=details,
        computed_in=c.dtype if c.dtype != prep.dtype else None, rounding_level=level,
        probe=v.probe, probes=c.probes, alternative=c.label or None, **loc.fields(),
        message=_verdict_message(v, c.label, level, oracle, prep.cfg.error_model),
    )


def _verdict_message(v: Verdict, label: str, level: float | None, oracle: bool,
                     model: error_model.ErrorModel) -> Callable[[CheckResult], str]:
    def message(r: CheckResult) -> str:
        if v.status is Status.INCONCLUSIVE:
            return unresolved_message(r, label, v.model_allowed, v.terms, oracle,
                                      model.resolution, v.fd_error)
        text = agreement_message(r, label)
        if level is None:
            return text
        return text + rounding_level_note(level, model.rounding_level_factor)

    return message


def compare_alternatives(prep: Prepared, where: dict[str, int], alt: AlternativeSamples,
                         pr: Probes, i: int, j: int, s_rev: np.ndarray, mag_fd: np.ndarray
                         ) -> None:
    """Eager vs functional: every alternative reverse path against the primary one."""
    a = alt.get(i)
    if isinstance(a, AdapterFailure):
        if a.unsupported:
            prep.result(CheckKind.EAGER_FUNC, Status.SKIPPED, **where, message=a.reason)
        else:
            prep.result(CheckKind.EAGER_FUNC, Status.ERROR, **where,
                        message=f"alternative reverse path raised: {a.text}")
        return
    position = prep.diff.index(j)
    for name, rows in (a or {}).items():
        s, mag = reverse_scalars(rows[: len(pr.v[i])], pr, j, position)
        terms = mag + mag_fd
        c = Comparison(CheckKind.EAGER_FUNC, s, s_rev, np.zeros_like(s_rev), terms,
                       prep.rule_dtype,
                       measured=_path_noise_if_needed(prep, name, pr, i, j, s, s_rev, terms,
                                                      mag),
                       floors=np.zeros(len(s)), label=name)
        emit(prep, c, where, pr, ())


def _path_noise_if_needed(prep: Prepared, name: str, pr: Probes, i: int, j: int, s: np.ndarray,
                          s_rev: np.ndarray, terms: np.ndarray, share_terms: np.ndarray
                          ) -> np.ndarray | None:
    """The two reverse paths' measured rounding noise (:mod:`.._path_noise`), only where the
    final-terms bound is exceeded and the error model (not an explicit tolerance) judges; the
    check's model turns the noise into a bound (its ``noise_factor``)."""
    if model_of(prep).explicit or prep.rule_dtype != "float64":
        return None
    model = prep.cfg.error_model
    bound = model.rounding(terms)
    if np.all(np.abs(s - s_rev) <= bound) or not np.all(np.isfinite(s)):
        return None
    P = len(pr.v[i])
    cts = [cotangents(prep, i, pr.v[i][p], np.float64) for p in range(P)]
    shares = model.rounding(share_terms)
    return np.array(path_noise.measured_extra(
        prep.backend.backend, prep.fn, name, prep.args64, prep.diff, prep.diff.index(j), cts,
        [pr.u[j][p] for p in range(P)], list(shares), prep.device, prep.cfg.seed,
        model=model))


def compare_low(prep: Prepared, where: dict[str, int],
                smp: list[rounding.Sample] | AdapterFailure, pr: Probes, fde: fd.FDEstimate,
                sl: slice) -> None:
    """The low-precision rounding check for one (output, input) pair, norm-wise."""
    i, j = where["output_index"], where["input_index"]
    if isinstance(smp, AdapterFailure):
        prep.result(CheckKind.ROUNDING, Status.ERROR, **where,
                    message=f"the backend's {prep.dtype} VJP raised: {smp.text}")
        return
    y = np.asarray(prep.outs64[i], dtype=np.float64).ravel()
    y_d = np.asarray(prep.outs_d[i], dtype=np.float64).ravel()
    # sizes of the first and second directional derivatives per output element, as root mean
    # squares over the probes: one probe can make (J u)_i vanish by cancellation, all rarely do
    with np.errstate(all="ignore"):
        ju = np.sqrt(np.mean(np.square(fde.value[:, sl]), axis=0))
        curv = np.sqrt(np.mean(np.square(fde.curvature[:, sl]), axis=0))
        noise64 = np.max(fde.noise[:, sl], axis=0)
    n_fwd = error_model.forward_error(y, y_d, noise64, prep.dtype)
    cond = error_model.conditioning_norm(pr.v[i][0].ravel(), n_fwd, curv, ju,
                                       model=prep.cfg.error_model)
    cmp = rounding.compare(smp, prep.diff.index(j), prep.args64[j].shape, prep.dtype, cond,
                           prep.cfg.atol, prep.cfg.rtol, model=prep.cfg.error_model)
    ratio = error_model.ratio(cmp.discrepancy, cmp.allowance.allowed)
    ok = ratio <= 1.0 and np.isfinite(cmp.actual)
    rel = cmp.discrepancy / cmp.expected if cmp.expected else (0.0 if not cmp.discrepancy
                                                               else float("inf"))
    dtype, source = prep.dtype, cmp.allowance.source

    def message(r: CheckResult) -> str:
        v = shown(r)
        assert v is not None
        verdict = "agrees" if ok else "DISAGREES"
        return (f"{r.subject} {verdict}: ||VJP|| {v.actual} in {dtype} vs {v.expected} "
                f"in float64; ||difference|| {v.difference} (relative {v.relative}), allowed "
                f"{v.allowed} [{source}], ratio {v.ratio}")

    prep.result(
        CheckKind.ROUNDING, Status.PASSED if ok else Status.FAILED, **where,
        expected=cmp.expected, actual=cmp.actual, discrepancy=cmp.discrepancy,
        relative_discrepancy=float(rel), allowed=cmp.allowance.allowed,
        allowed_source=source, discrepancy_ratio=float(ratio),
        worst=() if ok else cmp.worst,
        details={"compared": f"L2 norm of the whole VJP, {prep.dtype} vs float64",
                 "measured_noise": cmp.noise, "conditioning": cond},
        max_abs_discrepancy=max((abs(w.actual - w.expected) for w in cmp.worst), default=0.0),
        max_rel_discrepancy=float(rel),
        message=message,
    )


def kink_message(fde: fd.FDEstimate, sl: slice) -> str:
    kink = fde.kink[:, sl]
    if np.any(kink):
        p, e = np.argwhere(kink)[0]
        return (f"not differentiable at this point: along probe {p}, output element {e} has "
                f"left derivative {fde.left[p, sl][e]:.6g} and right derivative "
                f"{fde.right[p, sl][e]:.6g}")
    return "the oracle could not produce a finite estimate (the function is non-finite near " \
           "the point along every step)"
