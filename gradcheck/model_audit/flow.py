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
* with ``train_step``, repeatability (gradients reset between steps, optimizer state restored)
  and the effective step over ``steps`` steps against the declared optimizer (see
  :mod:`gradcheck.model_audit.steps`).

Randomness is controlled: every evaluation of the loss, step and monitor runs with the global
RNGs (Python, NumPy, torch) forked and seeded identically (:mod:`gradcheck.backends._seeding`),
so dropout masks are the same in every FD evaluation; a loss that still differs between two
evaluations at one point is reported as nondeterministic and its FD verdicts are inconclusive.
Intent markers (:func:`gradcheck.stopped`, :func:`gradcheck.surrogate`) make the FD side measure
the intended function (:mod:`gradcheck.model_audit.intent`).

The model is left as found: parameters, ``.grad``, buffers (BatchNorm statistics), train/eval
modes, the optimizer / scheduler / scaler state and the global RNG states are restored bitwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck import stream
from gradcheck.backends import _seeding
from gradcheck.backends.guarded import AdapterFailure, attempt, attempt_whole
from gradcheck.backends.registry import backend_devices, get_backend
from gradcheck.core import arguments
from gradcheck.core.errors import InvalidArgument
from gradcheck.core.results import CheckKind, FlowStatus, ParameterFlow, Report, Status
from gradcheck.model_audit import declared as _declared
from gradcheck.model_audit import intent as _intent
from gradcheck.model_audit.steps import AfterBackward, TrainStep, check_monitor, check_train_step
from gradcheck.oracle import fd
from gradcheck.oracle.error_model import DEFAULT_MODEL, ErrorModel, validated_model
from gradcheck.semantics.context import QUOTE, BugClass, ProbeContext, filled

__all__ = ["AfterBackward", "AuditReport", "FlowStatus", "ParameterFlow", "TrainStep", "audit"]

_PROBES = 2  # random directions per parameter for the FD measurements


@dataclass
class AuditReport(Report):
    """A :class:`~gradcheck.Report` plus the per-parameter records."""

    backend: str = ""
    parameters: tuple[ParameterFlow, ...] = ()
    loss: float | None = None
    grad_norm: float | None = None
    cut_points: tuple[str, ...] = field(default=())
    declarations: tuple[str, ...] = field(default=())
    stochastic: bool = False

    def __getitem__(self, name: str) -> ParameterFlow:
        for p in self.parameters:
            if p.name == name:
                return p
        raise KeyError(f"no parameter {name!r}; parameters: {[p.name for p in self.parameters]}")

    def table(self) -> str:
        """The flow map as aligned text, one parameter per line: the gradient's L2 norm, then
        the two comparable numbers, the largest projection ``|<grad, u>|`` along the random
        directions from AD and from FD (with FD's noise level)."""
        rows = [("parameter", "shape", "status", "|grad| (L2)", "|<grad,u>| AD",
                 "|<grad,u>| FD", "FD noise", "FD check")]
        for p in self.parameters:
            rows.append((p.name, "x".join(map(str, p.shape)) or "()", p.status.value,
                         f"{p.ad_norm:.3g}", f"{p.ad_projection:.3g}", f"{p.fd_dependence:.3g}",
                         f"{p.fd_noise:.2g}", p.gradient_check.value))
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
    grad_norm_monitor: Callable[[Any, Any], float] | AfterBackward | None = None,
    train_step: TrainStep | Callable[[Any, Any], Any] | None = None,
    device: str = "cpu",
    seed: int = 0,
    error_model: ErrorModel | None = None,
) -> AuditReport:
    """Audit gradient flow, gradients, the gradient-norm monitor and the training step of
    ``model`` (see module doc).

    ``loss_fn(model, batch)`` returns a scalar; ``stop_gradient`` names parameters (or dotted
    prefixes) whose gradient is *meant* to be blocked, e.g. a target network;
    ``grad_norm_monitor(model, batch) -> float`` is the user's routine whose number the logs
    show (or :class:`AfterBackward`: a monitor that reads the gradients a training loop's
    backward left); ``train_step(model, batch)`` runs one step (mutating engines) or returns the
    new parameters (functional ones), ideally wrapped as :class:`TrainStep` with its optimizer
    (``lr=`` for plain SGD), ``max_norm``, ``steps``, ties and target updates.  Intent inside
    the loss is declared with :func:`gradcheck.stopped` / :func:`gradcheck.surrogate`.  Every
    evaluation runs with the global RNGs seeded from ``seed``.  ``error_model`` (default
    ``None``: ``ErrorModel()``) is the profile every comparison and every "does the loss depend
    on it" test is judged with (``docs/error-model.md`` section 5a).  Raises
    :class:`InvalidArgument` for unknown names; never raises for a misbehaving model (that is
    an ``error`` result).
    """
    seed = arguments.seed(seed)
    error_model = validated_model(error_model)
    be = get_backend(backend)
    devices = backend_devices(be)
    if device not in devices:
        raise InvalidArgument.choice("device", device, devices)
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
    entries = (stop_gradient,) if isinstance(stop_gradient, str) else tuple(stop_gradient)
    plain, row_entries = _declared.split_rows(entries, names)
    stopped = _resolve_stopped(names, plain)
    # a parameter the model itself freezes (torch requires_grad=False) is declared stopped
    stopped |= {n for n in names if not hooks.trainable(n)}
    rows = _stopped_rows(hooks, row_entries)
    profile = "" if error_model == DEFAULT_MODEL else f", error_model=gradcheck.{error_model!r}"
    declared_stops = tuple(sorted(stopped)) + _row_entries(row_entries)
    ctx = ProbeContext(be, device, hooks.dtype, seed, reproducer=(
        f"gradcheck.audit(model, {getattr(loss_fn, '__name__', 'loss_fn')}, batch, "
        f"backend={be.name!r}, stop_gradient={declared_stops!r}, seed={seed}{profile})"),
        error_model=error_model)
    report = AuditReport(backend=be.name)
    original = hooks.snapshot()
    hooks.rng_seed = _rng_seed(seed)
    try:
        with _seeding.controlled_rng(hooks.rng_seed):  # the caller's RNG states come back
            stop = attempt_whole("audit", _run, ctx, hooks, loss_fn, batch, stopped,
                                 grad_norm_monitor, train_step, report, rows)
        if isinstance(stop, AdapterFailure):  # a SystemExit (or a bug) past every step's guard
            ctx.emit("audit", Status.ERROR, f"the audit stopped: {stop.quoted(QUOTE)}; the "
                     "checks not reported above did not run", kind=CheckKind.FLOW)
    finally:
        hooks.restore(original)
    report.results = stream.record_many(ctx.results)  # into the active result stream
    return report


def _row_entries(rows: dict[str, set[int]]) -> tuple[str, ...]:
    return tuple(f"{k}[{', '.join(map(str, sorted(v)))}]" for k, v in sorted(rows.items()))


def _stopped_rows(hooks: Any, entries: dict[str, set[int]]) -> dict[str, tuple[tuple, str]]:
    """Rows meant to get no gradient: read from the model (``padding_idx``) and declared as
    ``"name[i]"`` in ``stop_gradient``; each with where it was declared."""
    shapes = {k: tuple(np.shape(v)) for k, v in hooks.parameter_values().items()}
    read = _declared.stopped_rows(hooks.model)
    out: dict[str, tuple[tuple, str]] = {}
    for name, rs in _declared.normalised_rows(read, shapes).items():
        out[name] = (rs, f"padding_idx={', '.join(map(str, rs))} of its embedding module")
    for name, rs in _declared.normalised_rows(entries, shapes).items():
        both = tuple(sorted(set(rs) | set(out.get(name, ((), ""))[0])))
        out[name] = (both, f"declared {name}[{', '.join(map(str, rs))}] in stop_gradient"
                     + (f" and {out[name][1]}" if name in out else ""))
    return out


def _rng_seed(seed: int) -> int:
    return (seed * 1_000_003 + 12_345) % (2 ** 31)


def _cut_points(hooks: Any, loss_fn: Callable, batch: Any) -> list:
    found = attempt("find_cut_points", hooks.find_cut_points, loss_fn, batch)
    # the finder re-runs the loss; its failure is reported elsewhere
    return [] if isinstance(found, AdapterFailure) else found


def _observed_backward(hooks: Any, loss_fn: Callable, batch: Any) -> tuple[float, list]:
    """The loss's value from one backward, and the intent markers it declared."""
    with _intent.session("observe") as seen:
        loss = hooks.backward(loss_fn, batch)
    return loss, seen.seen


def _run(ctx, hooks, loss_fn, batch, stopped, monitor, train_step, report, rows) -> None:
    hooks.zero_grad()
    observed = attempt("backward", _observed_backward, hooks, loss_fn, batch)
    if isinstance(observed, AdapterFailure):
        cuts = _cut_points(hooks, loss_fn, batch)
        host = any(c.host for c in cuts)
        traced = [str(c) for c in cuts if not c.what.startswith("not traceable")]
        ctx.emit("backward", Status.ERROR, f"the loss cannot be differentiated: "
                 f"{observed.quoted(QUOTE)}" + (f"; cut points: {'; '.join(traced)}"
                                                 if traced else ""),
                 bug=BugClass.HOST_ROUND_TRIP if host else None, kind=CheckKind.FLOW)
        report.cut_points = tuple(map(str, cuts))
        return
    report.loss, declared = observed
    values = hooks.parameter_values()
    grads = filled(hooks.gradients(), values)
    hooks.zero_grad()
    cuts = _cut_points(hooks, loss_fn, batch)
    report.cut_points = tuple(map(str, cuts))
    report.declarations = tuple(str(d) for d in declared)
    _check_declarations(ctx, declared)
    side = attempt("model_copy", _Float64Side, ctx, hooks, loss_fn, batch, bool(declared))
    if not isinstance(side, AdapterFailure):
        report.stochastic = _check_randomness(ctx, side)
    records = [_parameter(ctx, hooks, i, name, grads[name], stopped, cuts, side, declared,
                          rows.get(name))
               for i, name in enumerate(hooks.parameter_names())]
    report.parameters = tuple(records)
    report.grad_norm = check_monitor(ctx, hooks, loss_fn, batch, grads, monitor, report.loss)
    del values
    if train_step is not None:
        check_train_step(ctx, hooks, loss_fn, batch, train_step, stopped)


def _check_declarations(ctx: ProbeContext, declared: list) -> None:
    """Torch: a value declared stopped that still requires grad is a stop that does not
    happen (JAX and the rest: the FD comparison of the intended function catches it)."""
    for d in declared:
        if d.kind != "stopped" or d.connected is None:
            continue
        name = f"intent.stopped[{d.label or d.where}]"
        if d.connected:
            ctx.emit(name, Status.FAILED, f"{d}: the value still requires grad, so the gradient "
                     "flows through it; stop it in the code (.detach() / torch.no_grad()) or "
                     "remove the declaration", bug=BugClass.DECLARED_STOP_MISSING,
                     kind=CheckKind.FLOW, details={"where": d.where})
        else:
            ctx.emit(name, Status.PASSED, f"{d}: the value carries no gradient, as declared",
                     kind=CheckKind.FLOW, details={"where": d.where})


def _check_randomness(ctx: ProbeContext, side: _Float64Side) -> bool:
    """Two evaluations under the same seed must agree (else FD is noise: reported, and the FD
    verdicts become inconclusive); a different seed tells whether the forward is stochastic."""
    h = side.hooks
    a, b = h.loss_value(side.loss_fn, side.batch), h.loss_value(side.loss_fn, side.batch)
    seed = h.rng_seed
    try:
        h.rng_seed = seed + 1
        c = h.loss_value(side.loss_fn, side.batch)
    finally:
        h.rng_seed = seed
    if a != b:
        side.noisy = abs(a - b)
        ctx.emit("rng.determinism", Status.FAILED, f"the loss differs between two evaluations at "
                 f"the same point with every global RNG (Python, NumPy, torch) seeded "
                 f"identically: {a!r} vs {b!r} (|diff| {abs(a - b):.3g}); randomness from a "
                 "source the audit cannot seed (a private generator, os.urandom, threads): "
                 "finite differences would measure noise, so the FD verdicts are inconclusive",
                 bug=BugClass.NONDETERMINISTIC, kind=CheckKind.FLOW, dtype="float64")
        return True
    stochastic = c != a
    ctx.emit("rng.determinism", Status.PASSED,
             ("the forward is stochastic (the loss differs under another seed by "
              f"{abs(c - a):.3g}); " if stochastic else "the forward is deterministic; ")
             + "every evaluation runs with the global RNGs seeded identically, and two "
               "evaluations at one point agree bitwise", kind=CheckKind.FLOW,
             dtype="float64", details={"stochastic": stochastic})
    return stochastic


class _Float64Side:
    """A float64 copy of the model: its AD gradients and FD directional derivatives."""

    def __init__(self, ctx: ProbeContext, hooks: Any, loss_fn: Callable, batch: Any,
                 declared: bool) -> None:
        self.ctx = ctx
        self.loss_fn = loss_fn
        self.noisy = 0.0
        self.hooks = ctx.backend.training(ctx.device, "float64")
        self.hooks.compile_losses = True
        self.hooks.rng_seed = hooks.rng_seed
        self.hooks.adopt(hooks.model_copy("float64"))
        self.batch = hooks.cast_tree(batch, "float64")
        self.hooks.zero_grad()
        self.hooks.backward(loss_fn, self.batch)
        self.grads = filled(self.hooks.gradients(), self.hooks.parameter_values())
        self.hooks.zero_grad()
        self.fd_loss = loss_fn  # the intended function: markers replayed (frozen) where declared
        self.seen: list = []
        if declared:
            with _intent.session("record") as rec:
                self.hooks.evaluate_eagerly(loss_fn, self.batch)
            self.seen = rec.seen
            capture = ctx.backend.user_function(_intent.capture_cotangents)
            with self.hooks.seeded():
                capture(self.hooks, self.hooks.model, loss_fn, (self.batch,), self.seen)
            self.fd_loss = _intent.freezing(loss_fn, self.seen)

    def projections(self, name: str, salt: int, plain: bool = False,
                    mask: np.ndarray | None = None) -> tuple[np.ndarray, fd.FDEstimate]:
        """``_PROBES`` Gaussian directions for ``name`` (zero where ``mask`` is 0) and the FD
        directional derivatives of the intended loss (``plain``: the loss as written) along
        them."""
        h = self.hooks
        loss = self.loss_fn if plain else self.fd_loss
        base = h.parameter_values()[name]
        U = self.ctx.rng(1000 + salt).standard_normal((_PROBES,) + base.shape)
        if mask is not None:
            U = U * mask

        def f_batch(X: np.ndarray) -> np.ndarray:
            rows = X.reshape((len(X),) + base.shape)
            return h.loss_batch(loss, name, rows, self.batch).reshape(len(X), 1)

        est = fd.directional_derivatives(f_batch, base.ravel(), U.reshape(_PROBES, -1))
        # the oracle differentiates along directions rounded so that x + h u is exact
        # (fd.representable_direction): project the AD gradient on those same directions
        return est.directions.reshape(U.shape), est


def _parameter(ctx: ProbeContext, hooks: Any, index: int, name: str, grad: np.ndarray,
               stopped: set[str], cuts: list, side: Any, declared_here: list,
               rows: tuple[tuple, str] | None = None) -> ParameterFlow:
    shape = tuple(np.shape(grad))
    declared = name in stopped
    ad_norm = float(np.linalg.norm(grad))
    trainable = hooks.trainable(name)
    mine = tuple(str(c) for c in cuts if name in c.params or not c.params)
    if isinstance(side, AdapterFailure):  # e.g. a loss that hard-codes float32 tensors
        record = ParameterFlow(name, shape, FlowStatus.INCONCLUSIVE, declared, trainable,
                               ad_norm, float("nan"), float("nan"), Status.ERROR, mine)
        ctx.emit(name, Status.ERROR, f"cannot evaluate the loss on a float64 copy of the model "
                 f"for finite differences: {side.quoted(QUOTE)}", kind=CheckKind.FLOW,
                 flow=record)
        return record
    mask = None
    if rows is not None:
        mask = np.ones(shape)
        mask[list(rows[0])] = 0.0
        _check_rows(ctx, name, grad, side, index, rows, mask)
    U, est = side.projections(name, index, mask=mask)
    s_fd, e_fd = est.value[:, 0], est.error[:, 0]
    # an FD value is told from 0 where it exceeds what its error estimate allows
    noise = float(np.max(ctx.error_model.fd_bound(e_fd))) if e_fd.size else 0.0
    dependence = float(np.max(np.abs(s_fd))) if s_fd.size else 0.0
    dependent = bool(np.any(np.abs(s_fd) > ctx.error_model.fd_bound(e_fd)))
    kink = bool(np.any(est.kink)) or not bool(np.all(est.finite)) or side.noisy > 0
    flat = U.reshape(len(U), -1)
    ad_proj = float(np.max(np.abs(flat @ side.grads[name].ravel()))) if len(U) else 0.0
    status = _classify(declared, bool(np.any(grad != 0)), dependent, kink)
    by_marker = ""
    if status is FlowStatus.UNUSED and side.seen:
        U2, est2 = side.projections(name, index, plain=True)
        if np.any(np.abs(est2.value[:, 0]) > ctx.error_model.fd_bound(est2.error[:, 0])):
            status = FlowStatus.BLOCKED_AS_INTENDED  # the loss depends on it only through a
            by_marker = "; ".join(str(d) for d in side.seen)  # declared stopped value
            dependence = float(np.max(np.abs(est2.value[:, 0])))
    check = Status.SKIPPED
    if status is FlowStatus.FLOWS:
        check = _gradient_check(ctx, name, side.grads[name], U, s_fd, e_fd, kink, mine,
                                declared_here, side.noisy)
    message = _flow_message(name, status, ad_norm, dependence, noise, trainable, mine, ad_proj)
    if by_marker:
        message = (f"{name!r}: blocked as intended: the loss depends on it (FD {dependence:.3g}) "
                   f"only through values declared stopped ({by_marker})")
    record = ParameterFlow(name, shape, status, declared, trainable, ad_norm, dependence, noise,
                           check, mine, message, ad_proj)
    _emit_flow(ctx, record, cuts)
    return record


def _classify(declared: bool, ad: bool, dependent: bool, kink: bool) -> FlowStatus:
    if declared:
        return FlowStatus.LEAK if ad else FlowStatus.BLOCKED_AS_INTENDED
    if ad:
        return FlowStatus.FLOWS
    if kink:
        return FlowStatus.INCONCLUSIVE
    return FlowStatus.BLOCKED_UNINTENTIONALLY if dependent else FlowStatus.UNUSED


def _gradient_check(ctx: ProbeContext, name: str, g64: np.ndarray, U: np.ndarray,
                    s_fd: np.ndarray, e_fd: np.ndarray, kink: bool, cuts: tuple[str, ...],
                    declared: list, noisy: float) -> Status:
    if kink:
        why = (f"the loss is nondeterministic under a controlled RNG (|diff| {noisy:.3g} between "
               "two evaluations)" if noisy else "the loss is not differentiable along the FD "
               "directions (kink or non-finite values)")
        ctx.emit(name, Status.INCONCLUSIVE, f"gradient of {name!r}: {why}",
                 kind=CheckKind.VJP, dtype="float64")
        return Status.INCONCLUSIVE
    flat = U.reshape(len(U), -1)
    s_ad = flat @ g64.ravel()
    mag = np.abs(flat) @ np.abs(g64.ravel()) + np.abs(s_fd)
    a = ctx.assess(s_ad, s_fd, mag, "float64", e_fd)
    bug, hint = BugClass.WRONG_GRADIENT, " (a wrong rule or a partially blocked path)"
    intent = "; ".join(str(d) for d in declared)
    if not a.ok and cuts:
        bug = BugClass.UNDECLARED_PARTIAL_STOP
        hint = (f": AD misses part of the dependence FD measures; cut points on its path: "
                f"{'; '.join(cuts)}; if a stop or surrogate there is intended, declare it where "
                "it happens (gradcheck.stopped(value) / gradcheck.surrogate(value, "
                "gradient_of))" + (f" (declared: {intent})" if intent else ""))
    elif not a.ok and declared:
        bug = BugClass.DECLARED_STOP_MISSING
        hint = (f": the code does not do what is declared ({intent}); FD measures the declared "
                "function (stopped values frozen, surrogates differentiated as declared)")
    elif not a.ok:
        hint = (" (a wrong rule, or a stop or surrogate gradient that is not declared: a custom "
                "backward, a gradient reversal, a straight-through estimator; declare it with "
                "gradcheck.surrogate(value, gradient_of) if intended)")
    what = (f"projected gradient <dL/d{name}, u> (AD, float64 copy) vs FD of the "
            f"{'declared (intended) ' if declared else ''}loss along {len(U)} Gaussian "
            f"directions{hint if not a.ok else ''}")
    r = ctx.record(name, a, kind=CheckKind.VJP, dtype="float64", bug=bug, what=what)
    return r.status


def _check_rows(ctx: ProbeContext, name: str, grad: np.ndarray, side: Any, index: int,
                rows: tuple[tuple, str], mask: np.ndarray) -> None:
    """Rows meant to get no gradient, both ways (the gradient the model itself gets, in its
    dtype): the declared rows must get none; any other row that gets none while FD says the
    loss depends on it is a partial stop nobody declared."""
    idx, origin = rows
    shown = ", ".join(map(str, idx))
    g = np.asarray(grad)
    leak = float(np.linalg.norm(g[list(idx)]))
    flat = g.reshape(g.shape[0], -1)
    silent = [r for r in range(flat.shape[0]) if r not in idx and not np.any(flat[r])]
    dep = 0.0
    g64 = np.asarray(side.grads[name]).reshape(flat.shape)
    named = [r for r in silent if np.any(g64[r])]  # the float64 copy's AD reaches them
    silent = named or silent
    if silent:
        only = np.zeros(g.shape)
        only[silent] = 1.0
        _, est = side.projections(name, index + 7919, mask=only)
        if np.any(np.abs(est.value[:, 0]) > ctx.error_model.fd_bound(est.error[:, 0])):
            dep = float(np.max(np.abs(est.value[:, 0])))
        # else: rows the batch does not reach (their tokens are absent): no gradient, no effect
    if leak > 0:
        ctx.emit(f"{name}[{shown}]", Status.FAILED, f"row(s) {shown} of {name!r} are meant to "
                 f"get no gradient ({origin}) yet get one of norm {leak:.3g}: the forward does "
                 "not use the module's padding (an F.embedding call without padding_idx, or a "
                 "copy of the weight), or the declaration names the wrong rows",
                 bug=BugClass.STOP_GRADIENT_LEAKS, kind=CheckKind.FLOW)
    elif dep:
        listed = ", ".join(map(str, silent[:8])) + (" ..." if len(silent) > 8 else "")
        ctx.emit(f"{name}[{shown}]", Status.FAILED, f"row(s) {'' if named else 'among '}"
                 f"{listed} of {name!r} get no "
                 f"gradient although the loss depends on them (FD {dep:.3g} along those rows "
                 f"alone); only row(s) {shown} are meant to ({origin}): a hook or mask that "
                 "zeroes other rows, or the wrong padding index in the forward",
                 bug=BugClass.UNDECLARED_PARTIAL_STOP, kind=CheckKind.FLOW)
    else:
        ctx.emit(f"{name}[{shown}]", Status.PASSED, f"row(s) {shown} of {name!r} get no "
                 f"gradient, as declared ({origin}), and every row the loss depends on gets "
                 "one; the rest of the weight is checked against FD", kind=CheckKind.FLOW)


_FLOW_OK = (FlowStatus.FLOWS, FlowStatus.BLOCKED_AS_INTENDED)


def _flow_message(name: str, status: FlowStatus, ad_norm: float, dep: float, noise: float,
                  trainable: bool, cuts: tuple[str, ...], ad_proj: float = float("nan")) -> str:
    fd_txt = f"FD dependence max|<grad,u>| {dep:.3g} (noise {noise:.3g})"
    where = f"; cut points on its path: {'; '.join(cuts)}" if cuts else ""
    frozen = "" if trainable else " (requires_grad=False)"
    return {
        FlowStatus.FLOWS: f"{name!r}: gradient flows (|grad| {ad_norm:.3g}; along the random "
                          f"directions max|<grad,u>| AD {ad_proj:.3g} vs {fd_txt})",
        FlowStatus.BLOCKED_AS_INTENDED: (f"{name!r}: blocked as declared in stop_gradient "
                                         f"({fd_txt})" if trainable else
                                         f"{name!r}: blocked as declared by the model "
                                         f"(requires_grad=False; {fd_txt})"),
        FlowStatus.BLOCKED_UNINTENTIONALLY: f"{name!r}: the loss depends on it ({fd_txt}) but "
                                            f"AD gives no gradient{frozen}{where}",
        FlowStatus.LEAK: f"{name!r}: declared in stop_gradient, yet a gradient of norm "
                         f"{ad_norm:.3g} reaches it ({fd_txt})",
        FlowStatus.UNUSED: f"{name!r}: no gradient and no effect on the loss ({fd_txt}); name "
                           "it in stop_gradient if that is intended",
        FlowStatus.INCONCLUSIVE: f"{name!r}: no gradient and FD cannot decide (kink or "
                                 f"non-finite loss near the point){where}",
    }[status]


def _emit_flow(ctx: ProbeContext, record: ParameterFlow, cuts: list) -> None:
    """The ``flow`` result of one parameter, carrying its record (what the report's flow map
    shows)."""
    status, mine = record.status, record.cut_points
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
    ctx.emit(record.name, verdict, record.message, bug=bug, kind=CheckKind.FLOW,
             flow=record)
