"""Naming a training-step mismatch by its factor, and the per-parameter breakdown.

When a step disagrees with the declared optimizer, the measured update is compared (under the
same error model as the verdict) with what known bugs would have produced from the same state:
the clip not applied, the rescaled-loss gradient added to the unreset one (``(1 + s) / s``), two
optimizer updates, gradients doubled, ``K`` micro-batch gradients summed without dividing, a loss
scale ``2^k`` (GradScaler) left in, ``1/K`` too much averaging, a clip that rescales to
``max_norm`` below the threshold, an undeclared clip, and (after the first step) the gradient of
the first step's parameters reused.  The first match names the cause.  For Adam-like optimizers
the gradient-scale causes are not identifiable (the update is nearly scale-invariant) and are
not offered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gradcheck.oracle.error_model import DEFAULT_MODEL, ErrorModel
from gradcheck.semantics.context import BugClass, matches

# what the step model (:mod:`._step_model`, :mod:`._optimizers`) raises for a variation it
# cannot express: an optimizer feature it does not model (NotImplementedError), a variation
# whose shapes or state do not fit (ValueError, LookupError), a number it cannot form
# (ArithmeticError).  Such a cause is not the one; anything else is a bug here and surfaces.
_CANNOT_EXPRESS = (NotImplementedError, ValueError, LookupError, ArithmeticError)


def per_parameter(actual: Mapping[str, np.ndarray], intended: Mapping[str, np.ndarray],
                  before: Mapping[str, np.ndarray], names: Sequence[str]) -> dict[str, float]:
    """Update / intended update per parameter (least-squares factor; NaN where the intended
    update is zero)."""
    out = {}
    for k in names:
        a = np.ravel(actual[k] - before[k])
        e = np.ravel(intended[k] - before[k])
        ee = float(e @ e)
        out[k] = float(a @ e) / ee if ee > 0 else (0.0 if not np.any(a) else float("nan"))
    return out


def breakdown(factors: Mapping[str, float], limit: int = 8) -> str:
    """``"a 1, b 5.61, c 0 (not updated)"``."""
    parts = []
    for k, f in list(factors.items())[:limit]:
        if f != f:
            parts.append(f"{k} moved, intended not to")
        else:
            parts.append(f"{k} {f:.4g}" + (" (not updated)" if f == 0 else ""))
    more = len(factors) - limit
    return ", ".join(parts) + (f", ... ({more} more)" if more > 0 else "")


def diagnose(actual: Mapping[str, np.ndarray], mag: Mapping[str, np.ndarray], dtype: str,
             alt: Callable[..., Any], *, s: float, norm: float, max_norm: float | None,
             step: int, factor: float | None, linear: bool = True,
             first_grads: Mapping[str, np.ndarray] | None,
             model: ErrorModel = DEFAULT_MODEL,
             slack: Mapping[str, np.ndarray] | None = None,
             micro_batches: int | None = None) -> tuple[BugClass, str]:
    """The first known cause whose predicted step matches ``actual`` (``alt(**kw)`` predicts
    the step with a variation: ``scale=``, ``s=``, ``repeat=``, ``grads=``)."""
    def hit(pred: Any, grow: float = 1.0) -> bool:
        m = {k: mag[k] * grow + pred.magnitude[k] for k in mag}
        extra = None if slack is None else {k: grow * v for k, v in slack.items()}
        return matches(actual, pred.values, m, dtype, model=model, measured=extra)

    cands: list[tuple[BugClass, str, dict]] = []
    if micro_batches and micro_batches >= 2:
        k = int(micro_batches)
        cands.append((BugClass.MICRO_BATCHES_SUMMED,
                      f": the step applied {k} x the gradient: the {k} declared micro-batch "
                      f"gradients summed without dividing the loss by {k}", {"scale": float(k)}))
    if s < 1.0:
        cands.append((BugClass.CLIP_IGNORES_THRESHOLD,
                      f": the clip was not applied (the step used the unclipped gradient; "
                      f"factor 1/s = {1 / s:.6g}): clip before optimizer.step(), or clip the "
                      "parameters the optimizer updates", {"s": 1.0}))
        cands.append((BugClass.DOUBLE_BACKWARD_CLIP,
                      f": the step applied lr x (1 + s) x g instead of lr x s x g - the gradient "
                      f"of the rescaled loss was added to the unreset first gradient (factor "
                      f"(1 + s) / s = {(1 + s) / s:.6g})", {"scale": (1 + s) / s}))
    cands.append((BugClass.TWO_UPDATES, ": two optimizer updates with one gradient "
                  "(optimizer.step() called twice, or the update applied twice)", {"repeat": 2}))
    cands.append((BugClass.DOUBLED_SECOND_BACKWARD, ": gradients doubled (a second backward "
                  "without a reset, or the loss counted twice)", {"scale": 2.0}))
    for k in range(7, 25):
        cands.append((BugClass.LOSS_SCALE_NOT_REMOVED,
                      f": the step applied the gradient times 2^{k} = {2 ** k}: a loss scale "
                      "left in (GradScaler: scaler.step(optimizer), or scaler.unscale_ before "
                      "clipping)", {"scale": float(2 ** k)}))
        cands.append((BugClass.LOSS_SCALE_NOT_REMOVED,
                      f": the step applied the gradient divided by 2^{k} = {2 ** k}: the loss "
                      f"was scaled down by {2 ** k} and never scaled back (or a loss scale "
                      "removed twice)", {"scale": float(2.0 ** -k)}))
    for k in range(3, 65):
        cands.append((BugClass.MICRO_BATCHES_SUMMED,
                      f": the step applied {k} x the gradient: {k} micro-batch gradients summed "
                      f"without dividing the loss by {k} (or {k} backwards without a reset)",
                      {"scale": float(k)}))
    for k in range(2, 65):
        cands.append((BugClass.STEP_MISMATCH,
                      f": the step applied the gradient divided by {k}: the loss divided by the "
                      f"number of micro-batches ({k}) twice, or averaged over an extra axis",
                      {"scale": 1.0 / k}))
    if max_norm is not None and s == 1.0 and norm > 0:
        cands.append((BugClass.CLIP_IGNORES_THRESHOLD,
                      f": the step rescaled the gradient to norm max_norm = {max_norm:g} "
                      f"although its norm {norm:.6g} is below it (a normalisation, not a clip: "
                      "the post-clip norm always equals max_norm)", {"s": max_norm / norm}))
    if first_grads is not None and step > 0:
        cands.append((BugClass.STALE_STATE,
                      f": step {step + 1} applied the gradient at the parameters of step 1 "
                      "(a gradient function, jit closure or cache holding the initial "
                      "parameters)", {"grads": first_grads}))
    if not linear:  # Adam-like updates are (nearly) invariant to the gradient's scale: only
        # the declared accumulation's factor is offered (its eps-level signature is specific)
        cands = [c for c in cands if "scale" not in c[2] or (
            micro_batches and c[0] is BugClass.MICRO_BATCHES_SUMMED
            and c[2]["scale"] == float(micro_batches))]
    for bug, hint, kw in cands:
        try:
            pred = alt(**kw)
        except _CANNOT_EXPRESS:  # an unusual variation the model cannot express: not this cause
            continue
        if hit(pred, float(kw.get("scale", 1.0)) if kw.get("scale", 1.0) > 1 else 1.0):
            return bug, hint
    if max_norm is None and factor is not None and 0.0 < factor < 1.0 and norm > 0:
        pred = alt(s=factor)
        if hit(pred):
            return BugClass.STEP_MISMATCH, (
                f": the step clipped the gradient to global norm {factor * norm:.6g} (its norm "
                f"is {norm:.6g}) but no max_norm was declared: declare "
                f"TrainStep(max_norm={factor * norm:.4g}) if that clip is intended")
    return BugClass.STEP_MISMATCH, ""
