"""The failing path of the default check: a screen failure confirmed by projected estimates
alone, without the full oracle's per-element tables (``docs/error-model.md`` section 2c).

The projected screen (:mod:`.screen`) compares ``<J^T v_p, u>`` (and ``<v_p, J u>``) with a
Richardson table of central differences projected on the cotangents.  Where it sees a
disagreement the full check used to run: the per-element oracle along ``P`` fresh tangents,
the second estimate, the estimate without the crossed elements, localization (15-40 times the
passing check, ``docs/cost-model.md``).  Where the disagreement is *clear*, this module
confirms it with two more projected estimates, ``2 K`` evaluations of ``f`` each:

* **B**, the screen's direction at steps continuing the screen's ladder below it (its largest
  step the screen's smallest, ``2^-3`` below the screen's largest at K = 4; smaller steps'
  rounding would hide a 1e-7 error at the scale of the terms at n = 1e7): the
  discrepancy (AD minus FD) along it must match the screen's within both estimates' error
  allowances (a staircase or a non-smooth point between the steps makes the two step ranges
  see different slopes, while AD sees one: the screen's table would not be trusted);
* **C**, the screen's direction without the elements its largest step moves by more than
  their own size (:func:`gradcheck.oracle.scaled.scales`: across an element a step sees a
  secant, not the derivative), at the screen's steps; its central differences are also kept
  per output element, for localization.

The failure is *clear*, and reported from estimate C, only where every condition holds (any
other case hands the check to the full path, unchanged):

* every estimate is finite and sees no kink (the projected one-sided jump test);
* C converged as the screen must to pass (error within ``screen_floor`` of the terms) and
  resolved;
* the discrepancy exceeds the error model's allowance by ``projected_failure_margin`` (4)
  along the screen's estimate and C (their worst probes): the allowance already carries
  ``fd_safety`` (10) times the estimate's own error estimate, so a clear failure is at least
  40 error estimates away along two estimates, with and without the crossed elements;
* B, whose rounding is 8 times the screen's, exceeds its allowance too, and the screen's
  and B's discrepancies agree within their summed allowance on every probe (the two step
  ranges see the same error).

The AD side along B's and C's directions reads the screen's own VJPs (the screen keeps them
where a VJP comparison is over its allowance: ``J^T v_p`` does not depend on the tangent), or
costs one more JVP call of two rows (a JVP failure); localization is
on a budget along C's direction (:mod:`.bisection`, no evaluation of ``f``) where the block
is too large for the full Jacobian.  The checks it applies to: float64 rule checks judged by
the error model's allowances (no explicit ``atol``/``rtol``), the default check's and
``fast=True``'s alike (the confirmation reads the screen's estimates and VJPs only, none of the
comparisons of two AD values that ``fast`` leaves out).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gradcheck.backends.guarded import AdapterFailed, AdapterFailure
from gradcheck.core.results import CheckKind
from gradcheck.numeric import bisection
from gradcheck.numeric.compare import emit, model_of
from gradcheck.numeric.context import Prepared
from gradcheck.numeric.judge import Comparison, probe_ratios
from gradcheck.numeric.probes import Probes, batch_fn, f0
from gradcheck.numeric.scalars import ad_scalars, terms
from gradcheck.numeric.stages import ReverseSamples, forward, reverse
from gradcheck.oracle import error_model, fd
from gradcheck.oracle.scaled import scales

#: ``details["failure_path"]`` of a failure this module confirmed
PATH = "projected"
#: the default ``ErrorModel.projected_failure_margin``
DEFAULT_MARGIN = error_model.DEFAULT_MODEL.projected_failure_margin


@dataclass(frozen=True)
class Failing:
    """One comparison the screen failed on its ratio alone (its estimate converged, resolved,
    finite, no kink): the AD scalars per probe and the screen's terms."""

    kind: CheckKind
    i: int
    j: int
    r: int
    ad: np.ndarray
    terms: np.ndarray


@dataclass(frozen=True)
class Confirmed:
    """A failure confirmed along C: what :func:`record` reports."""

    failing: Failing
    comparison: Comparison
    probes: Probes
    estimate: fd.ProjectedEstimate
    note: str
    #: the backend's ``J^T v`` of input ``j`` per probe (a VJP failure; the diagonal
    #: hypothesis of :mod:`.bisection` starts from them), else None
    gradients: tuple[np.ndarray, ...] | None = None


def applies(prep: Prepared) -> bool:
    """The float64 rule checks judged by the error model (the default check's and
    ``fast=True``'s: the confirmation needs nothing the fast screen leaves out)."""
    return prep.rule_dtype == "float64" and not model_of(prep).explicit


PerProbe = Callable[[fd.ProjectedEstimate, int, int], fd.ProjectedEstimate]


def confirm(prep: Prepared, pr: Probes, W: np.ndarray, screen: dict[int, fd.ProjectedEstimate],
            failing: list[Failing], per_probe: PerProbe,
            gradients: ReverseSamples | None = None) -> list[Confirmed] | str:
    """Every failing comparison confirmed (module docstring), or why one is not clear.
    ``pr``: the screen's probes (one tangent ``P`` times); ``W``: its projections;
    ``screen``: its estimates per input (per probe, :func:`.screen._per_probe` applied, as
    ``per_probe`` does to B and C); ``gradients``: the screen's VJPs of ``pr``'s cotangents
    (the first ``P`` rows are read), where it kept them: else one VJP call makes them."""
    if not applies(prep):
        return "the projected failing path covers the default float64 check by the error model"
    P = len(next(iter(pr.v.values())))
    R = len(prep.float_outs)
    model = prep.cfg.error_model
    amodel = model_of(prep)
    along: dict[int, tuple[fd.ProjectedEstimate, fd.ProjectedEstimate, int]] = {}
    for j in sorted({f.j for f in failing}):
        a = screen[j]
        x = prep.args64[j].ravel()
        u = np.asarray(pr.u[j][0], dtype=np.float64).ravel()
        h = float(a.steps[0, 0])
        s = scales(x)
        crossed = ((s > 0) & (h * np.abs(u) > s)) | (s == 0)
        u_c = np.where(crossed, 0.0, u)
        if not np.any(u_c):
            return "every element is crossed by the screen's steps"
        try:
            b = fd.projected_derivatives(batch_fn(prep, j), x, u[None], W, f0=f0(prep),
                                         h0=np.array([h * _b_shrink(prep)]))
            c = fd.projected_derivatives(batch_fn(prep, j), x, u_c[None], W, f0=f0(prep),
                                         h0=np.array([h]), elements=True)
        except AdapterFailed as exc:
            return f"evaluating the function raised: {exc.failure.text:.200}"
        along[j] = (per_probe(b, P, R), per_probe(c, P, R),
                    int(np.count_nonzero(crossed)))
    out: list[Confirmed] = []
    for f in failing:
        b, c, n_crossed = along[f.j]
        got = _ad_along(prep, pr, f, b.directions[0], c.directions[0], gradients)
        if isinstance(got, str):
            return got
        (s_b, m_b), (s_c, m_c), grads = got
        r = f.r
        for name, e in (("B", b), ("C", c)):
            if not np.all(e.finite[:, r]) or np.any(e.kink[:, r]):
                return f"estimate {name}: a kink or a non-finite value"
        if not (np.all(np.isfinite(s_b)) and np.all(np.isfinite(s_c))):
            return "a non-finite AD value along the confirming directions"
        t_b = terms(b.magnitude[:, r], {f.kind: (s_b, m_b)})
        t_c = terms(c.magnitude[:, r], {f.kind: (s_c, m_c)})
        e_c = c.error[:, r]
        if not np.all(e_c <= model.screen_floor * t_c):
            return "estimate C did not converge below the screen's floor"
        if not all(amodel.resolved(amodel.modelled(float(e), float(t), "float64"), float(t))
                   for e, t in zip(e_c, t_c, strict=True)):
            return "estimate C's allowance is not resolved against its terms"
        a = screen[f.j]
        cmp_a = Comparison(f.kind, f.ad, a.value[:, r], a.error[:, r], f.terms, "float64")
        cmp_b = Comparison(f.kind, s_b, b.value[:, r], b.error[:, r], t_b, "float64")
        cmp_c = Comparison(f.kind, s_c, c.value[:, r], e_c, t_c, "float64")
        worst = [max(probe_ratios(x, amodel)[0]) for x in (cmp_a, cmp_b, cmp_c)]
        margin = model.projected_failure_margin
        if min(worst[0], worst[2]) < margin or not worst[1] > 1.0:
            return (f"not clear: ratios {worst[0]:.3g} (screen), {worst[1]:.3g} (steps x "
                    f"{_b_shrink(prep):g}), {worst[2]:.3g} (without the crossed "
                    f"elements); the margin is {margin:g} (1 at the small steps)")
        d_a = f.ad - cmp_a.expected
        d_b = s_b - cmp_b.expected
        consistent = np.abs(d_a - d_b) <= model.allowed(cmp_a.fd_error + cmp_b.fd_error,
                                                        f.terms + t_b)
        if not np.all(consistent):
            return ("the discrepancies at the screen's steps and at steps "
                    f"{_b_shrink(prep):g} times smaller differ beyond their allowance")
        note = (f"confirmed by projected estimates ({a.evaluations + b.evaluations + c.evaluations}"
                f" evaluations of f, no per-element oracle): at the screen's steps "
                f"{_steps(a)} the discrepancy is {_fmt(d_a)} (FD error {_fmt(cmp_a.fd_error)}), "
                f"at steps {_steps(b)} {_fmt(d_b)} (FD error {_fmt(cmp_b.fd_error)}); reported "
                f"along the screen's tangent without the {n_crossed} element(s) its steps move "
                "by more than their own size; worst ratios to the allowance "
                f"{worst[0]:.3g}, {worst[1]:.3g}, {worst[2]:.3g} (margin {margin:g})")
        pr_c = Probes(pr.v, {**pr.u, f.j: [c.directions[0].reshape(prep.args64[f.j].shape)] * P})
        out.append(Confirmed(f, cmp_c, pr_c, c, note, grads))
    return out


def record(prep: Prepared, confirmed: Confirmed, key: str) -> None:
    """Record one confirmed failure, localized on a budget along C (:mod:`.bisection`: VJP
    rows or one JVP, no evaluation of ``f``) wherever the AD side of the full Jacobian alone
    would take more rows than the bisection's whole budget; a smaller block gets the full
    Jacobian (its elements named by output and input index), as in the full check."""
    f, c = confirmed.failing, confirmed.estimate
    conv = [tuple((float(h), float(d)) for h, d in zip(c.steps[p], c.table[p, :, f.r],
                                                        strict=True))
            for p in range(len(f.ad))]
    view = prep.with_recorder(prep.recorder.with_details(
        {key: "failed: confirmed by projected estimates", "failure_path": PATH}))
    emit(view, confirmed.comparison, {"output_index": f.i, "input_index": f.j},
         confirmed.probes, conv, oracle_note=confirmed.note, estimate=_as_estimate(c),
         budget=_rows(prep, f) > bisection.BUDGET_ROWS, gradients=confirmed.gradients)


def _rows(prep: Prepared, f: Failing) -> int:
    """The AD rows (VJP) or columns (JVP) of the full Jacobian block of ``f``."""
    return int(np.size(prep.outs64[f.i]) if f.kind is CheckKind.VJP else prep.args64[f.j].size)


def _ad_along(prep: Prepared, pr: Probes, f: Failing, u_b: np.ndarray, u_c: np.ndarray,
              gradients: ReverseSamples | None = None
              ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray],
                         tuple[np.ndarray, ...] | None] | str:
    """The AD scalars and magnitudes of ``f``'s kind along B's and C's directions, and the
    VJPs they come from (input ``j``'s, per probe; None for a JVP failure): a VJP failure's
    from ``gradients`` where the screen kept them (the VJP is the same whatever the tangent),
    else from one VJP call."""
    P = len(pr.v[f.i])
    shape = prep.args64[f.j].shape
    pos = prep.diff.index(f.j)
    dirs = [u_b.reshape(shape), u_c.reshape(shape)]
    out = []
    grads = None
    if f.kind is CheckKind.VJP:
        rev = (gradients if gradients is not None and f.i in gradients
               else reverse(prep, pr))
        got_rev = rev[f.i]
        if not isinstance(got_rev, AdapterFailure):
            grads = tuple(np.asarray(r[pos], dtype=np.float64).reshape(-1)
                          for r in got_rev[:P])
        for d in dirs:
            got = ad_scalars(f.kind, rev, {}, Probes(pr.v, {**pr.u, f.j: [d] * P}), f.i, f.j,
                             pos)
            if isinstance(got, AdapterFailure):
                return f"the backend's VJP raised: {got.text:.200}"
            out.append(got)
    else:
        fwd = forward(prep, Probes(pr.v, {**pr.u, f.j: dirs}))
        rows = fwd[f.j]
        if isinstance(rows, AdapterFailure):
            return f"the backend's JVP raised: {rows.text:.200}"
        for k, d in enumerate(dirs):
            got = ad_scalars(f.kind, {}, {f.j: [rows[k]] * P},
                             Probes(pr.v, {**pr.u, f.j: [d] * P}), f.i, f.j, pos)
            if isinstance(got, AdapterFailure):
                return f"the backend's JVP raised: {got.text:.200}"
            out.append(got)
    return out[0], out[1], grads


def _as_estimate(c: fd.ProjectedEstimate) -> fd.FDEstimate:
    """C's per-element estimate as the oracle's (its rows the screen's probes, which share C's
    direction), for :mod:`.bisection`: only ``value`` and ``error`` are read there."""
    assert c.element_value is not None and c.element_error is not None
    P = c.steps.shape[0]
    m = c.element_value.shape[1]
    value = np.broadcast_to(c.element_value[:1], (P, m))
    error = np.broadcast_to(c.element_error[:1], (P, m))
    zeros = np.broadcast_to(np.zeros((1, 1)), (P, m))
    return fd.FDEstimate(value, error, zeros, np.broadcast_to(np.zeros((1, 1), bool), (P, m)),
                         zeros, zeros, c.steps, np.zeros((P, 0, m)), c.evaluations,
                         c.directions, zeros)


def _b_shrink(prep: Prepared) -> float:
    """B's steps relative to the screen's: its largest step is the screen's smallest
    (``2^-(K - 1)``), so its table continues the screen's ladder below it (one step shared,
    three below the screen's range), with rounding ``2^(K - 1)`` times the screen's (the full
    check's second estimate's steps, ``2^-4`` below the screen's at K = 4, leave a 1e-7 error
    below their rounding at n = 1e7)."""
    return 0.5 ** (prep.cfg.error_model.screen_levels - 1)


def _steps(e: fd.ProjectedEstimate) -> str:
    return f"{float(np.min(e.steps)):.3g}..{float(np.max(e.steps)):.3g}"


def _fmt(a: np.ndarray) -> str:
    return ", ".join(f"{float(v):.3g}" for v in np.ravel(a))
