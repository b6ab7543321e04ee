"""Check a user's own training utilities: their clip, gradient-norm and accumulation helpers.

The semantic probes measure an engine's own clip and accumulation through its training hooks;
these functions run the same probes on *your* function, in your engine's idiom, without touching
adapter classes:

* :func:`check_clip_function` - ``clip(parameters, max_norm) -> norm`` on torch (like
  ``torch.nn.utils.clip_grad_norm_``: clips ``.grad`` in place, returns the norm);
  ``clip(grads, max_norm) -> (clipped_grads, norm)`` on JAX and NumPy (``grads`` a dict).  Runs
  the ``clip`` family: direction, bound, below-threshold, the reported norm (pre-clip unless
  ``reports="post_clip"``), non-finite gradients, invalid thresholds, float16/bfloat16 norms.
* :func:`check_grad_norm_function` - ``norm(parameters) -> float`` reading ``.grad`` (torch) or
  ``norm(grads) -> float`` (JAX/NumPy) against the global L2 norm recomputed in float64, on
  ordinary, large-float16 and non-finite gradients.
* :func:`check_accumulation_function` - ``accumulate(model, loss_fn, micro_batches)``: torch
  leaves the gradient in ``.grad``, JAX/NumPy return it; it must equal the gradient of the mean
  of the micro-batch losses (``K`` equal micro-batches), and a factor ``K`` or ``1/K`` is named.

Each returns a :class:`~gradcheck.Report` of ``kind="semantic"`` results (into the active result
stream), failures prefixed with their bug class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gradcheck import stream
from gradcheck.backends.guarded import AdapterFailure, attempt
from gradcheck.backends.registry import get_backend
from gradcheck.backends.training import ClipSemantics
from gradcheck.core.results import Report, Status
from gradcheck.semantics.clip import run_clip
from gradcheck.semantics.context import QUOTE, BugClass, ProbeContext, filled, global_norm

__all__ = ["check_accumulation_function", "check_clip_function", "check_grad_norm_function"]


def _scoped(fn: Callable, backend: Any) -> Callable:
    """The user's function run as the adapter runs its own (JAX: float64 enabled, as the hooks
    do, then restored): :meth:`~gradcheck.backends.base.Backend.user_function`."""
    return get_backend(backend).user_function(fn)


def _context(backend: Any, device: str, dtype: str, seed: int, what: str,
             hooks_factory: Callable[[Any, str, str], Any] | None = None) -> ProbeContext:
    be = get_backend(backend)
    if hooks_factory is not None:
        base = type(be)
        be = type(f"User{base.__name__}", (base,), {
            "training": lambda self, d, dt: hooks_factory(self, d, dt)})()
    return ProbeContext(be, device, dtype, seed, reproducer=f"gradcheck.{what}(fn, backend="
                                                           f"{be.name!r}, seed={seed})")


def check_clip_function(clip: Callable, *, backend: str | Any, device: str = "cpu",
                        dtype: str = "float64", seed: int = 0, reports: str = "pre_clip",
                        epsilon: float | None = None) -> Report:
    """Run the clip probes on the user's ``clip`` (signature per engine: module doc);
    ``reports`` / ``epsilon`` say what it documents (which norm it returns; the constant added
    to the norm in ``max_norm / (norm + eps)``).  ``epsilon=None`` (the default) is 0, but
    for the engine's own clip (``torch.nn.utils.clip_grad_norm_``) it is that function's
    documented definition (``max_norm / (total_norm + 1e-6)``, the pre-clip norm returned);
    the bound's result says which definition it compared with."""
    be = get_backend(backend)
    own = f"{getattr(clip, '__module__', '')}.{getattr(clip, '__qualname__', '')}"
    name = getattr(clip, "__name__", "clip")
    clip = _scoped(clip, be)
    base_cls = type(be.training(device, dtype))
    engine = be.name
    documented = (base_cls.clip_semantics if epsilon is None and own in base_cls.own_clips
                  else ClipSemantics(reports, 0.0 if epsilon is None else epsilon,
                                     f"the user's {name}"))

    class UserClip(base_cls):  # type: ignore[misc, valid-type]
        clip_semantics = documented

        def clip_grad_norm(self, max_norm: float) -> float:
            if engine == "torch":
                params = [p for p in self._params.values() if p.grad is not None]
                return float(clip(params, max_norm))
            if self._grads is None:
                return 0.0
            names = list(self._params)
            out, norm = clip({k: self._grads[k] for k in names}, max_norm)
            self.set_gradients({k: np.asarray(out[k], dtype=np.float64) for k in names})
            return float(norm)

    ctx = _context(be, device, dtype, seed, "check_clip_function",
                   lambda b, d, dt: UserClip(b, d, dt))
    failed = attempt("clip probes", run_clip, ctx)
    if isinstance(failed, AdapterFailure):
        ctx.emit("clip", Status.ERROR, f"the clip probes raised {failed.quoted(QUOTE)}")
    return Report(stream.record_many(ctx.results))


def check_grad_norm_function(norm_fn: Callable, *, backend: str | Any, device: str = "cpu",
                             dtype: str = "float64", seed: int = 0) -> Report:
    """Compare the user's gradient-norm function with the global L2 norm (module doc)."""
    norm_fn = _scoped(norm_fn, backend)
    ctx = _context(backend, device, dtype, seed, "check_grad_norm_function")
    cases = {"ordinary": (dtype, ctx.rng(11).normal(0.0, 2.0, (3, 40))),
             "float16_large": ("float16", np.full((3, 1400), 300.0)),
             "nonfinite": (dtype, np.array([[1.0, np.inf], [2.0, 3.0]]))}
    for label, (dt, values) in cases.items():
        name = f"grad_norm_fn[{label}]"
        hooks = attempt("training", ctx.hooks, dt)
        if isinstance(hooks, AdapterFailure):
            ctx.emit(name, Status.SKIPPED, f"{dt} not available: {hooks.quoted(QUOTE)}")
            continue
        shapes = {f"p{i}": row.shape for i, row in enumerate(values)}
        hooks.create_parameters({k: np.zeros(s) for k, s in shapes.items()})
        hooks.set_gradients({f"p{i}": row for i, row in enumerate(values)})
        stored = filled(hooks.gradients(), {k: np.zeros(s) for k, s in shapes.items()})
        truth = global_norm(stored)
        got = attempt("norm function", _user_norm, norm_fn, hooks, ctx.backend.name)
        if isinstance(got, AdapterFailure):
            ctx.emit(name, Status.ERROR, f"norm function raised {got.quoted(QUOTE)}")
            continue
        if not np.isfinite(truth):
            ok = not np.isfinite(got)
            ctx.emit(name, Status.PASSED if ok else Status.FAILED,
                     f"gradients with an inf element: the norm function returns {got!r} "
                     + ("(non-finite: flagged)" if ok else "(finite: the inf is hidden)"),
                     bug=BugClass.NONFINITE_NOT_FLAGGED)
            continue
        if not np.isfinite(got):
            ctx.emit(name, Status.FAILED, f"{label} gradients: the norm function returns {got!r}"
                     f" but the global L2 norm is {truth:.6g} (finite; squares overflowing "
                     f"{dt}?): a non-finite norm never passes",
                     bug=BugClass.LOW_PRECISION_NORM if dt == "float16" else
                     BugClass.NORM_NOT_GLOBAL_L2, dtype=dt)
            continue
        a = ctx.assess(got, truth, truth + abs(got), dt)
        hint = ""
        per = [float(np.linalg.norm(v)) for v in stored.values()]
        if not a.ok and ctx.matches(got, sum(per), sum(per) + abs(got), dt):
            hint = "; it returns the sum of per-parameter norms"
        elif not a.ok and ctx.matches(got, truth ** 2, truth ** 2 + abs(got), dt):
            hint = "; it returns the squared norm"
        ctx.record(name, a, bug=BugClass.NORM_NOT_GLOBAL_L2, dtype=dt,
                   what=f"{label} gradients: the user's norm ({got:.6g}) vs the global L2 norm "
                        f"recomputed in float64 ({truth:.6g}){hint}")
    return Report(stream.record_many(ctx.results))


def _user_norm(norm_fn: Callable, hooks: Any, engine: str) -> float:
    """The user's norm of the gradients ``hooks`` hold, as the engine's idiom passes them."""
    arg = list(hooks._params.values()) if engine == "torch" else hooks.monitor_argument()
    return float(norm_fn(arg))


def check_accumulation_function(accumulate: Callable, *, backend: str | Any,
                                device: str = "cpu", dtype: str = "float64", seed: int = 0,
                                micro_batches: int = 4) -> Report:
    """The user's accumulation helper must give the gradient of the mean micro-batch loss."""
    accumulate = _scoped(accumulate, backend)
    ctx = _context(backend, device, dtype, seed, "check_accumulation_function")
    hooks = ctx.hooks()
    rng = ctx.rng(21)
    w0 = {"layer.weight": rng.standard_normal((3, 2)), "layer.bias": rng.standard_normal(2)}
    hooks.create_parameters(w0)
    xp = hooks.xp
    X = rng.standard_normal((4 * micro_batches, 3))
    Y = rng.standard_normal((4 * micro_batches, 2))
    nat = [(hooks.to_native(X[i::micro_batches]), hooks.to_native(Y[i::micro_batches]))
           for i in range(micro_batches)]

    def loss_fn(model: Any, batch: Any) -> Any:
        x, y = batch
        h = xp.tanh(x @ model["layer.weight"] + model["layer.bias"])
        return xp.mean((h - y) ** 2)

    names = hooks.parameter_names()
    total = {k: np.zeros_like(v) for k, v in w0.items()}
    for mb in nat:
        hooks.zero_grad()
        hooks.backward(loss_fn, mb)
        g = filled(hooks.gradients(), w0)
        total = {k: total[k] + g[k] / micro_batches for k in names}
    hooks.zero_grad()

    def accumulated() -> dict[str, np.ndarray]:
        out = accumulate(hooks.model, loss_fn, nat)
        return filled(hooks.gradients(), w0) if ctx.backend.name == "torch" else {
            k: np.asarray(out[k], dtype=np.float64) for k in names}

    got = attempt("accumulate", accumulated)
    if isinstance(got, AdapterFailure):
        ctx.emit("accumulation_fn", Status.ERROR, f"accumulate raised {got.quoted(QUOTE)}")
        return Report(stream.record_many(ctx.results))
    mag = {k: 4.0 * np.abs(total[k]) + 1e-300 for k in names}
    a = ctx.assess(got, total, mag, hooks.dtype)
    bug, hint = BugClass.ACCUMULATION_MISMATCH, ""
    if not a.ok and a.factor is not None:
        K = micro_batches
        if abs(a.factor - K) < 1e-6 * K:
            bug, hint = BugClass.MICRO_BATCHES_SUMMED, (
                f"; factor {K}: the {K} micro-batch gradients were summed without dividing by {K}")
        elif abs(a.factor - 1.0 / K) < 1e-6:
            hint = f"; factor 1/{K}: divided by {K} once too often"
    ctx.record("accumulation_fn", a, bug=bug,
               what=f"gradient left by the user's accumulate over {micro_batches} micro-batches "
                    f"vs the gradient of the mean micro-batch loss{hint}")
    return Report(stream.record_many(ctx.results))
