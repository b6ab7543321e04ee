"""JAX adapter: ``jax.vjp`` / ``jax.jvp`` / ``jax.vmap`` with 64-bit mode enabled.

Imported only when the ``jax`` backend is asked for; ``import gradcheck`` never imports jax.
Every call into JAX runs with ``jax_enable_x64`` on (so float64 really is float64) inside the
``jax.enable_x64(True)`` context, which restores the caller's setting on the way out (and is
thread-local): the rest of the user's process keeps its own default (float32 unless they
enabled x64 themselves).  ``jax.jit`` keys its compiled code on that setting, so the cached
wrappers below are compiled once for x64 and reused.

Every transform of a user's function (evaluation, batched evaluation, batched VJP/JVP) runs
under ``jax.jit``: the jitted wrappers are cached per function object and transform (see
:mod:`._cache`; never shared between two functions) and ``jit`` caches the compiled code per
shape and dtype, so checking the same function again (another point, another seed, another
Hypothesis example) does not trace or compile again.  Like ``jax.jit`` itself this assumes the
function is pure: its result must not depend on mutable Python state read at trace time
(``JaxBackend(jit=False)`` runs everything eagerly).  A function ``jit`` cannot trace
(Python control flow on values, host callbacks) runs eagerly, and where ``vmap`` fails too
the batch is evaluated in a loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradcheck.backends._cache import FunctionCache, missing
from gradcheck.backends.base import Accumulation, Backend, Gradients, Outputs, Semantics
from gradcheck.core import pytree
from gradcheck.engines.jax.x64 import x64

_x64 = x64


def _as_tuple(out: Any) -> tuple[Any, ...]:
    """The output pytree's leaves (``jax.tree_util`` order)."""
    return tuple(jax.tree_util.tree_leaves(out))


def _flatten(out: Any) -> tuple[list[Any], tuple[str, ...] | None]:
    """The output pytree's leaves and their paths (``"['a']"``, ``"[1][0]"``), the paths None
    for one array or a flat tuple/list of arrays (see :class:`~.base.Outputs`)."""
    pairs = jax.tree_util.tree_flatten_with_path(out)[0]
    leaves = [leaf for _, leaf in pairs]
    flat = isinstance(out, (tuple, list)) and all(
        len(p) == 1 and isinstance(p[0], jax.tree_util.SequenceKey) for p, _ in pairs)
    if not pairs or all(len(p) == 0 for p, _ in pairs) or flat:
        return leaves, None
    return leaves, tuple(jax.tree_util.keystr(p) for p, _ in pairs)


def _rows(f: Callable, xs: tuple, vectorize: bool) -> tuple:
    """``f`` applied to each row of the stacked tuple ``xs``, results stacked per output:
    ``jax.vmap`` if ``vectorize``, else one call per row (unrolled inside the trace)."""
    if vectorize:
        return _as_tuple(jax.vmap(f)(xs))
    rows = [_as_tuple(f(tuple(x[b] for x in xs))) for b in range(xs[0].shape[0])]
    return tuple(jnp.stack([r[k] for r in rows]) for k in range(len(rows[0])))


_BUCKET = 64
_SMALL_BUCKET = 8


def _bucket(rows: int) -> int:
    """The padded batch size: a multiple of :data:`_BUCKET` rounded up to a power of two
    times it (18 and 42 rows share 64; 1280 rows of a localization take 2048).  Batches of
    at most :data:`_SMALL_BUCKET` rows (the fast screen's 8 points of one probe) get a bucket
    of their own: padding them to 64 would evaluate 8 times the points they need."""
    if rows <= _SMALL_BUCKET:
        return _SMALL_BUCKET
    size = _BUCKET
    while size < rows:
        size *= 2
    return size


def _pad_rows(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` with its last row repeated up to ``rows`` rows (padding rows stay in the domain)."""
    a = np.asarray(a)
    if len(a) >= rows or len(a) == 0:
        return a
    return np.concatenate([a, np.repeat(a[-1:], rows - len(a), axis=0)])


_UNROLLED = 4


def _pad_zeros(a: np.ndarray, vectorize: bool) -> np.ndarray:
    """Cotangents / tangents padded with zero rows to :data:`_UNROLLED` rows when the rows are
    unrolled in the trace: one VJP (rounding, agreement checks) and three probes then share one
    compiled transform per function, shape and dtype."""
    a = np.asarray(a)
    if vectorize or len(a) >= _UNROLLED:
        return a
    return np.concatenate([a, np.zeros((_UNROLLED - len(a),) + a.shape[1:], dtype=a.dtype)])


def _raise_if_no_forward(exc: TypeError) -> None:
    """A ``jax.custom_vjp`` function has no forward mode by construction: a skip, not an error."""
    if "custom_vjp" in str(exc):
        raise NotImplementedError(f"forward mode is not available for this function: "
                                  f"{str(exc).splitlines()[0]}") from exc


class JaxBackend(Backend):
    """JAX: functional reverse and forward mode; gradients are always fresh values."""

    name = "jax"
    semantics = Semantics(
        Accumulation.FUNCTIONAL,
        stop_gradient="stop_gradient",
        forward_mode_respects_no_grad=True,
        notes="jax.grad returns fresh arrays; lax.stop_gradient blocks every mode and order",
    )
    supports_jvp = True
    supports_order2 = True
    vjp_gives_primal = True  # vjp_batch: the outputs of jax.vjp's forward (Gradients.primal)
    dtypes = ("float64", "float32", "float16", "bfloat16")
    complex_convention = (
        "jax: for a real loss L of z = x + iy, jax.grad returns dL/dx - i dL/dy (the "
        "conjugate of torch's), and a VJP maps an output cotangent c to c * df/dz + "
        "conj(c) * conj(df/dconj(z)) (no conjugate for a holomorphic f)")

    def __init__(self, jit: bool = True) -> None:
        self.jit = jit
        self._compiled = FunctionCache()  # (fn, transform) -> jax.jit wrapper
        self._eager = FunctionCache()  # (fn, transform) -> True where jit failed / vmap failed
        self._kernels: Any = None  # a kernel recorder while trace_kernels runs

    def version(self) -> str:
        return str(jax.__version__)

    def tree_flatten(self, value: Any) -> tuple[list[tuple[str, Any]], Any, Any]:
        """``jax.tree_util``'s flattening (dict keys sorted, the nodes registered with JAX
        included); gradcheck's own where JAX leaves a container (a plain dataclass) as a
        leaf."""
        pairs, treedef = jax.tree_util.tree_flatten_with_path(value)
        if any(pytree.is_container(leaf) for _, leaf in pairs):
            return pytree.flatten(value)
        return ([(jax.tree_util.keystr(path), leaf) for path, leaf in pairs],
                lambda leaves: jax.tree_util.tree_unflatten(treedef, list(leaves)), treedef)

    def _run(self, fn: Callable, key: tuple, build: Callable[[], Callable], *xs: Any) -> Any:
        """``build()(*xs)``, jitted and cached per ``(fn, key)``; eager where jit cannot trace.

        ``build`` must return a function of ``xs`` only (no point-dependent closure), so the
        cached wrapper serves every later call with the same key.
        """
        if self._kernels is not None:  # trace_kernels: the jaxpr interpreted, not jitted
            return self._kernels.run(build(), *xs)
        if not self.jit or not missing(self._eager.peek(fn, key)):
            return build()(*xs)
        compiled = self._compiled.get(fn, key, lambda: jax.jit(build()))
        try:
            return compiled(*xs)
        except Exception:
            out = build()(*xs)  # the function's own error if it fails eagerly as well
            self._eager.put(fn, key, True)
            return out

    def devices(self) -> list[str]:
        """``cpu`` (the first CPU device), ``cpu:1``... for further host devices (e.g. with
        ``XLA_FLAGS=--xla_force_host_platform_device_count=2``), and ``gpu`` if present."""
        out = ["cpu"] + [f"cpu:{i}" for i in range(1, len(jax.devices("cpu")))]
        try:
            if jax.devices("gpu"):
                out.append("gpu")
        except RuntimeError:
            pass
        return out

    def native_to_numpy(self, value: Any) -> np.ndarray | None:
        if isinstance(value, jax.Array):
            return np.asarray(value)  # bfloat16 stays ml_dtypes' bfloat16: the dtype under test
        return None

    def array_namespace(self) -> Any:
        return jnp

    def op(self, name: str) -> Callable | None:
        """Catalog op ``name`` written for JAX (``gradcheck.engines.jax.ops``)."""
        from gradcheck.engines.jax.ops import get_op

        return get_op(name)

    @_x64
    def trace_kernels(self, run: Callable[[], Any]) -> Any:
        """Every elementwise primitive ``run()`` binds below float64, judged against float64
        (:mod:`gradcheck.engines.jax.kernels`): the calls run uncompiled, their jaxprs
        interpreted equation by equation."""
        from gradcheck.backends.kernels import KernelTrace
        from gradcheck.engines.jax.kernels import Recorder

        rec = Recorder()
        self._kernels = rec
        try:
            run()
        finally:
            self._kernels = None
        return KernelTrace(tuple(rec.calls), tuple(sorted(rec.untraced.items())))

    def user_function(self, fn: Callable) -> Callable:
        """``fn`` run with 64-bit mode on (as every hook and transform here runs), the caller's
        setting restored on the way out."""
        return x64(fn)

    def _device(self, device: str) -> Any:
        kind, _, index = device.partition(":")
        kind = "gpu" if kind in ("gpu", "cuda") else kind
        return jax.devices(kind)[int(index or 0)]

    @_x64
    def to_native(self, a: np.ndarray, device: str) -> Any:
        return jax.device_put(np.asarray(a), self._device(device))

    def _to_np(self, x: Any) -> np.ndarray:
        return np.asarray(x)  # results keep the dtype under test, bfloat16 included

    @_x64
    def evaluate(self, fn: Callable, args: Sequence[np.ndarray], device: str) -> list[np.ndarray]:
        out = self._run(fn, ("evaluate",), lambda: fn, *[self.to_native(a, device) for a in args])
        leaves, paths = _flatten(out)
        return Outputs.of([self._to_np(o) for o in leaves], paths)

    @_x64
    def evaluate_batch(self, fn, args, batched, device):
        """``jax.vmap`` under ``jit``; the batch is padded (repeating its last row) to a size
        bucket (:func:`_bucket`) so that the oracle's batches of different sizes (noise points,
        Richardson tables, retries) share one compiled executable per function and shape."""
        size = next(len(a) for a, b in zip(args, batched, strict=True) if b)
        rows = _bucket(size) if self.jit else size
        padded = [_pad_rows(a, rows) if b else a for a, b in zip(args, batched, strict=True)]
        jargs = [self.to_native(a, device) for a in padded]
        in_axes = tuple(0 if b else None for b in batched)
        key = ("evaluate_batch", in_axes)
        if missing(self._eager.peek(fn, key + ("loop",))):
            try:
                out = self._run(fn, key, lambda: jax.vmap(fn, in_axes=in_axes), *jargs)
                return [self._to_np(o)[:size] for o in _as_tuple(out)]
            except Exception:  # not vmappable (host callbacks, python control flow): loop
                self._eager.put(fn, key + ("loop",), True)
        return super().evaluate_batch(fn, args, batched, device)

    def _partial(self, fn: Callable, jargs: list[Any], diff: Sequence[int]) -> Callable:
        def g(*xs: Any) -> tuple[Any, ...]:
            full = list(jargs)
            for k, x in zip(diff, xs, strict=True):
                full[k] = x
            return _as_tuple(fn(*full))

        return g

    def vjp(self, fn, args, diff, cotangents, device):
        """One row of :meth:`vjp_batch` (the same jitted ``jax.vjp`` and pullback): the rounding
        and agreement checks call it at many points of one shape, so it must not run eagerly
        (every primitive compiled on its own) nor compile a transform of its own."""
        rows = self.vjp_batch(fn, args, diff, [np.asarray(c)[None] for c in cotangents], device)
        return [r[0] for r in rows]

    @_x64
    def vjp_batch(self, fn, args, diff, cotangents, device, vectorize=False):
        """One ``jax.vjp`` and its pullback applied to each cotangent, all under one jit (the
        rows unrolled in the trace); with ``vectorize`` the pullback is vmapped instead."""
        diff = tuple(diff)

        def build() -> Callable:
            def run(jargs: tuple, cts: tuple) -> Any:
                outs, pullback = jax.vjp(self._partial(fn, list(jargs), diff),
                                         *[jargs[k] for k in diff])
                cts = tuple(c.astype(o.dtype) for c, o in zip(cts, outs, strict=True))
                return _rows(pullback, cts, vectorize), outs

            return run

        rows = len(cotangents[0])
        jargs = tuple(self.to_native(a, device) for a in args)
        cts = tuple(self.to_native(_pad_zeros(c, vectorize), device) for c in cotangents)
        out, outs = self._run(fn, ("vjp_batch", diff, len(args), vectorize), build, jargs, cts)
        # the outputs of the forward pass differentiated (compiled with the pullback: where they
        # round differently from evaluate's, the determinism check evaluates f once more)
        return Gradients.of([self._to_np(r)[:rows] for r in out],
                            [self._to_np(o) for o in outs])

    @_x64
    def jvp_batch(self, fn, args, diff, tangents, device, vectorize=False):
        """``jax.jvp`` for each tangent under one jit (``vectorize``: vmapped over them)."""
        diff = tuple(diff)

        def build() -> Callable:
            def run(jargs: tuple, tans: tuple) -> Any:
                primals = tuple(jargs[k] for k in diff)
                g = self._partial(fn, list(jargs), diff)

                def one(t: tuple) -> Any:
                    t = tuple(ti.astype(p.dtype) for ti, p in zip(t, primals, strict=True))
                    return jax.jvp(g, primals, t)[1]

                return _rows(one, tans, vectorize)

            return run

        rows = len(tangents[0])
        jargs = tuple(self.to_native(a, device) for a in args)
        tans = tuple(self.to_native(_pad_zeros(t, vectorize), device) for t in tangents)
        try:
            out = self._run(fn, ("jvp_batch", diff, len(args), vectorize), build, jargs, tans)
        except TypeError as exc:
            _raise_if_no_forward(exc)
            raise
        return [self._to_np(o)[:rows] for o in _as_tuple(out)]

    def jvp(self, fn, args, diff, tangents, device):
        """One row of :meth:`jvp_batch` (see :meth:`vjp`)."""
        rows = self.jvp_batch(fn, args, diff, [np.asarray(t)[None] for t in tangents], device)
        return [r[0] for r in rows]

    def vjp_function(self, fn, diff, n_args):
        def g(*xs: Any) -> tuple[Any, ...]:
            args, cts = list(xs[:n_args]), xs[n_args:]
            _, pullback = jax.vjp(self._partial(fn, args, diff), *[args[k] for k in diff])
            return tuple(pullback(tuple(cts)))

        # the same g object for the same (fn, diff, n_args): its compiled transforms are reused
        return self._compiled.get(fn, ("vjp_function", tuple(diff), n_args), lambda: g)

    def jvp_function(self, fn, diff, n_args):
        def g(*xs: Any) -> tuple[Any, ...]:
            args, tans = list(xs[:n_args]), xs[n_args:]
            try:
                _, out_t = jax.jvp(
                    self._partial(fn, args, diff), tuple(args[k] for k in diff), tuple(tans)
                )
            except TypeError as exc:
                _raise_if_no_forward(exc)
                raise
            return _as_tuple(out_t)

        return self._compiled.get(fn, ("jvp_function", tuple(diff), n_args), lambda: g)

    def training(self, device: str, dtype: str) -> Any:
        from gradcheck.engines.jax.training import JaxTraining

        return JaxTraining(self, device, dtype)
