"""JAX adapter: ``jax.vjp`` / ``jax.jvp`` / ``jax.vmap`` with 64-bit mode enabled.

Imported only when the ``jax`` backend is asked for; ``import gradcheck`` never imports jax.
Creating the adapter enables ``jax_enable_x64`` so float64 really is float64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from .base import Accumulation, Backend, Semantics

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402  (after x64 is on)


def _as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


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
    dtypes = ("float64", "float32", "float16", "bfloat16")

    def version(self) -> str:
        return str(jax.__version__)

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
            a = np.asarray(value)
            return a.astype(np.float32) if a.dtype.name == "bfloat16" else a
        return None

    def array_namespace(self) -> Any:
        return jnp

    def op(self, name: str) -> Callable | None:
        """Catalog op ``name`` written for JAX (``reference.jax``)."""
        from reference.jax import get_op

        return get_op(name)

    def _device(self, device: str) -> Any:
        kind, _, index = device.partition(":")
        kind = "gpu" if kind in ("gpu", "cuda") else kind
        return jax.devices(kind)[int(index or 0)]

    def to_native(self, a: np.ndarray, device: str) -> Any:
        return jax.device_put(np.asarray(a), self._device(device))

    def _to_np(self, x: Any) -> np.ndarray:
        return np.asarray(x)  # results keep the dtype under test, bfloat16 included

    def evaluate(self, fn: Callable, args: Sequence[np.ndarray], device: str) -> list[np.ndarray]:
        out = fn(*[self.to_native(a, device) for a in args])
        return [self._to_np(o) for o in _as_tuple(out)]

    def evaluate_batch(self, fn, args, batched, device):
        jargs = [self.to_native(a, device) for a in args]
        in_axes = tuple(0 if b else None for b in batched)
        try:
            out = jax.vmap(fn, in_axes=in_axes)(*jargs)
        except Exception:  # not vmappable (host callbacks, python control flow): loop
            return super().evaluate_batch(fn, args, batched, device)
        return [self._to_np(o) for o in _as_tuple(out)]

    def _partial(self, fn: Callable, jargs: list[Any], diff: Sequence[int]) -> Callable:
        def g(*xs: Any) -> tuple[Any, ...]:
            full = list(jargs)
            for k, x in zip(diff, xs, strict=True):
                full[k] = x
            return _as_tuple(fn(*full))

        return g

    def vjp(self, fn, args, diff, cotangents, device):
        jargs = [self.to_native(a, device) for a in args]
        outs, pullback = jax.vjp(self._partial(fn, jargs, diff), *[jargs[k] for k in diff])
        cts = tuple(
            self.to_native(c, device).astype(o.dtype) for c, o in zip(cotangents, outs, strict=True)
        )
        return [self._to_np(r) for r in pullback(cts)]

    def jvp(self, fn, args, diff, tangents, device):
        jargs = [self.to_native(a, device) for a in args]
        primals = tuple(jargs[k] for k in diff)
        tans = tuple(self.to_native(t, device).astype(p.dtype)
                     for t, p in zip(tangents, primals, strict=True))
        try:
            _, out_t = jax.jvp(self._partial(fn, jargs, diff), primals, tans)
        except TypeError as exc:
            _raise_if_no_forward(exc)
            raise
        return [self._to_np(o) for o in _as_tuple(out_t)]

    def vjp_function(self, fn, diff, n_args):
        def g(*xs: Any) -> tuple[Any, ...]:
            args, cts = list(xs[:n_args]), xs[n_args:]
            _, pullback = jax.vjp(self._partial(fn, args, diff), *[args[k] for k in diff])
            return tuple(pullback(tuple(cts)))

        return g

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

        return g

    def training(self, device: str, dtype: str) -> Any:
        from .training import JaxTraining

        return JaxTraining(self, device, dtype)
