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
abstention never becomes a failure.  On a smooth function the two estimates agree within
their errors, and a wrong rule is failed with that confirmation.  The second estimate costs
nothing on checks that pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import fd, tolerance
from .numeric import _batch_fn, _Ctx, _f0, _fd_side, _probe_ratios

_SHRINK = 2.0**-8


def revisit(ctx: _Ctx, pr: Any, i: int, j: int, sl: slice, fde: fd.FDEstimate, got: dict
            ) -> tuple[fd.FDEstimate | None, tuple, str]:
    """The estimate to judge output ``i`` / input ``j`` with, its scalars (``numeric._fd_side``:
    values, errors, FD magnitudes, terms) and a note for the result's ``details["oracle"]``;
    ``(None, (), why)`` when the check must abstain (``why`` empty where the first estimate's
    kink or non-finite value is the reason).  ``got``: the AD scalars and magnitudes
    per check kind."""
    ad = {kind: vals[0] for kind, vals in got.items()}
    if not decidable(fde, sl):
        small = _second(ctx, j, fde)
        if small is None or not decidable(small, sl) or not ad:
            return None, (), ""
        side2 = _fd_side(small, pr, i, j, sl, got)
        if not sharp(side2) or not agrees(ctx, ad, side2):
            return None, (), ""
        return small, side2, (f"the steps {_step_range(fde)} saw a kink or a non-finite "
                              f"value; the steps {_step_range(small)} do not, and the AD values "
                              "agree with them: judged with those")
    side = _fd_side(fde, pr, i, j, sl, got)
    if agrees(ctx, ad, side):
        return fde, side, ""
    small = _second(ctx, j, fde)
    if small is None or not decidable(small, sl):
        return fde, side, ""
    side2 = _fd_side(small, pr, i, j, sl, got)
    (s_fd, e_fd, _, terms), (s2, e2, _, terms2) = side, side2
    second = f"the steps {_step_range(small)} give {_fmt(s2)} (error {_fmt(e2)})"
    broken = contradicted(fde, small, sl)
    if not broken and np.all(tolerance.estimates_agree(s_fd, e_fd, s2, e2, terms + terms2)):
        return fde, side, f"confirmed: {second}"
    if sharp(side2) and agrees(ctx, ad, side2):
        return small, side2, (f"the steps {_step_range(fde)} gave {_fmt(s_fd)} (error "
                              f"{_fmt(e_fd)}); {second}, which the AD values agree with: the "
                              "large steps crossed a jump or a non-smooth point; judged with "
                              "the small ones")
    if broken and agrees(ctx, ad, side2):
        return None, (), (
            f"inconclusive: the steps {_step_range(fde)} and {_step_range(small)} contradict "
            f"each other on {broken} output element(s) beyond both error estimates, so f is "
            "not smooth on the scale of the steps (a jump or non-smooth point nearby) and the "
            f"large steps' {_fmt(s_fd)} (error {_fmt(e_fd)}) cannot be trusted; {second}, "
            "too coarse to judge with (a wrong rule would agree with it as readily)")
    if not sharp(side2):
        return fde, side, f"not confirmed: {second}, an estimate too coarse to judge with"
    return fde, side, f"not confirmed: {second}, and the AD values disagree with it too"


def contradicted(first: fd.FDEstimate, second: fd.FDEstimate, sl: slice) -> int:
    """How many elements (probe x output element on ``sl``) of the two estimates differ by
    more than the sum of their error estimates (with the rule check's safety factor): where
    one does, at least one error model does not hold at ``x``."""
    v1, e1 = first.value[:, sl], first.error[:, sl]
    v2, e2 = second.value[:, sl], second.error[:, sl]
    agree = tolerance.estimates_agree(v1, e1, v2, e2, np.abs(v1) + np.abs(v2))
    return int(np.sum(~agree & np.isfinite(v1) & np.isfinite(v2)))


def decidable(fde: fd.FDEstimate, sl: slice) -> bool:
    """No kink and a finite estimate for every probe on the output slice ``sl``."""
    return not np.any(fde.kink[:, sl]) and bool(np.all(fde.finite[:, sl]))


def sharp(side: tuple) -> bool:
    """Whether the estimate ``side`` (``numeric._fd_side``) is sharp: its error within 1e-8 of
    the compared scalar's absolute terms on every probe (the oracle's convergence criterion,
    ``fd.CONVERGED_RTOL``, at the scale of the comparison).  Only a sharp estimate may
    vindicate: an honest but wide error estimate agrees with a wrong rule as readily as with
    the right one (``logsumexp`` at 3e4, where the small steps are still too coarse)."""
    _, e_fd, _, terms = side
    return bool(np.all(e_fd <= fd.CONVERGED_RTOL * terms))


def agrees(ctx: _Ctx, ad: dict, side: tuple) -> bool:
    """Whether every AD value of every probe is within the rule check's allowance of the
    estimate ``side`` (``numeric._fd_side``), as ``numeric._emit`` judges it without the
    conditioning term, which only widens it."""
    s_fd, e_fd, _, terms = side
    return all(all(r <= 1.0 for r in _probe_ratios(ctx, s_ad, s_fd, e_fd, terms,
                                                   ctx.rule_dtype)[0])
               for s_ad in ad.values())


def _second(ctx: _Ctx, j: int, fde: fd.FDEstimate) -> fd.FDEstimate | None:
    """The estimate along the same directions with every step ``2^-8`` times smaller, no
    retries, the first estimate's measured noise reused (measured again with fewer halvings,
    the noise points would sit at the table's own scale, where a kink looks like noise);
    once per input; ``None`` if it cannot be had.  The directions were rounded for these
    steps already (the retries' halvings), so the AD side's projections stay valid."""
    if j not in ctx.confirmations:
        small: fd.FDEstimate | None = None
        try:
            est = fd.directional_derivatives_split(
                _batch_fn(ctx, j), ctx.args64[j].ravel(), fde.directions,
                h0=fde.steps[:, 0] * _SHRINK, retries=0, f0=_f0(ctx), noise=fde.noise)
            if np.array_equal(est.directions, fde.directions):
                small = est
        except Exception:  # the first estimate stands; its own verdict is reported
            small = None
        ctx.confirmations[j] = small
    return ctx.confirmations[j]


def _step_range(fde: fd.FDEstimate) -> str:
    steps = fde.steps[:, : fd.DEFAULT_LEVELS]
    return f"{float(np.min(steps)):.3g}..{float(np.max(steps)):.3g}"


def _fmt(a: np.ndarray) -> str:
    return ", ".join(f"{float(v):.10g}" for v in np.ravel(a))
