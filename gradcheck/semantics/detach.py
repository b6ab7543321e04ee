"""Detach-placement probes: the stop-gradient primitive blocks exactly the declared path, in
reverse mode, forward mode and at order 2; a no-grad region is blocked in reverse mode and in
forward mode as the backend declares (``Semantics.forward_mode_respects_no_grad``).

The probe function is ``f(x) = x * block(x * x) + sin(x)`` (elementwise): one path through the
blocked value, one path around it.  The reference is the same function with the blocked value
*frozen*: replaced by the constant it had at the sample point, so it has no derivative in any
mode or order.  Its derivatives come from the FD oracle (order 1: FD of ``f_frozen``; order 2:
FD of the backend's own first-order VJP of ``f_frozen``, the numeric checks' convention).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gradcheck.core.results import Status
from gradcheck.oracle import fd
from gradcheck.oracle.jacobian import fd_jacobian
from gradcheck.semantics.context import BugClass, ProbeContext

Block = Callable[..., Any]


def _probe_fn(xp: Any, x: Any, block: Block) -> Any:
    return x * block(lambda t: t * t, x) + xp.sin(x)


class _Functions:
    """The probe under a given block, the frozen reference and the unblocked function."""

    def __init__(self, hooks: Any, x0: np.ndarray, block: Block) -> None:
        xp = hooks.xp
        recorded: list[Any] = []

        def record(fn: Callable[..., Any], *a: Any) -> Any:
            recorded.append(fn(*a))
            return recorded[-1]

        _probe_fn(xp, hooks.to_native(x0), record)
        recorded = [hooks.stop_gradient(r) for r in recorded]

        def frozen(x: Any) -> Any:
            it = iter(recorded)
            return _probe_fn(xp, x, lambda fn, *a: next(it))

        self.probe = lambda x: _probe_fn(xp, x, block)
        self.frozen = frozen
        self.open = lambda x: _probe_fn(xp, x, lambda fn, *a: fn(*a))


def _jacobian(be: Any, fn: Callable, args: list[np.ndarray], device: str
              ) -> tuple[np.ndarray, np.ndarray]:
    """FD Jacobian of output 0 w.r.t. input 0 (``J[i, j]``) and its error estimate."""
    def f_batch(X: np.ndarray) -> np.ndarray:
        rest = [a for a in args[1:]]
        out = be.evaluate_batch(fn, [X] + rest, [True] + [False] * len(rest), device)[0]
        return np.asarray(out, dtype=np.float64).reshape(len(X), -1)

    est = fd_jacobian(f_batch, args[0], method="coordinates")
    return est.value, est.error


def run_detach(ctx: ProbeContext) -> None:
    """Reverse, forward and order-2 stop-gradient probes, then the no-grad region probe."""
    be, device = ctx.backend, ctx.device
    if be.semantics.stop_gradient is None:
        ctx.emit("detach", Status.SKIPPED, f"backend {be.name!r} declares no stop-gradient "
                 "primitive", dtype=ctx.rule_dtype)
        return
    hooks = ctx.hooks(ctx.rule_dtype)
    if not hooks.python_losses:
        _op_stop(ctx, hooks)
        return
    rng = ctx.rng(50)
    x0, v, u, w = (rng.uniform(0.5, 1.5, 4) for _ in range(4))
    stop = be.semantics.stop_gradient
    fns = _Functions(hooks, x0, lambda fn, *a: hooks.stop_gradient(fn(*a)))
    J, E = _jacobian(be, fns.frozen, [x0], device)
    checks = [("detach.reverse", "reverse mode (VJP)",
               lambda: be.vjp(fns.probe, [x0], [0], [v], device)[0], J.T @ v, E.T @ v, v)]
    if be.supports_jvp:
        checks.append(("detach.forward", "forward mode (JVP)",
                       lambda: be.jvp(fns.probe, [x0], [0], [u], device)[0], J @ u, E @ u, u))
    for name, mode, run, ref, err, _ in checks:
        got = np.asarray(run(), dtype=np.float64)
        mag = np.abs(got) + np.abs(ref)
        ctx.record(name, ctx.assess(got, ref, mag, ctx.rule_dtype, np.abs(err)),
                   dtype=ctx.rule_dtype,
                   bug=BugClass.STOP_GRADIENT_LEAKS,
                   what=f"{mode} of x * {stop}(x * x) + sin(x) vs FD of the function with the "
                        "stopped value frozen")
    if be.supports_order2:
        _order2(ctx, fns, x0, v, u, w, stop)
    _no_grad_region(ctx, hooks, x0, v, u)


def _op_stop(ctx: ProbeContext, hooks: Any) -> None:
    """Op-protocol engines: ``sum(w * stop(w))`` has gradient ``stop(w) = w``, not ``2 w``."""
    from gradcheck.backends.op_training import OpLoss

    w = ctx.rng(51).uniform(0.5, 1.5, 4)
    hooks.create_parameters({"w": w})
    p = hooks.parameter_values()["w"]
    hooks.zero_grad()
    hooks.backward(OpLoss("mul", ("w", ("stop", "w")), np.ones(4)))
    g = np.asarray(hooks.gradients()["w"], dtype=np.float64)
    est = fd.directional_derivatives(lambda X: np.sum(X * p, axis=1, keepdims=True), p,
                                     np.eye(4))  # the stopped factor frozen at p
    ref, err = est.value[:, 0], est.error[:, 0]
    ctx.record("detach.op_stop", ctx.assess(g, ref, np.abs(g) + np.abs(ref), ctx.rule_dtype, err),
               dtype=ctx.rule_dtype, bug=BugClass.STOP_GRADIENT_LEAKS,
               what=f"gradient of sum(w * {ctx.backend.semantics.stop_gradient}(w)) through the "
                    "op protocol vs FD with the stopped factor frozen")
    ctx.emit("detach", Status.SKIPPED, f"backend {ctx.backend.name!r} trains through the op "
             "protocol: forward-mode, order-2 and no-grad-region probes need Python losses",
             dtype=ctx.rule_dtype)


def _order2(ctx: ProbeContext, fns: _Functions, x0, v, u, w, stop: str) -> None:
    be, device = ctx.backend, ctx.device
    g = be.vjp_function(fns.probe, [0], 1)
    g_ref = be.vjp_function(fns.frozen, [0], 1)
    H, E = _jacobian(be, g_ref, [x0, v], device)  # d(J_frozen(x)^T v)/dx
    cases = [("detach.order2_rev", "reverse over reverse (VJP of VJP)",
              lambda: be.vjp(g, [x0, v], [0], [w], device)[0], H.T @ w, np.abs(E.T) @ np.abs(w))]
    if be.supports_jvp:
        cases.append(("detach.order2_fwd_over_rev", "forward over reverse (JVP of VJP)",
                      lambda: be.jvp(g, [x0, v], [0], [u], device)[0], H @ u,
                      np.abs(E) @ np.abs(u)))
    if be.supports_jvp:
        t = be.jvp_function(fns.probe, [0], 1)
        t_ref = be.jvp_function(fns.frozen, [0], 1)
        T, F = _jacobian(be, t_ref, [x0, u], device)  # d(J_frozen(x) u)/dx
        cases.append(("detach.order2_fwd_over_fwd", "forward over forward (JVP of JVP)",
                      lambda: be.jvp(t, [x0, u], [0], [w], device)[0], T @ w,
                      np.abs(F) @ np.abs(w)))
    for name, mode, run, ref, err in cases:
        got = np.asarray(run(), dtype=np.float64)
        ctx.record(name, ctx.assess(got, ref, np.abs(got) + np.abs(ref), ctx.rule_dtype, err),
                   dtype=ctx.rule_dtype, bug=BugClass.STOP_GRADIENT_LEAKS,
                   what=f"order 2, {mode}, of x * {stop}(x * x) + sin(x) vs FD of the frozen "
                        "function's first derivative")


def _no_grad_region(ctx: ProbeContext, hooks: Any, x0, v, u) -> None:
    be, device = ctx.backend, ctx.device
    name = "detach.no_grad_region"
    try:
        fns = _Functions(hooks, x0, lambda fn, *a: hooks.no_grad_region(fn)(*a))
    except NotImplementedError as exc:
        ctx.emit(name, Status.SKIPPED, str(exc), dtype=ctx.rule_dtype)
        return
    J_blocked, E_b = _jacobian(be, fns.frozen, [x0], device)
    J_open, E_o = _jacobian(be, fns.open, [x0], device)
    rev = np.asarray(be.vjp(fns.probe, [x0], [0], [v], device)[0], dtype=np.float64)
    rev_blocked = ctx.assess(rev, J_blocked.T @ v, np.abs(rev) + np.abs(J_blocked.T @ v),
                         ctx.rule_dtype, np.abs(E_b.T) @ v)
    if not rev_blocked.ok:
        ctx.record(name, rev_blocked, dtype=ctx.rule_dtype, bug=BugClass.STOP_GRADIENT_LEAKS,
                   what="reverse mode through a no-grad region vs FD with the region frozen")
        return
    if not be.supports_jvp:
        ctx.record(name, rev_blocked, dtype=ctx.rule_dtype, bug=BugClass.STOP_GRADIENT_LEAKS,
                   what="reverse mode through a no-grad region vs FD with the region frozen "
                        "(no forward mode to compare)")
        return
    fwd = np.asarray(be.jvp(fns.probe, [x0], [0], [u], device)[0], dtype=np.float64)
    declared = be.semantics.forward_mode_respects_no_grad
    J_exp, E_exp = (J_blocked, E_b) if declared else (J_open, E_o)
    a = ctx.assess(fwd, J_exp @ u, np.abs(fwd) + np.abs(J_exp @ u), ctx.rule_dtype,
                   np.abs(E_exp) @ u)
    how = "blocks it" if declared else "does NOT block it (tangents flow through the region)"
    note = "" if declared else (f" - documented {be.name} behaviour: forward-mode AD ignores "
                                "the no-grad region; reverse and forward mode disagree there")
    ctx.record(name, a, dtype=ctx.rule_dtype, bug=BugClass.NO_GRAD_MODE_MISMATCH,
               what=f"reverse mode blocks the no-grad region; forward mode, declared to "
                    f"{'respect' if declared else 'ignore'} it, {how}: JVP vs FD{note}",
               details={"forward_mode_respects_no_grad": declared})
