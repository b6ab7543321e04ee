"""Audit probes on the user's own code: the gradient-norm monitor and the training step.

*Monitor.*  ``grad_norm_monitor(model, batch) -> float`` (runs its own backward) or
``AfterBackward(fn)`` (reads what a training loop's backward left: torch ``fn(model)`` with
``.grad`` filled, JAX/NumPy ``fn(grads)`` with the gradient pytree) must report the global L2
norm of all parameter gradients.  It is compared with that norm recomputed in float64 from the
AD gradients; a mismatch is diagnosed against the usual impostors (``sqrt(|loss|)``, ``|loss|``,
``loss^2``: loss-magnitude proxies; the sum of per-parameter norms; one parameter's norm; twice
the norm); a non-finite report never passes.

*Train step.*  The optimizer, LR scheduler and gradient scaler the step uses are found
(:mod:`._state`) and their state is snapshot and restored around every probe.  *Repeatability*:
the step run twice from the same parameters and optimizer state (stored gradients left as the
first run left them): the two updates must agree, or gradients were not reset between steps.
*Effective step*, over ``TrainStep(steps=k)`` consecutive steps: before each step the true
gradient at the current parameters is computed, the declared optimizer (:mod:`._optimizers`:
``lr=`` alone is plain SGD; a ``torch.optim`` optimizer found in the step is read as the
declaration) predicts the step from the gradient clipped to ``max_norm`` and the state it keeps
itself, with declared :class:`Tie` and :class:`TargetUpdate` rules (:mod:`._step_model`); the
user's step must agree, parameter by parameter.  Parameters declared stopped (and without a
declared target update) must not move.  A mismatch is named by its factor
(:mod:`._step_diagnosis`) with the per-parameter breakdown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.backends.guarded import AdapterFailure, attempt
from gradcheck.core.results import CheckKind, Status
from gradcheck.model_audit import declared as _declared
from gradcheck.model_audit import micro_batches, step_noise
from gradcheck.model_audit import state as _state
from gradcheck.model_audit.optimizers import SGD, Adam, from_torch
from gradcheck.model_audit.step_diagnosis import (
    _CANNOT_EXPRESS,
    breakdown,
    diagnose,
    per_parameter,
)
from gradcheck.model_audit.step_model import Prediction, TargetUpdate, Tie, predict
from gradcheck.oracle.error_model import ErrorModel
from gradcheck.semantics.context import (
    QUOTE,
    BugClass,
    ProbeContext,
    assess,
    filled,
    global_norm,
    matches,
)

_NO_STATE = object()


@dataclass(frozen=True)
class TrainStep:
    """A user's training step with what it intends.

    ``fn(model, batch)`` mutates the model (torch) or returns the new parameters (JAX); with
    ``state=`` (functional optimizers) it is called ``fn(model, state, batch) -> (params,
    state)`` and the state is threaded from step to step.  ``lr`` (plain SGD) or ``optimizer``
    (:class:`~gradcheck.SGD`, :class:`~gradcheck.Adam`, :func:`~gradcheck.AdamW`, or the
    ``torch.optim`` object the step uses; one found in ``fn`` is used when none is declared)
    says what one step should do; ``max_norm``: clip to this global norm first (None: no clip).
    ``scheduler`` / ``scaler``: objects whose state the audit restores (found in ``fn`` too).
    ``steps``: consecutive steps compared; ``ties`` (:class:`Tie`) and ``target_updates``
    (:class:`TargetUpdate`) declare parameters the step syncs by copy or Polyak averaging.
    ``clip_value``: each gradient element clipped to ``[-clip_value, clip_value]`` first
    (``torch.nn.utils.clip_grad_value_``; read from the step's call when not declared).
    ``micro_batches``: the step accumulates the gradients of this many micro-batches (sets the
    rounding allowance of the accumulated gradient, and lets a mismatch be named by the
    micro-batch pattern that explains it); ``split(batch, K)`` returns the micro-batches as the
    step forms them (default: every tensor of the batch chunked along its first axis, as
    ``torch.chunk`` does)."""

    fn: Callable[..., Any]
    lr: float | None = None
    max_norm: float | None = None
    optimizer: Any = None
    scheduler: Any = None
    scaler: Any = None
    steps: int = 1
    state: Any = _NO_STATE
    ties: Sequence[Tie] = ()
    target_updates: Sequence[TargetUpdate] = ()
    clip_value: float | None = None
    micro_batches: int | None = None
    split: Callable[[Any, int], Sequence[Any]] | None = None

    def __call__(self, model: Any, batch: Any) -> Any:
        return self.fn(model, batch)


@dataclass(frozen=True)
class AfterBackward:
    """A monitor written for a training loop: called after the loop's backward, it reads the
    stored gradients (torch: ``fn(model)`` with ``.grad`` set; JAX/NumPy: ``fn(grads)``, the
    gradients in the model's structure) and returns the norm it logs."""

    fn: Callable[[Any], float]


# -- monitor ------------------------------------------------------------------------------

def check_monitor(ctx: ProbeContext, hooks: Any, loss_fn: Any, batch: Any,
                  grads: Mapping[str, np.ndarray], monitor: Any, loss: float | None) -> float:
    """Compare the user's monitor with the global L2 norm; return that norm."""
    norm = global_norm(grads)
    kind = CheckKind.GRAD_NORM
    if monitor is None:
        ctx.emit("grad_norm", Status.SKIPPED, f"no grad_norm_monitor given; the global L2 "
                 f"gradient norm is {norm:.6g}", kind=kind, details={"grad_norm": norm})
        return norm
    snap = hooks.snapshot()
    hooks.zero_grad()
    try:
        got = attempt("grad_norm_monitor", _monitored, hooks, loss_fn, batch, monitor)
    finally:
        hooks.restore(snap)
    if isinstance(got, AdapterFailure):
        ctx.emit("grad_norm", Status.ERROR, f"grad_norm_monitor raised {got.quoted(QUOTE)}",
                 kind=kind)
        return norm
    reported, how = got
    if not np.isfinite(reported):
        ctx.emit("grad_norm", Status.FAILED, f"{how} reports {reported} but the global L2 norm "
                 f"of the gradients is {norm:.6g} (finite): a non-finite norm never passes; "
                 "is a gradient read before it was computed, or divided by zero?",
                 bug=BugClass.NORM_NOT_GLOBAL_L2, kind=kind,
                 details={"grad_norm": norm, "monitor": reported}, expected=norm,
                 actual=reported)
        return norm
    a = ctx.assess(reported, norm, norm + abs(reported), hooks.dtype)
    bug, hint = BugClass.NORM_NOT_GLOBAL_L2, ""
    if not a.ok:
        bug, hint = _diagnose(reported, norm, grads, loss, hooks.dtype, ctx.error_model)
    ctx.record("grad_norm", a, kind=kind, bug=bug,
               what=f"{how} ({reported:.6g}) vs the global L2 norm of all parameter "
                    f"gradients recomputed in float64 ({norm:.6g}){hint}",
               details={"grad_norm": norm, "monitor": reported})
    return norm


def _monitored(hooks: Any, loss_fn: Any, batch: Any, monitor: Any) -> tuple[float, str]:
    """What the user's monitor reports, and how it was called."""
    if isinstance(monitor, AfterBackward):
        hooks.backward(loss_fn, batch)
        with hooks.seeded():
            reported = float(monitor.fn(hooks.monitor_argument()))
        return reported, "AfterBackward monitor, called after the audit's backward"
    with hooks.seeded():
        return float(monitor(hooks.model, batch)), "grad_norm_monitor"


def _diagnose(reported: float, norm: float, grads: Mapping[str, np.ndarray],
                      loss: float | None, dtype: str, model: ErrorModel
              ) -> tuple[BugClass, str]:
    if loss is not None:
        for label, value in (("sqrt(|loss|)", abs(loss) ** 0.5), ("|loss|", abs(loss)),
                             ("loss^2", loss * loss)):
            if matches(reported, value, abs(value) + abs(reported), dtype, model=model):
                return BugClass.LOSS_PROXY_NORM, (
                    f"; the monitor reports {label} = {value:.6g} (loss {loss:.6g}): a "
                    "loss-magnitude proxy, not a gradient norm")
    per = {k: float(np.linalg.norm(g)) for k, g in grads.items()}
    others = [("the sum of per-parameter norms", sum(per.values())),
              ("twice the norm (gradients accumulated twice)", 2.0 * norm),
              ("the squared norm", norm * norm)]
    others += [(f"the norm of {k!r} alone", v) for k, v in per.items()]
    for label, value in others:
        if value and matches(reported, value, abs(value) + abs(reported), dtype, model=model):
            return BugClass.NORM_NOT_GLOBAL_L2, f"; the monitor reports {label} ({value:.6g})"
    return BugClass.NORM_NOT_GLOBAL_L2, ""


# -- train step ---------------------------------------------------------------------------

class _Caller:
    """Calls the user's step, threading a functional optimizer state when one is declared."""

    def __init__(self, spec: TrainStep) -> None:
        self.spec = spec
        self.threads = spec.state is not _NO_STATE
        self.state = spec.state

    def __call__(self, model: Any, batch: Any) -> Any:
        if not self.threads:
            return self.spec.fn(model, batch)
        out = self.spec.fn(model, self.state, batch)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError("a TrainStep with state= must return (params, state)")
        self.state = out[1]
        return out[0]


def _is_torch_optimizer(obj: Any) -> bool:
    return bool(_state.optimizers([obj]))


def _model(spec: TrainStep, found: list[Any], params: Mapping[str, Any]) -> tuple[Any, str]:
    if isinstance(spec.optimizer, (SGD, Adam)):
        return spec.optimizer, "declared"
    if spec.optimizer is not None and _is_torch_optimizer(spec.optimizer):
        return from_torch(spec.optimizer, params), "declared"
    if spec.lr is not None:
        return SGD(spec.lr), "declared"
    opts = _state.optimizers(found)
    if len(opts) == 1:
        return from_torch(opts[0], params), "found in train_step"
    return None, ("no optimizer declared" if not opts else
                  f"{len(opts)} optimizers found in train_step; declare which with optimizer=")


def check_train_step(ctx: ProbeContext, hooks: Any, loss_fn: Any, batch: Any, train_step: Any,
                     stopped: set[str]) -> None:
    """Repeatability and the effective step of the user's step (see module doc)."""
    spec = train_step if isinstance(train_step, TrainStep) else TrainStep(train_step)
    found = _state.discover(spec.fn, (spec.optimizer if _is_torch_optimizer(spec.optimizer)
                                      else None, spec.scheduler, spec.scaler))
    objs = _state.snapshot(found)
    start = hooks.snapshot()
    try:
        _repeatable(ctx, hooks, batch, spec, objs, found)
        _state.restore(objs)
        hooks.restore(start)
        _steps(ctx, hooks, loss_fn, batch, spec, stopped, found)
    finally:
        _state.restore(objs)
        hooks.restore(start)


def _repeatable(ctx, hooks, batch, spec: TrainStep, objs, found) -> None:
    values = hooks.parameter_values()

    def twice() -> tuple[dict, dict]:
        hooks.zero_grad()
        hooks.run_user_step(_Caller(spec), batch)
        first = hooks.parameter_values()
        hooks.assign(values)  # stored gradients stay as the step left them
        _state.restore(objs)
        hooks.run_user_step(_Caller(spec), batch)
        return first, hooks.parameter_values()

    ran = attempt("train_step", twice)
    if isinstance(ran, AdapterFailure):
        ctx.emit("train_step", Status.ERROR, f"train_step raised {ran.quoted(QUOTE)}")
        return
    first, second = ran
    d1 = {k: first[k] - values[k] for k in values}
    d2 = {k: second[k] - values[k] for k in values}
    mag = {k: np.abs(values[k]) + np.abs(first[k]) + np.abs(second[k]) for k in values}
    ctx.compare("train_step.repeatable", d2, d1, mag, dtype=hooks.dtype,
                bug=BugClass.RESET_NOT_RESETTING,
                what="update of a second train_step run from the same parameters and optimizer "
                     f"state (restored: {_state.describe(found)}) vs the first (gradients left "
                     "by a step must be reset before the next)")


def _steps(ctx, hooks, loss_fn, batch, spec: TrainStep, stopped, found) -> None:
    names = hooks.parameter_names()
    try:
        model, origin = _model(spec, found, getattr(hooks, "_params", {}))
    except NotImplementedError as exc:
        ctx.emit("train_step.effective_step", Status.SKIPPED, f"{exc}; the effective step is "
                 "not measured")
        return
    if model is None:
        ctx.emit("train_step.effective_step", Status.SKIPPED, f"{origin}: declare lr (and "
                 "max_norm) or optimizer= with gradcheck.TrainStep to measure the effective step")
        return
    seed0 = hooks.rng_seed
    try:
        # the user's step, loss and declarations, with the harness's predictions between
        # them, through the boundary as one: whatever raises fails this check, not the audit
        ran = attempt("train_step", _step_by_step, ctx, hooks, loss_fn, batch, spec, stopped,
                      model, origin, names, found)
    finally:
        hooks.rng_seed = seed0
    if isinstance(ran, AdapterFailure):
        ctx.emit("train_step.effective_step", Status.ERROR,
                 f"train_step raised {ran.quoted(QUOTE)}")


def _step_by_step(ctx, hooks, loss_fn, batch, spec: TrainStep, stopped, model, origin,
                  names, found) -> None:
    """``spec.steps`` steps of the user's, each compared with the declared optimizer's."""
    targets_named = {tk for tu in spec.target_updates for tk, _ in tu.pairs(names)}
    state = model.initial_state(names)
    caller = _Caller(spec)
    seed0 = hooks.rng_seed
    first_grads = None
    scheds = _declared.schedulers(found)
    advances: list[list[int]] = []
    lrs: list[tuple[float, float]] = []
    state_p = state_m = state
    masks: list[dict] = []
    earlier: list[tuple[int, BugClass]] = []  # steps that failed with a named cause
    hooks.zero_grad()
    for t in range(max(1, int(spec.steps))):
        hooks.rng_seed = None if seed0 is None else seed0 + 7919 * t
        before = hooks.parameter_values()
        left = hooks.snapshot()
        hooks.zero_grad()
        hooks.backward(loss_fn, batch)
        raw = hooks.gradients()
        hooks.restore(left)  # stored gradients as the previous step left them
        grads = filled(raw, before)
        first_grads = grads if first_grads is None else first_grads
        moving = [k for k in names if k not in stopped and raw[k] is not None]
        epochs = _declared.scheduler_epochs(scheds)
        lr0 = _group_lr(scheds)
        # the diagnoses' hyper-parameters: this step's, read before the user's step runs (a
        # scheduler inside the step changes the live lr of a torch optimizer)
        fixed = _AsBefore(model, names, t)
        noise = step_noise.measure(hooks, loss_fn, batch, grads, before, spec.micro_batches,
                                   ctx.error_model)
        optimizer_before = _optimizer_state(model, names)
        with _declared.recording_clip_value(spec.fn) as clips:
            hooks.run_user_step(caller, batch)
        advances.append([b - a for a, b in zip(epochs, _declared.scheduler_epochs(scheds),
                                                strict=True)])
        lrs.append((lr0, _group_lr(scheds)))
        clip_value = spec.clip_value if spec.clip_value is not None else (
            clips[-1] if clips else None)
        clip_read = clips[-1] if clips else None
        preds = _preds(fixed, before, grads, moving, state, t, spec, hooks,
                       clip_value=clip_value)
        # per clip epsilon: the prediction and its allowance from the gradient's rounding
        tried = []
        for e, p in zip(_eps_all(spec, hooks), preds, strict=True):
            pl, mi = (predict(fixed, before, step_noise.shifted(grads, noise, sign), moving,
                              st, t, max_norm=spec.max_norm, eps=e, ties=spec.ties,
                              targets=spec.target_updates, clip_value=clip_value)
                      for sign, st in ((1.0, state_p), (-1.0, state_m)))
            tried.append((p, pl, mi, step_noise.propagated(p.values, pl.values, mi.values)))
        after = hooks.parameter_values()
        pred, plus, minus, slack = min(tried, key=lambda x: assess(
            after, x[0].values, x[0].magnitude, hooks.dtype, model=ctx.error_model,
            measured=x[3]).ratio)
        masks.append({k: noise.below[k] for k in moving})
        _compare_step(ctx, hooks, fixed, origin, spec, t, before, after, grads, moving,
                      state, pred, first_grads, targets_named, stopped,
                      (clip_value, clip_read), slack=slack, noise=noise,
                      unresolved=step_noise.unresolved(masks), loss_fn=loss_fn,
                      batch=batch, earlier=earlier)
        _check_received(ctx, hooks, fixed, spec, t, before, grads, moving, pred, noise,
                        optimizer_before, names, loss_fn, batch)
        state, state_p, state_m = pred.state, plus.state, minus.state
    if scheds:
        _check_schedulers(ctx, scheds, advances, lrs)


def _eps_all(spec: TrainStep, hooks: Any) -> list[float]:
    return sorted({0.0, hooks.clip_semantics.epsilon}) if spec.max_norm is not None else [0.0]


def _group_lr(scheds: Sequence[Any]) -> float:
    """The first param group's ``lr`` of the first scheduler's optimizer (nan: none)."""
    try:
        return float(scheds[0].optimizer.param_groups[0]["lr"])
    except (IndexError, KeyError, AttributeError, TypeError):
        return float("nan")


def _check_schedulers(ctx, scheds, advances: list[list[int]], lrs) -> None:
    """Each LR scheduler must advance at most once per training step (``last_epoch``); a
    scheduler stepped twice decays the ``lr`` the optimizer reads twice as fast, which the
    step's comparison (it reads the live ``lr``) cannot see."""
    kinds = ", ".join(type(o).__name__ for o in scheds)
    per = [max(a) if a else 0 for a in advances]
    shown = ", ".join(map(str, per))
    lr_txt = "; lr " + " -> ".join(f"{b:.6g}" for b in [lrs[0][0]] + [b for _, b in lrs])
    if any(p > 1 for p in per):
        worst = max(per)
        ctx.emit("train_step.scheduler", Status.FAILED,
                 f"{kinds}: last_epoch advanced by {shown} over the {len(per)} audited training "
                 f"step(s): scheduler.step() runs {worst} times per training step (inside the "
                 "micro-batch loop, or in the step and again in the loop), so the schedule "
                 f"runs {worst}x too fast{lr_txt}",
                 bug=BugClass.SCHEDULER_STEPPED_TWICE,
                 details={"advances": per, "schedulers": kinds})
        return
    how = ("stepped once per training step" if all(p == 1 for p in per) else
           "not stepped by the training step (stepped by the loop, e.g. per epoch)"
           if all(p == 0 for p in per) else "stepped at most once per training step")
    ctx.emit("train_step.scheduler", Status.PASSED, f"{kinds}: last_epoch advanced by "
             f"{shown} over the {len(per)} audited step(s): {how}{lr_txt}",
             details={"advances": per, "schedulers": kinds})


def _preds(model, before, grads, moving, state, t, spec, hooks, **kw) -> list[Prediction]:
    """One prediction per clip epsilon the engine may use (0 and the documented one)."""
    ties = kw.pop("ties", spec.ties)
    kw.setdefault("clip_value", spec.clip_value)
    return [predict(model, before, grads, moving, state, t, max_norm=spec.max_norm, eps=e,
                    ties=ties, targets=spec.target_updates, **kw)
            for e in _eps_all(spec, hooks)]


def _pick(preds: list[Prediction], after: Mapping[str, np.ndarray], dtype: str,
          error_model: ErrorModel, slack: Mapping[str, np.ndarray] | None = None
          ) -> Prediction:
    return min(preds, key=lambda p: assess(after, p.values, p.magnitude, dtype,
                                           model=error_model, measured=slack).ratio)


def _compare_step(ctx, hooks, model, origin, spec, t, before, after, grads, moving, state,
                  pred, first_grads, targets_named, stopped, clips, *, slack, noise, unresolved,
                  loss_fn, batch, earlier: list) -> None:
    name = "train_step.effective_step" + ("" if t == 0 else f"[step {t + 1}]")
    clip_value, clip_read = clips
    label = "the gradient's rounding level through the optimizer"
    a = ctx.assess(after, pred.values, pred.magnitude, hooks.dtype, measured=slack,
                   measured_label=label)
    factors = per_parameter(after, pred.values, before, list(before))
    bug, hint = BugClass.STEP_MISMATCH, ""
    if not a.ok:
        bug, hint = _clip_value_cause(hooks, model, spec, t, before, after, grads, moving,
                                      state, clips, ctx.error_model)
        if not hint:
            bug, hint = _explain(hooks, model, spec, t, before, after, grads, moving, state,
                                 pred, first_grads, stopped, targets_named, factors,
                                 ctx.error_model, slack, loss_fn, batch, noise.below,
                                 clip_value=clip_value)
        if bug is BugClass.STEP_MISMATCH and earlier:
            t0, bug = earlier[0]
            hint = (f": follows from step {t0 + 1}'s mismatch ([{bug.value}]): the optimizer "
                    "state and parameters the step carries differ from then on") + hint
        elif bug is not BugClass.STEP_MISMATCH:
            earlier.append((t, bug))
    flat_a = np.concatenate([np.ravel(after[k] - before[k]) for k in before])
    flat_e = np.concatenate([np.ravel(pred.values[k] - before[k]) for k in before])
    ee = float(flat_e @ flat_e)
    factor = float(flat_a @ flat_e) / ee if ee > 0 else None
    shown = "n/a" if factor is None else f"{factor:.6g}"
    clip = ("no clip" if spec.max_norm is None else
            f"clip to max_norm={spec.max_norm} (gradient norm {pred.norm:.6g}, s={pred.s:.6g})")
    if clip_value is not None:
        clip += (f", each element clipped to +-{clip_value:g} ("
                 + ("declared" if spec.clip_value is not None else
                    "read from the step's clip_grad_value_ call") + ")")
    extra = "".join([f", {len(spec.ties)} tie(s)" if spec.ties else "",
                     f", {len(spec.target_updates)} target update(s)"
                     if spec.target_updates else "",
                     f", {spec.micro_batches} micro-batches" if spec.micro_batches else ""])
    per = "" if a.ok else f"; per parameter (update / intended): {breakdown(factors)}"
    ctx.record(name, a, bug=bug, dtype=hooks.dtype,
               what=f"step {t + 1}: parameters after train_step vs {model.describe()} ({origin}) "
                    f"applied to the true gradient, {clip}{extra}; effective step = {shown} x "
                    f"intended{hint}{per}{step_noise.describe_unresolved(unresolved)}",
               details={"effective_factor": factor, "clip_factor": pred.s, "step": t + 1,
                        "per_parameter": factors, "optimizer": model.describe(),
                        "gradient_noise": dict(noise.sigma),
                        "micro_batches_assumed": noise.micro_batches,
                        "below_rounding_level": {k: list(v) for k, v in unresolved.items()}})


class _AsBefore:
    """The declared optimizer with the hyper-parameters it had before the user's step (a
    scheduler inside the step changes a torch optimizer's live ``lr``); state reads stay live."""

    def __init__(self, model: Any, names: Sequence[str], t: int) -> None:
        self.model, self._t = model, t
        self._hyper = {k: model.hyper(k, t) for k in names}
        self._described = model.describe()

    def hyper(self, name: str, t: int) -> dict[str, Any] | None:
        if t == self._t and name in self._hyper:
            return self._hyper[name]
        return self.model.hyper(name, t)

    def describe(self) -> str:
        return self._described

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.model, attr)


class _Rescaled:
    """The declared optimizer with some hyper-parameters multiplied (a cause's variation)."""

    def __init__(self, model: Any, **factors: float) -> None:
        self.model, self.factors = model, factors

    def hyper(self, name: str, t: int) -> dict[str, Any] | None:
        h = self.model.hyper(name, t)
        if h is None:
            return None
        return {**h, **{k: h[k] * f for k, f in self.factors.items()}}


def _clip_value_cause(hooks, model, spec, t, before, after, grads, moving, state, clips,
                      error_model: ErrorModel) -> tuple[BugClass, str]:
    """A mismatch explained by an elementwise clip at another value: the one the step's
    ``clip_grad_value_`` call passed (when a different one is declared), or, undeclared and
    unread, the value a plain-SGD update implies (``max |update| / lr``)."""
    declared, read = spec.clip_value, clips[1]
    cands: list[float] = []
    if read is not None and declared is not None and read != declared:
        cands.append(read)
    hypers = [model.hyper(k, t) for k in moving]
    if not any(h is None for h in hypers) and all(
            h["kind"] == "sgd" and not h["momentum"] and not h["weight_decay"]
            for h in hypers) and hypers:
        lr = {h["lr"] for h in hypers}
        if len(lr) == 1 and (lr0 := lr.pop()) > 0:
            implied = max(float(np.max(np.abs(after[k] - before[k]))) for k in moving) / lr0
            if implied > 0 and implied != declared:
                cands.append(implied)
    for c in cands:
        try:
            alt = _pick(_preds(model, before, grads, moving, state, t, spec, hooks,
                               clip_value=c), after, hooks.dtype, error_model)
        except (ValueError, ArithmeticError):
            continue
        if matches(after, alt.values, alt.magnitude, hooks.dtype, model=error_model):
            how = "the step's clip_grad_value_ call" if c == read else "the update"
            said = (f"declared clip_value={declared:g}" if declared is not None else
                    "no clip_value declared")
            return BugClass.CLIP_VALUE_MISMATCH, (
                f": each gradient element was clipped to +-{c:.6g} ({how}), {said}: "
                + ("the clip value in the code differs from the declared one" if declared
                   is not None else f"declare TrainStep(clip_value={c:.4g}) if intended"))
    pred = _pick(_preds(model, before, grads, moving, state, t, spec, hooks,
                        clip_value=clips[0]), after, hooks.dtype, error_model)
    if hooks.dtype == "float64" and matches(after, pred.values, pred.magnitude, "float32",
                                            model=error_model):
        return BugClass.PRECISION_LOST_IN_STEP, (
            ": the step agrees with the intended one only to float32 rounding although the "
            "model is float64: a float32 accumulator or cast on the way (optax.MultiSteps "
            "accumulates in float32 unless accumulator_dtype=jnp.float64; a float32 constant "
            "or buffer in the update)")
    if hypers and all(h is not None and h["kind"] == "adam" for h in hypers):
        doubled = {k: before[k] + 2.0 * (pred.values[k] - before[k]) for k in before}
        if matches(after, doubled, {k: 2.0 * pred.magnitude[k] for k in before}, hooks.dtype,
                   model=error_model):
            return BugClass.TWO_UPDATES, (
                ": the step applied the same Adam update twice (optax.apply_updates or "
                "p -= update run twice with one update; under Adam a doubled gradient would "
                "not double the step)")
        flipped = _Flipped(model, "amsgrad")
        alt = _pick(_preds(flipped, before, grads, moving, state, t, spec, hooks,
                           clip_value=clips[0]), after, hooks.dtype, error_model)
        if matches(after, alt.values, alt.magnitude, hooks.dtype, model=error_model):
            was = bool(hypers[0].get("amsgrad"))
            return BugClass.STEP_MISMATCH, (
                f": the step matches Adam with amsgrad={not was}, declared amsgrad={was} (the "
                "optimizer the code builds and the declaration disagree)")
    return BugClass.STEP_MISMATCH, ""


class _Flipped:
    """An optimizer model with one boolean hyper-parameter negated (a diagnosis variant)."""

    def __init__(self, model: Any, key: str) -> None:
        self._model, self._key = model, key

    def hyper(self, name: str, t: int) -> dict[str, Any] | None:
        h = self._model.hyper(name, t)
        return None if h is None else {**h, self._key: not h.get(self._key)}

    def describe(self) -> str:
        return self._model.describe()


def _explain(hooks, model, spec, t, before, after, grads, moving, state, pred, first_grads,
             stopped, targets_named, factors, error_model: ErrorModel, slack, loss_fn, batch,
             below, clip_value: float | None) -> tuple[BugClass, str]:
    dt = hooks.dtype

    def same(actual: Any, expected: Any, magnitude: Any, measured: Any = None) -> bool:
        return matches(actual, expected, magnitude, dt, model=error_model, measured=measured)

    for tie in spec.ties:
        d = after[tie.b] - tie.of(after[tie.a])
        # a tie holds where the two agree to float32 rounding of the tied value
        if np.any(np.abs(d) > error_model.rounding(np.abs(after[tie.b]) + 1e-30, "float32")):
            return BugClass.TIE_BROKEN, (f": declared Tie({tie.a!r}, {tie.b!r}) not kept: after "
                                         f"the step they differ by up to {np.max(np.abs(d)):.3g}")
    for tu in spec.target_updates:
        pairs = tu.pairs(list(before))
        if any(not same(after[tk], pred.values[tk], pred.magnitude[tk])
               for tk, _ in pairs):
            tau = _fit_tau(before, after, pairs)
            return BugClass.TARGET_UPDATE_MISMATCH, (
                f": the target {tu.target!r} moved as a Polyak update with tau = {tau:.6g}, "
                f"declared tau = {tu.tau:g}")
    moved = [k for k in stopped if k not in targets_named and
             not same(after[k], before[k], 2 * np.abs(before[k]))]
    if moved:
        for tu_src in _guess_sources(moved, list(before)):
            if any(np.shape(before[a]) != np.shape(before[b]) for a, b in tu_src):
                continue  # not a copy of another layer (a frozen layer the step changed)
            tau = _fit_tau(before, after, tu_src)
            fit = {tk: (1.0 - tau) * before[tk] + tau * after[sk] for tk, sk in tu_src}
            if np.isfinite(tau) and 0.0 < tau <= 1.0 and all(
                    same(after[tk], fit[tk], 2 * (np.abs(after[tk]) + np.abs(after[sk])))
                    for tk, sk in tu_src):
                return BugClass.TARGET_UPDATE_MISMATCH, (
                    f": parameters declared stopped were changed by the step "
                    f"({', '.join(moved[:4])}) and no target update was declared; it matches a "
                    f"Polyak update from {tu_src[0][1]!r} with tau = {tau:.6g}: declare "
                    "TargetUpdate(target, source, tau)")
        return BugClass.FROZEN_PARAMETERS_UPDATED, (
            f": parameters declared stopped (frozen) were changed by the step "
            f"({', '.join(moved[:4])}{', ...' if len(moved) > 4 else ''}) and they follow no "
            "target update: set requires_grad=False on them (or detach their output) and leave "
            "them out of the optimizer")
    for k in moving:
        for a_name in before:
            if a_name != k and before[a_name].shape == after[k].shape and \
                    same(after[k], after[a_name], np.abs(after[a_name]) * 2) and \
                    not same(before[k], before[a_name], np.abs(before[a_name]) * 2):
                return BugClass.TIE_BROKEN, (f": {k!r} was set to {a_name!r} by the step (a sync "
                                             f"by copy): declare Tie({a_name!r}, {k!r})")

    def alt(grads_=None, model_=None, state_=None, **kw: Any) -> Prediction:
        g = grads if grads_ is None else grads_
        kw.setdefault("clip_value", clip_value)
        return _pick(_preds(model if model_ is None else model_, before, g, moving,
                            state if state_ is None else state_, t, spec, hooks, **kw),
                     after, dt, error_model, slack)

    def variant(**kw: Any) -> Prediction:
        g = kw.pop("grads", None)
        return alt(g, **kw)

    def hit(p: Prediction, grow: float = 1.0) -> bool:
        m = {k: pred.magnitude[k] + p.magnitude[k] for k in p.magnitude}
        return same(after, p.values, m, None if slack is None else
                    {k: grow * v for k, v in slack.items()})

    found = _named_variations(hooks, model, spec, t, before, grads, moving, state, alt, hit,
                              loss_fn, batch, first_grads)
    if found is not None:
        return found
    flat_a = np.concatenate([np.ravel(after[k] - before[k]) for k in moving]) if moving else \
        np.zeros(0)
    flat_e = np.concatenate([np.ravel(pred.values[k] - before[k]) for k in moving]) if moving \
        else np.zeros(0)
    ee = float(flat_e @ flat_e)
    factor = float(flat_a @ flat_e) / ee if ee > 0 else None
    hypers = [model.hyper(k, t) for k in moving]
    linear = all(h is None or h["kind"] == "sgd" for h in hypers)
    bug, hint = diagnose(after, pred.magnitude, dt, variant, s=pred.s, norm=pred.norm,
                         max_norm=spec.max_norm, step=t, factor=factor, linear=linear,
                         first_grads=first_grads, model=error_model, slack=slack,
                         micro_batches=spec.micro_batches)
    if bug is BugClass.STEP_MISMATCH and not hint:
        # a parameter whose gradient is all rounding (identically zero) need not move
        off = [k for k in moving if factors.get(k, 1.0) == 0.0
               and not np.all(below.get(k, False))]
        if off:
            hint = (f": {', '.join(off[:4])} did not move although it has a gradient (frozen, "
                    "or missing from the optimizer's parameter list)")
    return bug, hint


def _named_variations(hooks, model, spec, t, before, grads, moving, state, alt, hit, loss_fn,
                      batch, first_grads=None) -> tuple[BugClass, str] | None:
    """The causes named by a variation of the declared step (see the module doc of
    :mod:`.step_diagnosis` and :mod:`.micro_batches`), or None."""
    if spec.ties:
        try:
            p = alt(ties=tuple(Tie(x.a, x.b, x.transpose, summed=False) for x in spec.ties))
        except _CANNOT_EXPRESS:
            p = None
        if p is not None and hit(p):
            names = ", ".join(f"{x.a!r} and {x.b!r}" for x in spec.ties)
            return BugClass.TIE_GRADIENTS_NOT_SUMMED, (
                f": the step updated the tied weight ({names}) with one side's gradient only and "
                "copied it to the other: the tied weight's gradient is the sum of both")
    hypers = [h for h in (model.hyper(k, t) for k in moving) if h is not None]
    if t > 0:
        # under Adam a stale gradient (step 1's) and a fresh state can both fit a step: the
        # gradient that explains it is the more specific cause (named by the factor diagnoses)
        stale = first_grads is not None and hit(alt(grads_=first_grads))
        fresh: dict[str, dict] = {k: {} for k in before}
        if not stale and hit(alt(state_=fresh)):
            return BugClass.OPTIMIZER_STATE_LOST, (
                f": step {t + 1} matches the declared optimizer started from an empty state "
                "(momentum buffers / Adam moments and step count lost): the optimizer is "
                "rebuilt (or its state reset) every step; create it once, outside the step")
    if any(h.get("weight_decay") for h in hypers):
        wd_grads = {k: np.asarray(grads[k]) + (model.hyper(k, t) or {}).get("weight_decay", 0.0)
                    * before[k] for k in grads}
        for p in (alt(model_=_Rescaled(model, weight_decay=2.0)), alt(grads_=wd_grads)):
            if hit(p):
                return BugClass.WEIGHT_DECAY_TWICE, (
                    ": the step matches the declared optimizer with its weight decay applied "
                    "twice (an L2 term in the loss, or a manual decay, on top of the optimizer's "
                    "weight_decay): keep one")
    k_mb = spec.micro_batches
    if not k_mb or k_mb < 2 or loss_fn is None:
        return None
    left = hooks.snapshot()
    try:
        parts, found = _micro_variants(hooks, loss_fn, batch, spec, before)
        for v in found:
            kw: dict[str, Any] = {} if v.clipped_after else {"s": 1.0}
            if hit(alt(grads_=v.grads, **kw)):
                return v.bug, v.hint
        inside = _steps_inside(hooks, model, spec, t, before, moving, state, loss_fn, parts)
        if inside is not None and hit(inside, float(len(parts))):
            return BugClass.STEP_INSIDE_ACCUMULATION, (
                f": the step matches {len(parts)} optimizer updates, one per micro-batch "
                "(optimizer.step() inside the accumulation loop): step once, after the loop")
    finally:
        hooks.restore(left)
    return None


def _micro_variants(hooks, loss_fn, batch, spec, before
                    ) -> tuple[list[Any], list[micro_batches.Variant]]:
    """The micro-batches and the accumulation bugs' gradients at ``before`` (the caller
    restores the hooks)."""
    hooks.assign(before)
    parts = micro_batches.split_batch(batch, int(spec.micro_batches), spec.split)
    sizes = [micro_batches.length(p) or 0 for p in parts]
    gs = micro_batches.gradients(hooks, loss_fn, parts, before)
    return parts, micro_batches.variants(gs, sizes, spec.max_norm, _eps_all(spec, hooks))


def _steps_inside(hooks, model, spec, t, before, moving, state, loss_fn, parts
                  ) -> Prediction | None:
    """``K`` updates, each with one micro-batch's gradient / K at the parameters the previous
    left (the caller restores the hooks)."""
    vals, st = dict(before), state
    pred = None
    for part in parts:
        hooks.assign(vals)
        g = micro_batches.gradients(hooks, loss_fn, [part], vals)[0]
        g = {k: v / len(parts) for k, v in g.items()}
        pred = predict(model, vals, g, moving, st, t, max_norm=spec.max_norm, eps=0.0,
                       ties=spec.ties, targets=spec.target_updates)
        vals, st = pred.values, pred.state
    return pred


def _fit_tau(before, after, pairs) -> float:
    num = den = 0.0
    for tk, sk in pairs:
        d = np.ravel(after[tk] - before[tk])
        r = np.ravel(after[sk] - before[tk])
        num += float(d @ r)
        den += float(r @ r)
    return num / den if den else float("nan")


def _guess_sources(moved: list[str], names: list[str]) -> list[list[tuple[str, str]]]:
    out = []
    prefix = moved[0].split(".")[0]
    for n in names:
        other = n.split(".")[0]
        if other != prefix:
            pairs = [(m, other + m[len(prefix):]) for m in moved if m.startswith(prefix + ".")]
            if pairs and all(s in names for _, s in pairs):
                out.append(pairs)
                break
    return out


# -- the gradient the optimizer received (Adam) ----------------------------------------------

def _optimizer_state(model: Any, names: Sequence[str]) -> dict[str, dict] | None:
    """The live state of a ``torch.optim`` Adam/AdamW read as the declaration, else None."""
    if getattr(model, "kind", None) not in ("Adam", "AdamW"):
        return None
    return model.initial_state(tuple(names))


def _check_received(ctx, hooks, model, spec, t, before, grads, moving, pred, noise,
                    optimizer_before, names, loss_fn, batch) -> None:
    """Under Adam the step hides a gradient's scale; its first moment does not: the gradient
    the optimizer received is ``(m_after - beta1 m_before) / (1 - beta1)``, compared with the
    clipped true gradient (plus ``wd p`` for Adam's coupled decay)."""
    if optimizer_before is None:
        return
    after_state = model.initial_state(tuple(names))
    tied = {x.b for x in spec.ties} | {x.a for x in spec.ties}
    got, exp, mag, slack = {}, {}, {}, {}
    for k in moving:
        h = model.hyper(k, t)
        m1 = after_state.get(k, {}).get("exp_avg")
        if h is None or m1 is None or k in tied:
            continue
        b1 = float(h["betas"][0])
        m0 = optimizer_before.get(k, {}).get("exp_avg", np.zeros_like(m1))
        got[k] = (m1 - b1 * m0) / (1.0 - b1)
        e = pred.s * np.asarray(grads[k], dtype=np.float64)
        if h["weight_decay"] and not h["decoupled"]:
            e = e + h["weight_decay"] * before[k]
        exp[k] = e
        mag[k] = (np.abs(m1) + b1 * np.abs(m0)) / (1.0 - b1) + np.abs(e)
        slack[k] = pred.s * noise.level[k]
    if not got:
        return
    name = "train_step.received_gradient" + ("" if t == 0 else f"[step {t + 1}]")
    a = ctx.assess(got, exp, mag, hooks.dtype, measured=slack,
                   measured_label="the gradient's rounding level")
    bug, hint = BugClass.RECEIVED_GRADIENT_SCALED, ""
    if not a.ok and a.factor is not None:
        bug, hint = _received_factor(ctx, hooks, got, exp, mag, slack, a.factor,
                                     spec.micro_batches)
    if not a.ok and bug is BugClass.RECEIVED_GRADIENT_SCALED and \
            _decay_in_loss(ctx, hooks, model, spec, t, before, grads, got, mag, slack):
            bug, hint = BugClass.WEIGHT_DECAY_TWICE, (
                "; the optimizer received the gradient plus weight_decay x the parameters on "
                "top of its own weight decay (an L2 term in the loss, or a manual decay): keep "
                "one")
    if not a.ok and spec.micro_batches and spec.micro_batches >= 2 and \
            bug is BugClass.RECEIVED_GRADIENT_SCALED:
        named = _received_variant(ctx, hooks, model, spec, t, before, got, mag, slack,
                                  loss_fn, batch)
        if named is not None:
            bug, hint = named
    ctx.record(name, a, bug=bug, dtype=hooks.dtype,
               what=f"step {t + 1}: the gradient {model.describe()} received (from its first "
                    f"moment: (exp_avg after - beta1 x exp_avg before) / (1 - beta1)) vs the "
                    f"true gradient{' clipped' if spec.max_norm is not None else ''}{hint}",
               details={"step": t + 1, "received_factor": a.factor})


def _received_factor(ctx, hooks, got, exp, mag, slack, factor: float,
                     k_mb: int | None) -> tuple[BugClass, str]:
    """Name a constant factor between the received and the true gradient."""
    for c in sorted({round(factor), 1.0 / max(1, round(1.0 / factor)) if factor > 0 else 0.0}):
        if c <= 0 or c == 1.0:
            continue
        scaled = {k: c * v for k, v in exp.items()}
        grown = {k: c * mag[k] for k in mag}
        if not ctx.matches(got, scaled, grown, hooks.dtype,
                           measured={k: (1.0 + c) * v for k, v in slack.items()}):
            continue
        if c >= 2 and c == int(c):
            n = int(c)
            return BugClass.MICRO_BATCHES_SUMMED, (
                f"; the optimizer received {n} x the true gradient: {n} micro-batch gradients "
                f"summed without dividing the loss by {n} (or {n} backwards without a reset)"
                + ("" if k_mb in (None, n) else f"; {k_mb} micro-batches were declared"))
        return BugClass.RECEIVED_GRADIENT_SCALED, (
            f"; the optimizer received 1/{round(1 / c)} of the true gradient: the loss divided "
            "once too often (by the number of micro-batches twice, or averaged over an extra "
            "axis)")
    return BugClass.RECEIVED_GRADIENT_SCALED, (
        f"; the optimizer received {factor:.4g} x the true gradient (least-squares factor)")


def _received_variant(ctx, hooks, model, spec, t, before, got, mag, slack, loss_fn, batch
                      ) -> tuple[BugClass, str] | None:
    """The accumulation bug whose gradient is the one the optimizer received, or None."""
    left = hooks.snapshot()
    try:
        _, found = _micro_variants(hooks, loss_fn, batch, spec, before)
    finally:
        hooks.restore(left)
    for v in found:
        s = 1.0
        if v.clipped_after and spec.max_norm is not None:
            norm = global_norm(v.grads)
            s = min(1.0, spec.max_norm / norm) if norm else 1.0
        exp = {}
        for k in got:
            h = model.hyper(k, t)
            e = s * v.grads[k]
            if h["weight_decay"] and not h["decoupled"]:
                e = e + h["weight_decay"] * before[k]
            exp[k] = e
        if ctx.matches(got, exp, {k: mag[k] + np.abs(exp[k]) for k in mag}, hooks.dtype,
                       measured=slack):
            return v.bug, v.hint.replace(": the step", ": the optimizer received the gradient "
                                         "of a step that", 1)
    return None


def _decay_in_loss(ctx, hooks, model, spec, t, before, grads, got, mag, slack) -> bool:
    """Whether the optimizer received the gradient of the loss plus an L2 term ``wd/2 |p|^2``
    (clipped with it) on top of its own weight decay."""
    wd = {k: (model.hyper(k, t) or {}).get("weight_decay", 0.0) * before[k] for k in got}
    if not any(np.any(v) for v in wd.values()):
        return False
    g2 = {k: np.asarray(grads[k], dtype=np.float64) + wd[k] for k in got}
    for e in _eps_all(spec, hooks):
        sc = 1.0
        if spec.max_norm is not None:
            norm = global_norm(g2)
            sc = min(1.0, spec.max_norm / (norm + e)) if norm else 1.0
        cand = {}
        for k in got:
            h = model.hyper(k, t) or {}
            c = sc * g2[k]
            if h.get("weight_decay") and not h.get("decoupled"):
                c = c + wd[k]
            cand[k] = c
        if ctx.matches(got, cand, {k: mag[k] + np.abs(wd[k]) for k in got}, hooks.dtype,
                       measured=slack):
            return True
    return False
