"""Model audit: the gradient-flow map of a user's model, checked against finite differences.

:func:`audit` takes the model as the framework holds it (a ``torch.nn.Module``, a JAX pytree of
parameters, a dict of NumPy arrays), the loss ``loss_fn(model, batch)`` and one batch, and
reports for every parameter under the framework's own registry name (``named_parameters()``;
JAX key paths such as ``"ssm_0.A"``):

* its *flow status*, from AD (does a gradient arrive?) compared with FD-measured dependence
  (does the loss change when the parameter moves?) and with what the user declared stopped:
  :class:`FlowStatus` ``flows``, ``blocked as intended``, ``blocked unintentionally`` (host round
  trips such as ``.item()``/``.numpy()``/``.tolist()``, a detach in the input path: the cut points
  and the parameters upstream of each are reported where the engine can trace them), ``leak``
  (declared stopped, yet a gradient flows) or ``unused``;
* a projected FD check of its gradient (float64 copy of the model, random Gaussian directions);
* the true global gradient norm against the user's ``grad_norm_monitor`` (loss-magnitude proxies);
* with ``train_step``, repeatability (gradients reset between steps) and the effective step
  against ``lr x clipped gradient`` (see :mod:`gradcheck.checks._audit_steps`).

The model is left as found: parameter values restored, stored gradients reset.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import fd, stream, tolerance
from ..backends.registry import get_backend
from ..errors import InvalidArgument
from ..results import CheckKind, Report, Status
from . import _args
from ._audit_steps import TrainStep, check_monitor, check_train_step
from ._probing import BugClass, ProbeContext, assess, describe_exc, filled

__all__ = ["AuditReport", "FlowStatus", "ParameterFlow", "TrainStep", "audit"]

_PROBES = 2  # random directions per parameter for the FD measurements


class FlowStatus(str, enum.Enum):
    """How the gradient reaches one parameter."""

    FLOWS = "flows"
    BLOCKED_AS_INTENDED = "blocked as intended"
    BLOCKED_UNINTENTIONALLY = "blocked unintentionally"
    LEAK = "leak"
    UNUSED = "unused"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class ParameterFlow:
    """The audit of one parameter.  ``ad_norm``: L2 norm of its AD gradient in the model's dtype
    (0 where none arrives); ``fd_dependence``: largest ``|<dL/dp, u>|`` measured by FD along the
    random directions, significant when above ``fd_noise`` (10 x the FD error estimate);
    ``gradient_check``: verdict of the projected FD check of its gradient."""

    name: str
    shape: tuple[int, ...]
    status: FlowStatus
    declared_stopped: bool
    trainable: bool
    ad_norm: float
    fd_dependence: float
    fd_noise: float
    gradient_check: Status
    cut_points: tuple[str, ...] = ()
    message: str = ""


@dataclass
class AuditReport(Report):
    """A :class:`~gradcheck.Report` plus the per-parameter records."""

    backend: str = ""
    parameters: tuple[ParameterFlow, ...] = ()
    loss: float | None = None
    grad_norm: float | None = None
    cut_points: tuple[str, ...] = field(default=())

    def __getitem__(self, name: str) -> ParameterFlow:
        for p in self.parameters:
            if p.name == name:
                return p
        raise KeyError(f"no parameter {name!r}; parameters: {[p.name for p in self.parameters]}")

    def table(self) -> str:
        """The flow map as aligned text, one parameter per line."""
        rows = [("parameter", "shape", "status", "|AD grad|", "FD dependence", "FD check")]
        for p in self.parameters:
            rows.append((p.name, "x".join(map(str, p.shape)) or "()", p.status.value,
                         f"{p.ad_norm:.3g}", f"{p.fd_dependence:.3g}", p.gradient_check.value))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                         for r in rows)


def _resolve_stopped(names: Sequence[str], stop_gradient: Sequence[str]) -> set[str]:
    """Exact names or dotted prefixes (``"target"`` covers ``"target.0.weight"``)."""
    if isinstance(stop_gradient, str):
        stop_gradient = (stop_gradient,)
    out: set[str] = set()
    for entry in stop_gradient:
        hits = [n for n in names if n == entry or n.startswith(entry + ".")]
        if not hits:
            raise InvalidArgument(f"stop_gradient entry {entry!r} names no parameter; "
                                  f"parameters: {', '.join(names)}")
        out.update(hits)
    return out


def audit(
    model: Any,
    loss_fn: Callable[..., Any],
    batch: Any,
    *,
    backend: str | Any,
    stop_gradient: Sequence[str] = (),
    grad_norm_monitor: Callable[[Any, Any], float] | None = None,
    train_step: TrainStep | Callable[[Any, Any], Any] | None = None,
    device: str = "cpu",
    seed: int = 0,
) -> AuditReport:
    """Audit gradient flow, gradients, the gradient-norm monitor and the training step of
    ``model`` (see module doc).

    ``loss_fn(model, batch)`` returns a scalar; ``stop_gradient`` names parameters (or dotted
    prefixes) whose gradient is *meant* to be blocked, e.g. a target network;
    ``grad_norm_monitor(model, batch) -> float`` is the user's routine whose number the logs
    show; ``train_step(model, batch)`` runs one step (mutating engines) or returns the new
    parameters (functional ones), ideally wrapped as :class:`TrainStep` with its ``lr`` and
    ``max_norm``.  Raises :class:`InvalidArgument` for unknown names; never raises for a
    misbehaving model (that is an ``error`` result).
    """
    seed = _args.seed(seed)
    be = get_backend(backend)
    if device not in be.devices():
        raise InvalidArgument.choice("device", device, be.devices())
    try:
        hooks = be.training(device, "float64")
        hooks.adopt(model)
    except NotImplementedError as exc:
        raise InvalidArgument(f"backend={be.name!r} has no training hooks: {exc}") from exc
    except TypeError as exc:
        raise InvalidArgument(f"model={type(model).__name__}: {exc}") from exc
    hooks.compile_losses = True
    names = hooks.parameter_names()
    if not names:
        raise InvalidArgument(f"the model has no parameters that backend {be.name!r} can see")
    stopped = _resolve_stopped(names, stop_gradient)
    ctx = ProbeContext(be, device, hooks.dtype, seed, reproducer=(
        f"gradcheck.audit(model, {getattr(loss_fn, '__name__', 'loss_fn')}, batch, "
        f"backend={be.name!r}, stop_gradient={tuple(sorted(stopped))!r}, seed={seed})"))
    report = AuditReport(backend=be.name)
    original = hooks.parameter_values()
    try:
        _run(ctx, hooks, loss_fn, batch, stopped, grad_norm_monitor, train_step, report)
    finally:
        hooks.assign(original)
        hooks.zero_grad()
    report.results = stream.record_many(ctx.results)  # into the active result stream
    return report


def _cut_points(hooks: Any, loss_fn: Callable, batch: Any) -> list:
    try:
        return hooks.find_cut_points(loss_fn, batch)
    except Exception:  # the finder re-runs the loss; its failure is reported elsewhere
        return []


def _run(ctx, hooks, loss_fn, batch, stopped, monitor, train_step, report) -> None:
    hooks.zero_grad()
    try:
        report.loss = hooks.backward(loss_fn, batch)
    except Exception as exc:
        cuts = _cut_points(hooks, loss_fn, batch)
        host = any(c.host for c in cuts)
        traced = [str(c) for c in cuts if not c.what.startswith("not traceable")]
        ctx.emit("backward", Status.ERROR, f"the loss cannot be differentiated: "
                 f"{describe_exc(exc)}" + (f"; cut points: {'; '.join(traced)}"
                                            if traced else ""),
                 bug=BugClass.HOST_ROUND_TRIP if host else None, kind=CheckKind.FLOW.value)
        report.cut_points = tuple(map(str, cuts))
        return
    values = hooks.parameter_values()
    grads = filled(hooks.gradients(), values)
    hooks.zero_grad()
    cuts = _cut_points(hooks, loss_fn, batch)
    report.cut_points = tuple(map(str, cuts))
    side = _float64_side(ctx, hooks, loss_fn, batch)
    records = [_parameter(ctx, hooks, i, name, grads[name], stopped, cuts, side)
               for i, name in enumerate(hooks.parameter_names())]
    report.parameters = tuple(records)
    report.grad_norm = check_monitor(ctx, hooks, batch, grads, monitor, report.loss)
    if train_step is not None:
        check_train_step(ctx, hooks, batch, train_step, grads, values, stopped)


class _Float64Side:
    """A float64 copy of the model: its AD gradients and FD directional derivatives."""

    def __init__(self, ctx: ProbeContext, hooks: Any, loss_fn: Callable, batch: Any) -> None:
        self.ctx = ctx
        self.loss_fn = loss_fn
        self.hooks = ctx.backend.training(ctx.device, "float64")
        self.hooks.compile_losses = True
        self.hooks.adopt(hooks.model_copy("float64"))
        self.batch = hooks.cast_tree(batch, "float64")
        self.hooks.zero_grad()
        self.hooks.backward(loss_fn, self.batch)
        self.grads = filled(self.hooks.gradients(), self.hooks.parameter_values())
        self.hooks.zero_grad()

    def projections(self, name: str, salt: int) -> tuple[np.ndarray, fd.FDEstimate]:
        """``_PROBES`` Gaussian directions for ``name`` and the FD directional derivatives of
        the loss along them."""
        h = self.hooks
        base = h.parameter_values()[name]
        U = self.ctx.rng(1000 + salt).standard_normal((_PROBES,) + base.shape)

        def f_batch(X: np.ndarray) -> np.ndarray:
            rows = X.reshape((len(X),) + base.shape)
            return h.loss_batch(self.loss_fn, name, rows, self.batch).reshape(len(X), 1)

        est = fd.directional_derivatives(f_batch, base.ravel(), U.reshape(_PROBES, -1))
        # the oracle differentiates along directions rounded so that x + h u is exact
        # (fd.representable_direction): project the AD gradient on those same directions
        return est.directions.reshape(U.shape), est


def _float64_side(ctx: ProbeContext, hooks: Any, loss_fn: Callable, batch: Any
                  ) -> _Float64Side | Exception:
    try:
        return _Float64Side(ctx, hooks, loss_fn, batch)
    except Exception as exc:  # e.g. a loss that hard-codes float32 tensors
        return exc


def _parameter(ctx: ProbeContext, hooks: Any, index: int, name: str, grad: np.ndarray,
               stopped: set[str], cuts: list, side: Any) -> ParameterFlow:
    shape = tuple(np.shape(grad))
    declared = name in stopped
    ad_norm = float(np.linalg.norm(grad))
    trainable = hooks.trainable(name)
    mine = tuple(str(c) for c in cuts if name in c.params or not c.params)
    if isinstance(side, Exception):
        ctx.emit(name, Status.ERROR, f"cannot evaluate the loss on a float64 copy of the model "
                 f"for finite differences: {describe_exc(side)}", kind=CheckKind.FLOW.value)
        return ParameterFlow(name, shape, FlowStatus.INCONCLUSIVE, declared, trainable, ad_norm,
                             float("nan"), float("nan"), Status.ERROR, mine)
    U, est = side.projections(name, index)
    s_fd, e_fd = est.value[:, 0], est.error[:, 0]
    noise = float(np.max(tolerance.FD_SAFETY * e_fd)) if e_fd.size else 0.0
    dependence = float(np.max(np.abs(s_fd))) if s_fd.size else 0.0
    dependent = bool(np.any(np.abs(s_fd) > tolerance.FD_SAFETY * e_fd))
    kink = bool(np.any(est.kink)) or not bool(np.all(est.finite))
    status = _classify(declared, bool(np.any(grad != 0)), dependent, kink)
    check = Status.SKIPPED
    if status is FlowStatus.FLOWS:
        check = _gradient_check(ctx, name, side.grads[name], U, s_fd, e_fd, kink)
    message = _flow_message(name, status, ad_norm, dependence, noise, trainable, mine)
    _emit_flow(ctx, name, status, message, mine, cuts)
    return ParameterFlow(name, shape, status, declared, trainable, ad_norm, dependence, noise,
                         check, mine, message)


def _classify(declared: bool, ad: bool, dependent: bool, kink: bool) -> FlowStatus:
    if declared:
        return FlowStatus.LEAK if ad else FlowStatus.BLOCKED_AS_INTENDED
    if ad:
        return FlowStatus.FLOWS
    if kink:
        return FlowStatus.INCONCLUSIVE
    return FlowStatus.BLOCKED_UNINTENTIONALLY if dependent else FlowStatus.UNUSED


def _gradient_check(ctx: ProbeContext, name: str, g64: np.ndarray, U: np.ndarray,
                    s_fd: np.ndarray, e_fd: np.ndarray, kink: bool) -> Status:
    if kink:
        ctx.emit(name, Status.INCONCLUSIVE, f"gradient of {name!r}: the loss is not "
                 "differentiable along the FD directions (kink or non-finite values)",
                 kind=CheckKind.VJP.value, dtype="float64")
        return Status.INCONCLUSIVE
    flat = U.reshape(len(U), -1)
    s_ad = flat @ g64.ravel()
    mag = np.abs(flat) @ np.abs(g64.ravel()) + np.abs(s_fd)
    r = ctx.record(name, assess(s_ad, s_fd, mag, "float64", e_fd), kind=CheckKind.VJP.value,
                   dtype="float64", bug=BugClass.WRONG_GRADIENT,
                   what=f"projected gradient <dL/d{name}, u> (AD, float64 copy) vs FD along "
                        f"{len(U)} Gaussian directions (partially blocked path or wrong rule "
                        "if they disagree)")
    return r.status


_FLOW_OK = (FlowStatus.FLOWS, FlowStatus.BLOCKED_AS_INTENDED)


def _flow_message(name: str, status: FlowStatus, ad_norm: float, dep: float, noise: float,
                  trainable: bool, cuts: tuple[str, ...]) -> str:
    fd_txt = f"FD dependence {dep:.3g} (noise {noise:.3g})"
    where = f"; cut points on its path: {'; '.join(cuts)}" if cuts else ""
    frozen = "" if trainable else " (requires_grad=False)"
    return {
        FlowStatus.FLOWS: f"{name!r}: gradient flows (|AD grad| {ad_norm:.3g}, {fd_txt})",
        FlowStatus.BLOCKED_AS_INTENDED: f"{name!r}: blocked as declared in stop_gradient "
                                        f"({fd_txt}){frozen}",
        FlowStatus.BLOCKED_UNINTENTIONALLY: f"{name!r}: the loss depends on it ({fd_txt}) but "
                                            f"AD gives no gradient{frozen}{where}",
        FlowStatus.LEAK: f"{name!r}: declared in stop_gradient, yet a gradient of norm "
                         f"{ad_norm:.3g} reaches it ({fd_txt})",
        FlowStatus.UNUSED: f"{name!r}: no gradient and no effect on the loss ({fd_txt}); name "
                           "it in stop_gradient if that is intended",
        FlowStatus.INCONCLUSIVE: f"{name!r}: no gradient and FD cannot decide (kink or "
                                 f"non-finite loss near the point){where}",
    }[status]


def _emit_flow(ctx: ProbeContext, name: str, status: FlowStatus, message: str,
               mine: tuple[str, ...], cuts: list) -> None:
    bug = None
    if status is FlowStatus.LEAK:
        bug = BugClass.STOP_GRADIENT_LEAKS
    elif status is FlowStatus.UNUSED:
        bug = BugClass.UNUSED_PARAMETER
    elif status is FlowStatus.BLOCKED_UNINTENTIONALLY:
        host = any(c.host for c in cuts if str(c) in mine)
        bug = BugClass.HOST_ROUND_TRIP if host else BugClass.DETACH_IN_INPUT_PATH
    verdict = Status.PASSED if status in _FLOW_OK else (
        Status.INCONCLUSIVE if status is FlowStatus.INCONCLUSIVE else Status.FAILED)
    ctx.emit(name, verdict, message, bug=bug, kind=CheckKind.FLOW.value,
             details={"flow": status.value, "cut_points": list(mine)})
