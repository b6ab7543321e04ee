"""JAX training hooks: functional gradients, an optax-style clip written here, ``jax.jit`` runner.

JAX stores no gradients: ``jax.grad``/``jax.vjp`` return fresh arrays and a training step keeps
whichever it was given.  These hooks model exactly that: :meth:`JaxTraining.backward` *replaces*
the kept gradients with the new call's result, :meth:`JaxTraining.zero_grad` drops them.

JAX has no built-in clip.  :meth:`JaxTraining.clip_grad_norm` follows optax's
``clip_by_global_norm`` (``select(norm < max_norm, g, g / norm * max_norm)``, returning the norm
before clipping) with two deliberate differences, both measured by the semantic probes: the
global norm is accumulated in at least float32 (squaring float16 elements above 256 in float16
overflows to inf), and a negative or NaN threshold is rejected instead of applied.

Parameter names of an adopted pytree are JAX's own key paths,
``jax.tree_util.keystr(path, simple=True, separator=".")`` (``{"ssm_0": {"A": ...}}`` ->
``"ssm_0.A"``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradcheck.backends.guarded import AdapterFailure, attempt
from gradcheck.backends.training import ClipSemantics, CutPoint, TrainingHooks, validate_max_norm
from gradcheck.engines.jax.x64 import x64_methods

_DTYPES = {"float64": jnp.float64, "float32": jnp.float32, "float16": jnp.float16,
           "bfloat16": jnp.bfloat16}

# How a user's loss fails under jax.jit / jax.vmap where it runs eagerly: the tracer errors
# (ConcretizationTypeError, TracerBoolConversionError, TracerArrayConversionError: TypeError;
# NonConcreteBooleanIndexError: IndexError), a method only concrete arrays have
# (AttributeError: ``block_until_ready``), a host callback the transformation does not take
# (ValueError; NotImplementedError: a RuntimeError), XLA refusing to compile (JaxRuntimeError:
# a RuntimeError).  The fallback re-runs the loss eagerly, so a real error of the loss is
# raised there, unchanged; anything else the traced loss raises is raised as it is.
_UNTRACEABLE = (TypeError, IndexError, AttributeError, ValueError, RuntimeError)


def _np(x: Any) -> np.ndarray:
    a = np.asarray(x)
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a.copy()


def _key_name(path: tuple) -> str:
    return jax.tree_util.keystr(path, simple=True, separator=".")


def _host(a: Any, dtype: Any) -> np.ndarray:
    """Cast on the host (no XLA compilation for a dtype conversion)."""
    return np.asarray(a, dtype=np.float64).astype(np.dtype(dtype))


@jax.jit
def _clip(grads: dict[str, Any], limit: Any) -> tuple[Any, dict[str, Any]]:
    """optax-style clip by global norm, norm accumulated in at least float32."""
    acc = jnp.promote_types(next(iter(grads.values())).dtype, jnp.float32)
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g.astype(acc))) for g in grads.values()))
    keep = norm < limit
    return norm, {k: jnp.where(keep, g, (g.astype(acc) / norm * limit).astype(g.dtype))
                  for k, g in grads.items()}


@partial(jax.jit, static_argnums=(0, 1, 2))
def _jitted_loss(loss_fn: Callable, treedef: Any, names: tuple[str, ...],
                 params: dict[str, Any], *inputs: Any) -> Any:
    """``loss_fn(model, *inputs)`` compiled once per loss, structure and shapes (shared by every
    hooks instance: an audit's model-dtype and float64 hooks reuse one compilation)."""
    model = dict(params) if treedef is None else jax.tree_util.tree_unflatten(
        treedef, [params[k] for k in names])
    return loss_fn(model, *inputs)


@jax.jit
def _sgd(params: dict[str, Any], grads: dict[str, Any], lr: Any) -> dict[str, Any]:
    return {k: (p - lr * grads[k]).astype(p.dtype) for k, p in params.items()}


@x64_methods  # every hook computes in float64 mode; the user's own setting is left as it was
class JaxTraining(TrainingHooks):
    """JAX: gradients are values; the kept ones are the last call's (functional)."""

    clip_semantics = ClipSemantics(
        "pre_clip", 0.0,
        "gradcheck's optax-style clip: returns the global norm before clipping; gradients are "
        "scaled by max_norm / norm when norm >= max_norm")
    runner_kind = "jax.jit(jax.grad(loss))"

    def __init__(self, backend: Any, device: str, dtype: str) -> None:
        super().__init__(backend, device, dtype)
        self._jdtype = _DTYPES[dtype]
        kind = "gpu" if device in ("gpu", "cuda") else device
        self._dev = jax.devices(kind)[0]
        self._params: dict[str, Any] = {}
        self._treedef: Any = None
        self._grads: dict[str, Any] | None = None
        self._retained: tuple[Callable, Any] | None = None
        self._batched: dict[int, Any] = {}
        self._jitted: dict[int, Any] = {}
        self._inputs: tuple = ()

    @property
    def xp(self) -> Any:
        return jnp

    # -- parameters ------------------------------------------------------------------------
    def create_parameters(self, values: Mapping[str, np.ndarray]) -> None:
        self._treedef = None
        self._params = {k: self.to_native(v) for k, v in values.items()}
        self._grads = None

    def adopt(self, model: Any) -> None:
        leaves, self._treedef = jax.tree_util.tree_flatten_with_path(model)
        self._params = {_key_name(path): jnp.asarray(leaf) for path, leaf in leaves}
        if len(self._params) != len(leaves):
            raise ValueError("two pytree leaves map to the same key-path name")
        self._grads = None
        first = next(iter(self._params.values()), None)
        if first is not None:
            self._jdtype = first.dtype
            self.dtype = str(first.dtype)

    def _view(self, params: Mapping[str, Any]) -> Any:
        if self._treedef is None:
            return dict(params)
        return jax.tree_util.tree_unflatten(self._treedef, [params[k] for k in self._params])

    @property
    def model(self) -> Any:
        return self._view(self._params)

    def parameter_names(self) -> tuple[str, ...]:
        return tuple(self._params)

    def parameter_values(self) -> dict[str, np.ndarray]:
        return {k: _np(v).astype(np.float64) for k, v in self._params.items()}

    def assign(self, values: Mapping[str, np.ndarray]) -> None:
        for k, v in values.items():
            old = self._params[k]
            self._params[k] = jax.device_put(_host(v, old.dtype).reshape(old.shape), self._dev)

    def to_native(self, a: np.ndarray) -> Any:
        return jax.device_put(_host(a, self._jdtype), self._dev)

    def cast_tree(self, obj: Any, dtype: str) -> Any:
        def cast(x: Any) -> Any:
            if isinstance(x, (jax.Array, np.ndarray)) and jnp.issubdtype(x.dtype, jnp.floating):
                return jnp.asarray(x, _DTYPES[dtype])
            return x

        return jax.tree_util.tree_map(cast, obj)

    def model_copy(self, dtype: str) -> Any:
        return self.cast_tree(self.model, dtype)

    # -- gradients -------------------------------------------------------------------------
    def _closed(self, loss_fn: Callable, inputs: tuple) -> Callable:
        if self.compile_losses and self._jitted.get(id(loss_fn), True) is not None:
            self._jitted[id(loss_fn)] = True
            names = tuple(self._params)
            return lambda params: _jitted_loss(loss_fn, self._treedef, names, params, *inputs)
        return lambda params: loss_fn(self._view(params), *inputs)

    def _eager_fallback(self, loss_fn: Callable, run: Callable[[Callable], Any]) -> Any:
        """``run(closed)`` jitted when :attr:`compile_losses`; eagerly if tracing fails."""
        try:
            return run(self._closed(loss_fn, self._inputs))
        except _UNTRACEABLE:
            if not self.compile_losses or self._jitted.get(id(loss_fn)) is None:
                raise
            self._jitted[id(loss_fn)] = None  # not jittable: python control flow on values
            return run(self._closed(loss_fn, self._inputs))

    def snapshot(self) -> Any:
        return dict(self._params), None if self._grads is None else dict(self._grads)

    def restore(self, snap: Any) -> None:
        params, grads = snap
        self._params = dict(params)
        self._grads = None if grads is None else dict(grads)

    def evaluate_eagerly(self, loss_fn, *inputs):
        return super().evaluate_eagerly(loss_fn, *inputs)  # here under float64 mode

    def loss_value(self, loss_fn, *inputs):
        self._inputs = inputs
        with self.seeded():
            return float(self._eager_fallback(loss_fn, lambda f: f(self._params)))

    def loss_batch(self, loss_fn, name, rows, *inputs):
        """One jitted ``vmap`` over all parameters, rows padded to a power of two (>= 32), so
        an audit compiles once; the eager loop where the loss cannot be jitted."""
        key = id(loss_fn)
        if key in self._batched and self._batched[key] is None:
            return super().loss_batch(loss_fn, name, rows, *inputs)
        fn = self._batched.get(key)
        if fn is None:
            def one(params: dict[str, Any], *xs: Any) -> Any:
                return loss_fn(self._view(params), *xs)

            fn = jax.jit(jax.vmap(one, in_axes=(0,) + (None,) * len(inputs)))
            self._batched[key] = fn
        n = len(rows)
        size = max(32, 1 << (n - 1).bit_length())
        batched = {}
        for k, p in self._params.items():
            if k == name:
                host = _host(rows, p.dtype)
                host = np.concatenate([host, np.repeat(host[-1:], size - n, axis=0)])
            else:
                host = np.broadcast_to(np.asarray(p), (size,) + p.shape)
            batched[k] = jnp.asarray(host)
        try:
            with self.seeded():
                return np.asarray(fn(batched, *inputs), dtype=np.float64)[:n]
        except _UNTRACEABLE:  # python control flow on values, host callbacks: loop eagerly
            self._batched[key] = None
            return super().loss_batch(loss_fn, name, rows, *inputs)

    def backward(self, loss_fn, *inputs, scale=1.0, retain=False):
        self._inputs = inputs
        with self.seeded():
            value, pullback = self._eager_fallback(loss_fn, lambda f: jax.vjp(f, self._params))
        seed = np.asarray(scale, dtype=np.dtype(value.dtype))
        self._grads = pullback(seed)[0]  # functional: the kept gradients are replaced
        self._retained = (pullback, seed) if retain else None
        return float(value)

    def backward_again(self) -> None:
        if self._retained is None:
            raise RuntimeError("backward_again() needs a backward(retain=True) first")
        pullback, seed = self._retained
        self._grads = pullback(seed)[0]

    def gradients(self):
        if self._grads is None:
            return {k: None for k in self._params}
        return {k: _np(self._grads[k]) for k in self._params}

    def monitor_argument(self) -> Any:
        return self._view(self._grads) if self._grads is not None else None

    def set_gradients(self, values):
        self._grads = {k: jax.device_put(_host(values[k], p.dtype).reshape(p.shape), self._dev)
                       for k, p in self._params.items()}

    def zero_grad(self) -> None:
        self._grads = None

    def clip_grad_norm(self, max_norm: float) -> float:
        limit = validate_max_norm(max_norm)
        if self._grads is None:
            return 0.0
        norm, self._grads = _clip(self._grads, np.float64(limit))
        return float(norm)

    def sgd_step(self, lr: float) -> None:
        if self._grads is None:
            return
        self._params = _sgd(self._params, self._grads, np.float64(lr))

    # -- stop points, runners, user steps --------------------------------------------------
    def stop_gradient(self, x: Any) -> Any:
        return jax.lax.stop_gradient(x)

    def no_grad_region(self, fn: Callable) -> Callable:
        def region(*args: Any) -> Any:
            return jax.tree_util.tree_map(jax.lax.stop_gradient, fn(*args))

        return region

    def compile(self, loss_fn):
        grad_fn = jax.jit(jax.grad(lambda params, *xs: loss_fn(self._view(params), *xs)))

        def run(*inputs: Any) -> dict[str, np.ndarray]:
            g = grad_fn(self._params, *inputs)
            return {k: _np(g[k]).astype(np.float64) for k in self._params}

        return run

    def run_user_step(self, step, *inputs):
        with self.seeded():
            out = step(self.model, *inputs)
        out = out[0] if isinstance(out, tuple) else out
        leaves = jax.tree_util.tree_flatten_with_path(out)[0]
        if self._treedef is None:
            self._params = {k: jnp.asarray(out[k]) for k in self._params}
        else:
            self._params = {_key_name(path): jnp.asarray(leaf) for path, leaf in leaves}

    def find_cut_points(self, loss_fn, *inputs):
        def trace() -> Any:
            with self.seeded():
                return jax.make_jaxpr(self._closed(loss_fn, inputs))(self._params)

        # the user's loss, traced: whatever stops the trace is reported, not raised
        jaxpr = attempt("make_jaxpr", trace)
        if isinstance(jaxpr, AdapterFailure):  # a host round trip under tracing, usually
            exc = jaxpr.exception
            first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
            return [CutPoint(f"not traceable ({type(exc).__name__}: {first})", "?", True)]
        found: list[CutPoint] = []
        _scan_jaxpr(jaxpr.jaxpr, found)
        return found

    # -- the model audit's cotangents, the fan-out probe's views -------------------------------
    def gradient_at_zeros(self, f, bases):
        return jax.grad(f)([jnp.zeros_like(b) for b in bases])

    @property
    def views_inplace_loss(self) -> Callable[[Any, Any], Any]:
        return _views_inplace_loss


def _views_inplace_loss(p: Any, x: Any) -> Any:
    a = p["a"]
    z = (a * x).at[1:3].multiply(a[0:2])
    z = z + a
    v = a.reshape(2, 2).T.reshape(-1)
    return jnp.sum(jnp.sin(z) * v * a)


def _scan_jaxpr(jaxpr: Any, found: list[CutPoint]) -> None:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "stop_gradient":
            cut = CutPoint("graph cut: lax.stop_gradient", _where(eqn))
            if cut not in found:
                found.append(cut)
        for sub in _sub_jaxprs(eqn.params):
            _scan_jaxpr(sub, found)


def _sub_jaxprs(params: Mapping[str, Any]) -> list[Any]:
    out = []
    for v in params.values():
        for item in (v if isinstance(v, (tuple, list)) else (v,)):
            inner = getattr(item, "jaxpr", None)
            if inner is not None and hasattr(inner, "eqns"):
                out.append(inner)
            elif hasattr(item, "eqns"):
                out.append(item)
    return out


def _where(eqn: Any) -> str:
    try:
        from jax._src import source_info_util

        where = source_info_util.summarize(eqn.source_info)
    except (ImportError, AttributeError, TypeError, ValueError):  # private API, may change:
        return "?"  # the location is a courtesy
    cwd = os.getcwd() + os.sep
    return where[len(cwd):] if where.startswith(cwd) else where
