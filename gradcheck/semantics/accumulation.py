"""Accumulation probes: what stored gradients hold after a second backward, after a reset, after
re-running a retained graph, and what the "measure, rescale the loss, backward again" clipping
pattern really applies.

Declared semantics predict a factor ``k`` (``Accumulation.ACCUMULATE``: a second backward adds,
so 2x; ``FUNCTIONAL``: fresh gradients, 1x); each probe measures it against the first gradient
under the error model.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gradcheck.backends.base import Accumulation
from gradcheck.core.results import Status
from gradcheck.semantics.context import BugClass, ProbeContext, filled, global_norm
from gradcheck.semantics.problems import StandardProblem

_LR = 0.1
_CLIP_FRACTION = 0.25  # max_norm = 1/4 of the gradient norm: clipping triggers, s = 0.25


def _declared_factor(hooks: Any) -> float:
    return 2.0 if hooks.semantics.accumulation is Accumulation.ACCUMULATE else 1.0


def _scaled(g: dict[str, np.ndarray], factor: float) -> dict[str, np.ndarray]:
    return {n: factor * v for n, v in g.items()}


def _factor(a: dict[str, np.ndarray], e: dict[str, np.ndarray]) -> float | None:
    av = np.concatenate([np.ravel(a[k]) for k in e])
    ev = np.concatenate([np.ravel(e[k]) for k in e])
    ee = float(ev @ ev)
    return float(av @ ev) / ee if ee > 0 and np.all(np.isfinite(av)) else None


def run_accumulation(ctx: ProbeContext) -> None:
    """All accumulation probes on a fresh instance of the standard problem."""
    hooks = ctx.hooks()
    problem = StandardProblem.for_hooks(hooks, ctx.rng(1))
    loss, inputs = problem.install(hooks)
    p = hooks.parameter_values()
    terms = problem.terms(p)
    k = _declared_factor(hooks)
    decl = hooks.semantics.accumulation.value

    hooks.zero_grad()
    hooks.backward(loss, *inputs)
    g1 = filled(hooks.gradients(), p)
    ctx.compare("accumulation.first_backward", g1, problem.grad(p), terms,
                what="stored gradient after one backward vs the hand-derived gradient",
                bug=BugClass.WRONG_GRADIENT)

    hooks.backward(loss, *inputs)
    g2 = filled(hooks.gradients(), p)
    _expect_factor(ctx, "accumulation.second_backward", g2, g1, k, terms, decl,
                   "stored gradient after a second backward without reset")

    _reset(ctx, hooks, loss, inputs, g1, terms, p)

    hooks.zero_grad()
    try:
        hooks.backward(loss, *inputs, retain=True)
        hooks.backward_again()
    except NotImplementedError as exc:
        ctx.emit("accumulation.retained_graph", Status.SKIPPED, str(exc))
    else:
        g4 = filled(hooks.gradients(), p)
        _expect_factor(ctx, "accumulation.retained_graph", g4, g1, k, terms, decl,
                       "stored gradient after re-running the retained graph (pullback)")

    _rescale_backward_again(ctx, hooks, loss, inputs, g1, terms, k, decl)


def _expect_factor(ctx: ProbeContext, name: str, actual: dict, g1: dict, k: float, terms: dict,
                   decl: str, what: str) -> None:
    """``actual`` must be ``k x g1``; a functional declaration measured at 2x (within the same
    error model) is named doubling."""
    magnitude = {n: 3.0 * terms[n] for n in terms}
    bug = BugClass.ACCUMULATION_MISMATCH
    if k == 1.0 and ctx.matches(actual, _scaled(g1, 2.0), magnitude, ctx.dtype):
        bug = BugClass.DOUBLED_SECOND_BACKWARD
    ctx.compare(name, actual, _scaled(g1, k), magnitude,
                what=f"{what} (declared {decl}: {k:g}x the first)", bug=bug)


def _reset(ctx: ProbeContext, hooks: Any, loss: Any, inputs: tuple, g1: dict, terms: dict,
           p: dict) -> None:
    hooks.zero_grad()
    after = filled(hooks.gradients(), p)
    left = global_norm(after)
    if left != 0.0:
        ctx.emit("accumulation.reset", Status.FAILED,
                 f"after zero_grad() the stored gradients still have norm {left:.6g} "
                 "(expected none or zeros)", bug=BugClass.RESET_NOT_RESETTING,
                 expected=0.0, actual=left, discrepancy=left)
        return
    hooks.backward(loss, *inputs)
    g3 = filled(hooks.gradients(), p)
    ctx.compare("accumulation.reset", g3, g1, {n: 2.0 * terms[n] for n in terms},
                what="stored gradient after zero_grad() and one backward vs the first gradient",
                bug=BugClass.RESET_NOT_RESETTING)


def _rescale_backward_again(ctx: ProbeContext, hooks: Any, loss: Any, inputs: tuple, g1: dict,
                            terms: dict, k: float, decl: str) -> None:
    """backward; measure N; backward(scale=max_norm/N) without reset; SGD step; compare the step
    with lr x clipped gradient (what the pattern intends) and with what ``decl`` predicts."""
    hooks.zero_grad()
    hooks.backward(loss, *inputs)
    g = filled(hooks.gradients(), g1)
    norm = global_norm(g)
    s = _CLIP_FRACTION
    hooks.backward(loss, *inputs, scale=s)
    before = hooks.parameter_values()
    hooks.sgd_step(_LR)
    after = hooks.parameter_values()
    step = {n: after[n] - before[n] for n in before}
    intended = {n: -_LR * s * g[n] for n in g}
    predicted = (1.0 + s) / s if k == 2.0 else 1.0
    expected = _scaled(intended, predicted)
    magnitude = {n: np.abs(before[n]) + np.abs(after[n]) + _LR * (1.0 + s) * terms[n]
                 for n in before}
    measured = _factor(step, intended)
    bug = BugClass.ACCUMULATION_MISMATCH
    if k == 1.0 and ctx.matches(step, _scaled(intended, (1.0 + s) / s), magnitude, ctx.dtype):
        bug = BugClass.DOUBLE_BACKWARD_CLIP
    shown = "n/a" if measured is None else f"{measured:.6g}"
    ctx.compare(
        "accumulation.rescale_backward_again", step, expected, magnitude,
        what=(f"SGD step (lr={_LR:g}) after backward, then backward of the loss rescaled by "
              f"s = max_norm / norm = {s:g} (norm {norm:.6g}) without reset: effective step = "
              f"{shown} x lr x clipped gradient; declared {decl} predicts {predicted:g}x"
              + (f" (the pattern applies (1 + s) / s = {predicted:g}x the intended step on "
                 "this backend: reset between the passes or rescale the stored gradients)"
                 if k == 2.0 else "")),
        bug=bug, details={"scale": s, "lr": _LR, "effective_factor": measured,
                          "declared_factor": predicted})
