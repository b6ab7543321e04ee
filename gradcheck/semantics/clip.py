"""Clip probes: linearity of the gradient in the loss scale and clip-by-global-norm behaviour.

Gradients for the clip probes are loaded with :meth:`TrainingHooks.set_gradients` (exactly
representable values, so the true global L2 norm is known in float64); the clip is the engine's
(:meth:`TrainingHooks.clip_grad_norm`) and what it documents is
:attr:`TrainingHooks.clip_semantics`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gradcheck.backends.guarded import AdapterFailure, attempt
from gradcheck.core.results import Status
from gradcheck.semantics.context import QUOTE, BugClass, ProbeContext, filled, flatten, global_norm
from gradcheck.semantics.problems import StandardProblem, shapes_for

SCALES = (-1.0, 0.0, 1e-3, 0.5, 2.0)
_LOW = ("float16", "bfloat16")
_LOW_SIZE = 4096  # elements per low-precision case: enough to expose a float16 accumulator


def run_clip(ctx: ProbeContext) -> None:
    """Linearity, then every clip-by-global-norm probe."""
    hooks = ctx.hooks()
    _linearity(ctx, hooks)
    shapes = shapes_for(hooks)
    grads = {k: ctx.rng(2).normal(0.0, 2.0, s) for k, s in shapes.items()}
    hooks.create_parameters({k: np.zeros(s) for k, s in shapes.items()})
    hooks.set_gradients(grads)
    stored = filled(hooks.gradients(), grads)  # rounded to the dtype: the true input
    _above(ctx, hooks, stored)
    _below(ctx, hooks, stored)
    _nonfinite(ctx, hooks, stored)
    _threshold_validation(ctx, hooks, stored)
    for dt in _LOW:
        _low_precision(ctx, dt)


def _linearity(ctx: ProbeContext, hooks: Any) -> None:
    problem = StandardProblem.for_hooks(hooks, ctx.rng(3))
    loss, inputs = problem.install(hooks)
    p = hooks.parameter_values()
    terms = problem.terms(p)
    hooks.zero_grad()
    hooks.backward(loss, *inputs)
    g1 = filled(hooks.gradients(), p)
    for c in SCALES:
        hooks.zero_grad()
        hooks.backward(loss, *inputs, scale=c)
        gc = filled(hooks.gradients(), p)
        ctx.compare(f"clip.linearity[c={c:g}]", gc, {k: c * g1[k] for k in g1},
                    {k: 2.0 * abs(c) * terms[k] for k in terms},
                    what=f"grad({c:g} x L) vs {c:g} x grad(L)", bug=BugClass.NOT_LINEAR)


def _after_clip(hooks: Any, stored: dict, max_norm: float) -> tuple[float, dict]:
    hooks.set_gradients(stored)
    reported = hooks.clip_grad_norm(max_norm)
    return float(reported), filled(hooks.gradients(), stored)


def _above(ctx: ProbeContext, hooks: Any, stored: dict) -> None:
    """Clipping triggered (max_norm = norm / 3): direction, bound, reported norm."""
    norm = global_norm(stored)
    max_norm = norm / 3.0
    reported, clipped = _after_clip(hooks, stored, max_norm)
    doc = hooks.clip_semantics
    g, _ = flatten(stored)
    c, _ = flatten(clipped)
    s_fit = float(c @ g) / float(g @ g)
    cosine = float(c @ g) / (float(np.linalg.norm(c)) * float(np.linalg.norm(g)) or 1.0)
    if not s_fit > 0.0:
        ctx.emit("clip.direction", Status.FAILED,
                 f"clip(max_norm={max_norm:.6g}) of gradients with norm {norm:.6g} gave "
                 f"gradients with cosine {cosine:.6g} to the original (reversed or zeroed)",
                 bug=BugClass.CLIP_CHANGES_DIRECTION, expected=1.0, actual=cosine)
    else:
        ctx.compare("clip.direction", clipped, {k: s_fit * v for k, v in stored.items()},
                    {k: np.abs(clipped[k]) + s_fit * np.abs(v) for k, v in stored.items()},
                    what=f"clipped gradients vs the best multiple ({s_fit:.6g}) of the "
                         f"originals (cosine {cosine:.12g})",
                    bug=BugClass.CLIP_CHANGES_DIRECTION)
    post_expected = max_norm * norm / (norm + doc.epsilon)
    post = global_norm(clipped)
    ctx.compare("clip.bound", post, post_expected, post_expected,
                what=f"global norm after clip(max_norm={max_norm:.6g}) of gradients with norm "
                     f"{norm:.6g} vs max_norm x norm / (norm + {doc.epsilon:g}) (documented: "
                     f"{doc.source})",
                bug=BugClass.CLIP_IGNORES_THRESHOLD)
    declared = norm if doc.reports == "pre_clip" else post_expected
    other = post_expected if doc.reports == "pre_clip" else norm
    bug = BugClass.NORM_NOT_GLOBAL_L2
    if ctx.matches(reported, other, other + abs(reported), ctx.dtype):
        bug = BugClass.PRE_POST_CLIP_MIXUP
    ctx.compare("clip.pre_post", reported, declared, declared + abs(reported),
                what=f"norm returned by a triggered clip vs the documented {doc.reports} norm "
                     f"(pre-clip {norm:.10g}, post-clip {post_expected:.10g})", bug=bug)


def _below(ctx: ProbeContext, hooks: Any, stored: dict) -> None:
    """Clip not triggered (max_norm = 2 x norm): unchanged gradients, true global L2 norm."""
    norm = global_norm(stored)
    reported, clipped = _after_clip(hooks, stored, 2.0 * norm)
    ctx.compare("clip.below_threshold", clipped, stored,
                {k: 2.0 * np.abs(v) for k, v in stored.items()},
                what=f"gradients after clip(max_norm={2 * norm:.6g}) with norm {norm:.6g} below "
                     "the threshold vs unchanged", bug=BugClass.CLIP_IGNORES_THRESHOLD)
    ctx.compare("clip.reported_norm", reported, norm, norm + abs(reported),
                what="norm returned by clip vs the global L2 norm recomputed in float64",
                bug=BugClass.NORM_NOT_GLOBAL_L2)


def _nonfinite(ctx: ProbeContext, hooks: Any, stored: dict) -> None:
    outcomes, failed = [], False
    for bad in (np.inf, np.nan):
        poisoned = {k: v.copy() for k, v in stored.items()}
        first = next(iter(poisoned))
        poisoned[first].flat[0] = bad
        after = attempt("clip_grad_norm", _after_clip, hooks, poisoned, 1.0)
        if isinstance(after, AdapterFailure):
            outcomes.append(f"{bad}: raised {after.quoted(QUOTE)}")
            continue
        reported = after[0]
        flagged = not np.isfinite(reported)
        failed |= not flagged
        outcomes.append(f"{bad}: returned norm {reported!r}"
                        + ("" if flagged else " (finite: the caller cannot tell)"))
    ctx.emit("clip.nonfinite", Status.FAILED if failed else Status.PASSED,
             "clip of gradients containing a non-finite element must raise or return a "
             "non-finite norm: " + "; ".join(outcomes), bug=BugClass.NONFINITE_NOT_FLAGGED)


def _threshold_validation(ctx: ProbeContext, hooks: Any, stored: dict) -> None:
    g, _ = flatten(stored)
    outcomes, failed = [], False
    for t in (-1.0, float("nan")):
        after = attempt("clip_grad_norm", _after_clip, hooks, stored, t)
        if isinstance(after, AdapterFailure):
            outcomes.append(f"max_norm={t!r}: rejected ({after.quoted(QUOTE)})")
            continue
        failed = True
        c, _ = flatten(after[1])
        if not np.all(np.isfinite(c)):
            effect = "gradients became non-finite"
        elif float(c @ g) < 0:
            effect = f"gradients reversed (scaled by {float(c @ g) / float(g @ g):.6g})"
        else:
            effect = "silently accepted"
        outcomes.append(f"max_norm={t!r}: applied, {effect}")
    ctx.emit("clip.threshold_validation", Status.FAILED if failed else Status.PASSED,
             "a negative or NaN clip threshold must be rejected: " + "; ".join(outcomes),
             bug=BugClass.THRESHOLD_NOT_VALIDATED)


def _low_precision(ctx: ProbeContext, dtype: str) -> None:
    rng = ctx.rng(4)
    cases = {  # large elements: their squares overflow float16; many O(1) terms: stagnation
        "large": ("elements of magnitude 300", 300.0 * rng.choice([-1.0, 1.0], _LOW_SIZE)),
        "many": (f"{_LOW_SIZE} elements in [0.5, 1.5]", rng.uniform(0.5, 1.5, _LOW_SIZE)),
    }
    names = {tag: f"clip.low_precision_norm[{dtype}:{tag}]" for tag in cases}
    if dtype not in ctx.backend.dtypes:
        for name in names.values():
            ctx.emit(name, Status.SKIPPED, f"backend {ctx.backend.name!r} has no {dtype}",
                     dtype=dtype)
        return
    hooks = attempt("training", ctx.hooks, dtype)  # one set of hooks for both cases
    for tag, (label, values) in cases.items():
        name = names[tag]
        loaded = hooks if isinstance(hooks, AdapterFailure) else attempt(
            "set_gradients", _load, hooks, values)
        if isinstance(loaded, AdapterFailure):
            ctx.emit(name, Status.SKIPPED, f"no {dtype} training hooks: "
                     f"{loaded.quoted(QUOTE)}", dtype=dtype)
            continue
        stored = filled(loaded.gradients(), {"w": values})
        norm = global_norm(stored)
        reported = attempt("clip_grad_norm", _clip_norm, loaded, 2.0 * norm)
        if isinstance(reported, AdapterFailure):
            ctx.emit(name, Status.ERROR, f"{label}: clip raised {reported.quoted(QUOTE)}",
                     dtype=dtype)
            continue
        ctx.compare(name, reported, norm, norm, dtype=dtype,
                    what=f"{dtype} gradient norm ({label}) returned by clip vs the float64 "
                         "recomputation", bug=BugClass.LOW_PRECISION_NORM)


def _load(hooks: Any, values: np.ndarray) -> Any:
    """``hooks`` with one parameter ``w`` whose gradient is ``values``."""
    hooks.create_parameters({"w": np.zeros(_LOW_SIZE)})
    hooks.set_gradients({"w": values})
    return hooks


def _clip_norm(hooks: Any, max_norm: float) -> float:
    return float(hooks.clip_grad_norm(max_norm))
