"""MLX adapter: functional transforms ``mx.vjp`` (reverse) and ``mx.jvp`` (forward), nested for
order 2; ``mx.stop_gradient`` as the stop point.

Imported only when the ``mlx`` backend is asked for (``pip install "mlx[cpu]"``).  Every call
runs on the CPU stream (``with mx.stream(mx.cpu)``): MLX's linear algebra exists only there and
float64 is a CPU-only dtype.  MLX converts a float64 NumPy array to float32 unless told
otherwise, so the adapter always passes the dtype explicitly.  MLX is lazy: outputs are
evaluated when they are converted to NumPy.

Two more reverse paths are compared with ``mx.vjp`` (the EAGER_FUNC check):
``mx.value_and_grad`` of the scalar ``sum_i <v_i, f_i(x)>`` and ``mx.compile`` of the VJP (the
graph compiler, which fuses elementwise kernels).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib.metadata import version as _dist_version
from typing import Any

import mlx.core as mx
import mlx.optimizers as optim
import numpy as np

from gradcheck.backends.base import Accumulation, Backend, Semantics
from gradcheck.backends.process_training import ParamRef
from gradcheck.backends.training import ClipSemantics

_DTYPES = {"float64": mx.float64, "float32": mx.float32, "float16": mx.float16,
           "int64": mx.int64, "int32": mx.int32, "bool": mx.bool_}


_NOT_IMPLEMENTED = re.compile(r"not (yet )?implemented", re.IGNORECASE)


@contextlib.contextmanager
def _capability() -> Iterator[None]:
    """MLX says a transform has no rule for a primitive (``[Primitive::jvp] Not implemented for
    Convolution``, ``[scatter] JVP not yet implemented``) with a ValueError / RuntimeError: that
    is a missing capability, which the contract spells ``NotImplementedError`` (a skip)."""
    try:
        yield
    except (ValueError, RuntimeError) as exc:
        if _NOT_IMPLEMENTED.search(str(exc)):
            raise NotImplementedError(f"MLX {_dist_version('mlx')}: {exc}") from exc
        raise


def _native(a: np.ndarray) -> mx.array:
    a = np.asarray(a)
    dtype = _DTYPES.get(a.dtype.name)
    if dtype is None:
        raise NotImplementedError(f"MLX adapter: no MLX dtype for NumPy {a.dtype}")
    return mx.array(a, dtype=dtype)


def _numpy(x: Any) -> np.ndarray:
    mx.eval(x)
    return np.array(x, copy=True)


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _partial(fn: Callable, args: Sequence[Any], diff: Sequence[int]) -> Callable:
    """``g(*xs) -> list of outputs`` with ``xs`` the differentiated arguments."""

    def g(*xs: Any) -> list[Any]:
        full = list(args)
        for k, x in zip(diff, xs, strict=True):
            full[k] = x
        return _as_list(fn(*full))

    return g


def _vjp(fn: Callable, args: list[Any], diff: Sequence[int], cts: Sequence[Any]) -> list[Any]:
    outs = _partial(fn, args, diff)(*(args[k] for k in diff))
    cts = [c.astype(o.dtype) for c, o in zip(cts, outs, strict=True)]
    _, grads = mx.vjp(_partial(fn, args, diff), [args[k] for k in diff], cts)
    return list(grads)


def _jvp(fn: Callable, args: list[Any], diff: Sequence[int], tans: Sequence[Any]) -> list[Any]:
    _, out_t = mx.jvp(_partial(fn, args, diff), [args[k] for k in diff], list(tans))
    return list(out_t)


class MlxBackend(Backend):
    """Apple MLX (CPU build: ``pip install "mlx[cpu]"``)."""

    name = "mlx"
    semantics = Semantics(
        Accumulation.FUNCTIONAL,
        stop_gradient="stop_gradient",
        notes="mx.vjp / mx.grad return fresh arrays; optimizers apply gradients explicitly",
    )
    supports_jvp = True
    supports_order2 = True
    dtypes = ("float64", "float32", "float16")

    def version(self) -> str:
        return _dist_version("mlx")

    def devices(self) -> list[str]:
        return ["cpu"]

    def native_to_numpy(self, value: Any) -> np.ndarray | None:
        return _numpy(value) if isinstance(value, mx.array) else None

    def array_namespace(self) -> Any:
        return mx

    def op(self, name: str) -> Callable | None:
        from gradcheck.engines.mlx.ops import get_op

        return get_op(name)

    def evaluate(self, fn, args, device):
        with mx.stream(mx.cpu), _capability():  # fn may be a VJP / JVP function (order 2)
            return [_numpy(o) for o in _as_list(fn(*[_native(a) for a in args]))]

    def vjp(self, fn, args, diff, cotangents, device):
        with mx.stream(mx.cpu), _capability():
            grads = _vjp(fn, [_native(a) for a in args], diff, [_native(c) for c in cotangents])
            return [_numpy(g) for g in grads]

    def alternative_vjps(self, fn, args, diff, cotangents, device):
        with mx.stream(mx.cpu), _capability():
            margs = [_native(a) for a in args]
            cts = [_native(c) for c in cotangents]
            g = _partial(fn, margs, diff)

            def pairing(*xs: Any) -> Any:
                return sum(mx.sum(o * c.astype(o.dtype)) for o, c in zip(g(*xs), cts,
                                                                          strict=True))

            _, grads = mx.value_and_grad(pairing, argnums=list(range(len(diff))))(
                *(margs[k] for k in diff))
            grads = _as_list(grads)
            compiled = mx.compile(lambda *xs: _vjp(fn, list(xs), diff, cts))(*margs)
            return {"mx.value_and_grad of <v, f(x)>": [_numpy(x) for x in grads],
                    "mx.compile(mx.vjp)": [_numpy(x) for x in compiled]}

    def jvp(self, fn, args, diff, tangents, device):
        with mx.stream(mx.cpu), _capability():
            out = _jvp(fn, [_native(a) for a in args], diff, [_native(t) for t in tangents])
            return [_numpy(t) for t in out]

    def vjp_function(self, fn, diff, n_args):
        def g(*xs: Any) -> tuple[Any, ...]:
            return tuple(_vjp(fn, list(xs[:n_args]), diff, xs[n_args:]))

        return g

    def jvp_function(self, fn, diff, n_args):
        def g(*xs: Any) -> tuple[Any, ...]:
            return tuple(_jvp(fn, list(xs[:n_args]), diff, xs[n_args:]))

        return g

    def training(self, device: str, dtype: str) -> Any:
        return MlxTraining(dtype)


class MlxTraining:
    """Training hooks (method set of :class:`~.process_training.ProcessTraining`): parameters in
    a dict, ``mx.value_and_grad`` for backward (fresh gradients each call), the engine's
    ``mlx.optimizers.clip_grad_norm`` and ``mlx.optimizers.SGD``; stop points use
    ``mx.stop_gradient``."""

    clip_semantics = ClipSemantics(
        "pre_clip", 1e-6, "mlx.optimizers.clip_grad_norm returns the original norm and scales "
        "by min(max_norm / (norm + 1e-6), 1)")

    def __init__(self, dtype: str) -> None:
        self.dtype = _DTYPES[dtype]
        self._params: dict[str, mx.array] = {}
        self._grads: dict[str, mx.array] = {}

    def create(self, params: Mapping[str, np.ndarray]) -> None:
        with mx.stream(mx.cpu):
            self._params = {k: mx.array(np.asarray(v), dtype=self.dtype)
                            for k, v in params.items()}
        self._grads = {}

    def backward(self, op: str, args: Sequence[Any], weights: np.ndarray | None = None) -> float:
        from gradcheck.engines.mlx.ops import get_op

        f = get_op(op)
        if f is None:
            raise ValueError(f"op {op!r} is not an MLX catalog op")

        def loss(params: dict[str, mx.array]) -> mx.array:
            vals = [(mx.stop_gradient(params[a.name]) if a.stop else params[a.name])
                    if isinstance(a, ParamRef) else mx.array(np.asarray(a), dtype=self.dtype)
                    for a in args]
            y = f(*vals)
            if weights is not None:
                y = y * mx.array(np.asarray(weights), dtype=self.dtype)
            return mx.sum(y)

        with mx.stream(mx.cpu):
            value, grads = mx.value_and_grad(loss)(dict(self._params))
            mx.eval(value, grads)
        self._grads = dict(grads)
        return float(value.item())  # type: ignore[arg-type]  # a real scalar

    def grads(self) -> dict[str, np.ndarray | None]:
        return {k: (_numpy(self._grads[k]) if k in self._grads else None) for k in self._params}

    def params(self) -> dict[str, np.ndarray | None]:
        return {k: _numpy(v) for k, v in self._params.items()}

    def zero_grad(self) -> None:
        self._grads = {}

    def clip_grad_norm(self, max_norm: float) -> float:
        with mx.stream(mx.cpu):
            clipped, norm = optim.clip_grad_norm(self._grads, max_norm)
            mx.eval(clipped, norm)
        self._grads = dict(clipped)
        return float(norm.item()) if isinstance(norm, mx.array) else float(norm)  # type: ignore[arg-type]

    def step(self, lr: float) -> None:
        with mx.stream(mx.cpu):
            updated = optim.SGD(learning_rate=lr).apply_gradients(
                self._grads, {k: self._params[k] for k in self._grads})
            mx.eval(updated)
        self._params.update(updated)

    def close(self) -> None:
        self._params, self._grads = {}, {}
