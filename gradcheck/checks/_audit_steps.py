"""Audit probes on the user's own code: the gradient-norm monitor and the training step.

*Monitor.*  ``grad_norm_monitor(model, batch) -> float`` must report the global L2 norm of all
parameter gradients.  It is compared with that norm recomputed in float64 from the AD gradients;
a mismatch is diagnosed against the usual impostors (``sqrt(|loss|)``, ``|loss|``, ``loss^2``:
loss-magnitude proxies; the sum of per-parameter norms; one parameter's norm; twice the norm).

*Train step.*  Run twice from the same parameters (stored gradients left as the first run left
them): the two updates must agree, or gradients were not reset between steps.  With the
learning rate (and clip threshold) declared by :class:`TrainStep`, the update must equal
``-lr x s x g`` with ``s = min(1, max_norm / ||g||)``; a factor ``(1 + s) / s`` is the
"measure, rescale the loss, backward again without reset" pattern on an accumulating engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..results import CheckKind, Status
from ._probing import BugClass, ProbeContext, assess, describe_exc, global_norm, matches


@dataclass(frozen=True)
class TrainStep:
    """A user's training step with what it intends: plain SGD with learning rate ``lr`` on the
    gradient clipped to global norm ``max_norm`` (None: no clipping).  ``fn(model, batch)``
    mutates the model (torch) or returns the new parameters (JAX)."""

    fn: Callable[[Any, Any], Any]
    lr: float | None = None
    max_norm: float | None = None

    def __call__(self, model: Any, batch: Any) -> Any:
        return self.fn(model, batch)


def check_monitor(ctx: ProbeContext, hooks: Any, batch: Any, grads: Mapping[str, np.ndarray],
                  monitor: Callable | None, loss: float | None) -> float:
    """Compare the user's monitor with the global L2 norm; return that norm."""
    norm = global_norm(grads)
    kind = CheckKind.GRAD_NORM.value
    if monitor is None:
        ctx.emit("grad_norm", Status.SKIPPED, f"no grad_norm_monitor given; the global L2 "
                 f"gradient norm is {norm:.6g}", kind=kind, details={"grad_norm": norm})
        return norm
    saved = hooks.parameter_values()
    hooks.zero_grad()
    try:
        reported = float(monitor(hooks.model, batch))
    except Exception as exc:
        ctx.emit("grad_norm", Status.ERROR, f"grad_norm_monitor raised {describe_exc(exc)}",
                 kind=kind)
        return norm
    finally:
        hooks.assign(saved)
        hooks.zero_grad()
    a = assess(reported, norm, norm + abs(reported), hooks.dtype)
    bug, hint = BugClass.NORM_NOT_GLOBAL_L2, ""
    if not a.ok:
        bug, hint = _diagnose(reported, norm, grads, loss, hooks.dtype)
    ctx.record("grad_norm", a, kind=kind, bug=bug,
               what=f"grad_norm_monitor ({reported:.6g}) vs the global L2 norm of all parameter "
                    f"gradients recomputed in float64 ({norm:.6g}){hint}",
               details={"grad_norm": norm, "monitor": reported})
    return norm


def _diagnose(reported: float, norm: float, grads: Mapping[str, np.ndarray],
              loss: float | None, dtype: str) -> tuple[BugClass, str]:
    if loss is not None:
        for label, value in (("sqrt(|loss|)", abs(loss) ** 0.5), ("|loss|", abs(loss)),
                             ("loss^2", loss * loss)):
            if assess(reported, value, abs(value) + abs(reported), dtype).ok:
                return BugClass.LOSS_PROXY_NORM, (
                    f"; the monitor reports {label} = {value:.6g} (loss {loss:.6g}): a "
                    "loss-magnitude proxy, not a gradient norm")
    per = {k: float(np.linalg.norm(g)) for k, g in grads.items()}
    others = [("the sum of per-parameter norms", sum(per.values())),
              ("twice the norm (gradients accumulated twice)", 2.0 * norm),
              ("the squared norm", norm * norm)]
    others += [(f"the norm of {k!r} alone", v) for k, v in per.items()]
    for label, value in others:
        if value and assess(reported, value, abs(value) + abs(reported), dtype).ok:
            return BugClass.NORM_NOT_GLOBAL_L2, f"; the monitor reports {label} ({value:.6g})"
    return BugClass.NORM_NOT_GLOBAL_L2, ""


def check_train_step(ctx: ProbeContext, hooks: Any, batch: Any, train_step: Any,
                     grads: Mapping[str, np.ndarray], values: Mapping[str, np.ndarray],
                     stopped: set[str]) -> None:
    """Repeatability and effective step of the user's step (see module doc)."""
    spec = train_step if isinstance(train_step, TrainStep) else TrainStep(train_step)
    try:
        hooks.zero_grad()
        hooks.run_user_step(spec.fn, batch)
        first = hooks.parameter_values()
        hooks.assign(values)  # stored gradients stay as the step left them
        hooks.run_user_step(spec.fn, batch)
        second = hooks.parameter_values()
    except Exception as exc:
        ctx.emit("train_step", Status.ERROR, f"train_step raised {describe_exc(exc)}")
        return
    finally:
        hooks.assign(values)
        hooks.zero_grad()
    d1 = {k: first[k] - values[k] for k in values}
    d2 = {k: second[k] - values[k] for k in values}
    mag = {k: np.abs(values[k]) + np.abs(first[k]) + np.abs(second[k]) for k in values}
    ctx.compare("train_step.repeatable", d2, d1, mag, dtype=hooks.dtype,
                bug=BugClass.RESET_NOT_RESETTING,
                what="update of a second train_step run from the same parameters vs the first "
                     "(gradients left by a step must be reset before the next)")
    if spec.lr is None:
        ctx.emit("train_step.effective_step", Status.SKIPPED, "declare lr (and max_norm) with "
                 "gradcheck.TrainStep(fn, lr=..., max_norm=...) to measure the effective step")
        return
    _effective_step(ctx, hooks, spec, grads, values, d1, stopped)


def _effective_step(ctx, hooks, spec: TrainStep, grads, values, d1, stopped) -> None:
    trained = [k for k in values if k not in stopped]
    norm = global_norm({k: grads[k] for k in trained})
    step = {k: d1[k] for k in trained}
    best = None
    for eps in sorted({0.0, hooks.clip_semantics.epsilon}):
        s = 1.0 if spec.max_norm is None else min(1.0, spec.max_norm / (norm + eps))
        intended = {k: -spec.lr * s * grads[k] for k in trained}
        mag = {k: np.abs(values[k]) + np.abs(values[k] + d1[k]) + spec.lr * s * np.abs(grads[k])
               for k in trained}
        a = assess(step, intended, mag, hooks.dtype)
        if best is None or a.ratio < best[1].ratio:
            best = (s, a, intended, mag)
    s, a, intended, mag = best
    bug, hint = BugClass.STEP_MISMATCH, ""
    if not a.ok:
        bug, hint = _diagnose_step(step, intended, mag, s, hooks.dtype)
    shown = "n/a" if a.factor is None else f"{a.factor:.6g}"
    ctx.record("train_step.effective_step", a, bug=bug, dtype=hooks.dtype,
               what=f"update of one train_step vs -lr x s x gradient (lr={spec.lr:g}, max_norm="
                    f"{spec.max_norm}, gradient norm {norm:.6g}, s={s:.6g}); effective step = "
                    f"{shown} x intended{hint}",
               details={"effective_factor": a.factor, "clip_factor": s})


def _diagnose_step(step, intended, mag, s: float, dtype: str) -> tuple[BugClass, str]:
    """Name the failure if the step matches a known bug's factor under the error model."""
    def scaled(f: float) -> dict:
        return {k: f * v for k, v in intended.items()}

    grown = {k: np.abs(v) * (1.0 + s) / s for k, v in mag.items()}
    if s < 1.0 and matches(step, scaled((1.0 + s) / s), grown, dtype):
        return BugClass.DOUBLE_BACKWARD_CLIP, (
            f": the step applied lr x (1 + s) x g instead of lr x s x g - the gradient of the "
            f"rescaled loss was added to the unreset first gradient (factor (1 + s) / s = "
            f"{(1.0 + s) / s:.6g})")
    if matches(step, scaled(2.0), {k: 2.0 * v for k, v in mag.items()}, dtype):
        return BugClass.DOUBLED_SECOND_BACKWARD, ": gradients doubled"
    if s < 1.0 and matches(step, scaled(1.0 / s), {k: v / s for k, v in mag.items()}, dtype):
        return BugClass.CLIP_IGNORES_THRESHOLD, ": the clip was not applied"
    return BugClass.STEP_MISMATCH, ""
