"""TensorFlow adapter: ``tf.GradientTape`` (reverse), ``tf.autodiff.ForwardAccumulator``
(forward), nested tapes for order 2; ``tf.stop_gradient`` as the stop point.

Imported only when the ``tensorflow`` backend is asked for (``pip install tensorflow-cpu``).
The main reverse path is a non-persistent tape (one ``gradient`` call with every output's
cotangent); the alternative path is a *persistent* tape queried once per output and summed,
which must agree with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from gradcheck.backends.base import Accumulation, Backend, Semantics
from gradcheck.backends.process_training import ParamRef
from gradcheck.engines.tensorflow.ops import OPS

_ZERO = tf.UnconnectedGradients.ZERO


def _as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _tape_vjp(fn: Callable, args: list[Any], diff: Sequence[int], cts: Sequence[Any]) -> list:
    leaves = [args[k] for k in diff]
    with tf.GradientTape() as tape:
        for x in leaves:
            tape.watch(x)
        outs = _as_tuple(fn(*args))
    return tape.gradient(list(outs), leaves, output_gradients=list(cts),
                         unconnected_gradients=_ZERO)


def _tape_jvp(fn: Callable, args: list[Any], diff: Sequence[int], tans: Sequence[Any]) -> list:
    with tf.autodiff.ForwardAccumulator([args[k] for k in diff], list(tans)) as acc:
        outs = _as_tuple(fn(*args))
    return [acc.jvp(o, unconnected_gradients=_ZERO) for o in outs]


class TensorflowBackend(Backend):
    """TensorFlow 2 eager mode."""

    name = "tensorflow"
    semantics = Semantics(
        Accumulation.FUNCTIONAL,
        stop_gradient="stop_gradient",
        notes="tape.gradient returns fresh tensors; a non-persistent tape answers once; "
              "optimizers apply gradients explicitly",
    )
    supports_jvp = True
    supports_order2 = True
    dtypes = ("float64", "float32")

    def version(self) -> str:
        return str(tf.__version__)

    def devices(self) -> list[str]:
        return ["cpu"] + (["gpu"] if tf.config.list_physical_devices("GPU") else [])

    def native_to_numpy(self, value: Any) -> np.ndarray | None:
        return value.numpy() if isinstance(value, (tf.Tensor, tf.Variable)) else None

    def array_namespace(self) -> Any:
        return tf

    def op(self, name: str) -> Callable | None:
        return OPS.get(name)

    def _native(self, args: Sequence[np.ndarray], device: str) -> list[Any]:
        with tf.device(device.upper()):
            return [tf.constant(np.asarray(a)) for a in args]

    def evaluate(self, fn, args, device):
        with tf.device(device.upper()):
            return [np.asarray(o) for o in _as_tuple(fn(*self._native(args, device)))]

    def vjp(self, fn, args, diff, cotangents, device):
        with tf.device(device.upper()):
            grads = _tape_vjp(fn, self._native(args, device), diff,
                              self._native(cotangents, device))
        return [g.numpy() for g in grads]

    def alternative_vjps(self, fn, args, diff, cotangents, device):
        """A persistent tape, asked once per output; the per-output gradients summed."""
        with tf.device(device.upper()):
            targs, cts = self._native(args, device), self._native(cotangents, device)
            leaves = [targs[k] for k in diff]
            with tf.GradientTape(persistent=True) as tape:
                for x in leaves:
                    tape.watch(x)
                outs = _as_tuple(fn(*targs))
            total = [tf.zeros_like(x) for x in leaves]
            for o, c in zip(outs, cts, strict=True):
                parts = tape.gradient(o, leaves, output_gradients=c, unconnected_gradients=_ZERO)
                total = [t + p for t, p in zip(total, parts, strict=True)]
            del tape
        return {"GradientTape(persistent=True), per output": [t.numpy() for t in total]}

    def jvp(self, fn, args, diff, tangents, device):
        with tf.device(device.upper()):
            out = _tape_jvp(fn, self._native(args, device), diff, self._native(tangents, device))
        return [t.numpy() for t in out]

    def vjp_function(self, fn, diff, n_args):
        def g(*xs: Any) -> tuple[Any, ...]:
            return tuple(_tape_vjp(fn, list(xs[:n_args]), diff, xs[n_args:]))

        return g

    def jvp_function(self, fn, diff, n_args):
        def g(*xs: Any) -> tuple[Any, ...]:
            return tuple(_tape_jvp(fn, list(xs[:n_args]), diff, xs[n_args:]))

        return g

    def training(self, device: str, dtype: str) -> Any:
        return TensorflowTraining(dtype)


class TensorflowTraining:
    """Training hooks (method set of :class:`~.process_training.ProcessTraining`) on
    ``tf.Variable`` parameters: ``tape.gradient`` for backward, ``tf.clip_by_global_norm`` for
    clipping, ``assign_sub`` for the SGD step; stop points use ``tf.stop_gradient``."""

    def __init__(self, dtype: str) -> None:
        self.dtype = tf.as_dtype(dtype)
        self._vars: dict[str, tf.Variable] = {}
        self._grads: dict[str, Any] = {}

    def create(self, params: Mapping[str, np.ndarray]) -> None:
        self._vars = {k: tf.Variable(np.asarray(v), dtype=self.dtype) for k, v in params.items()}
        self._grads = {}

    def backward(self, op: str, args: Sequence[Any], weights: np.ndarray | None = None) -> float:
        f = OPS[op]
        with tf.GradientTape() as tape:
            vals = [(tf.stop_gradient(self._vars[a.name]) if a.stop else self._vars[a.name])
                    if isinstance(a, ParamRef) else tf.constant(a, dtype=self.dtype)
                    for a in args]
            y = f(*vals)
            loss = tf.reduce_sum(y if weights is None else y * tf.constant(weights, self.dtype))
        names = list(self._vars)
        grads = tape.gradient(loss, [self._vars[k] for k in names])
        self._grads = {k: g for k, g in zip(names, grads, strict=True) if g is not None}
        return float(loss.numpy())

    def grads(self) -> dict[str, np.ndarray | None]:
        return {k: (self._grads[k].numpy() if k in self._grads else None) for k in self._vars}

    def params(self) -> dict[str, np.ndarray | None]:
        return {k: v.numpy() for k, v in self._vars.items()}

    def zero_grad(self) -> None:
        self._grads = {}

    def clip_grad_norm(self, max_norm: float) -> float:
        names = list(self._grads)
        clipped, norm = tf.clip_by_global_norm([self._grads[k] for k in names], max_norm)
        self._grads = dict(zip(names, clipped, strict=True))
        return float(norm.numpy())

    def step(self, lr: float) -> None:
        for k, g in self._grads.items():
            self._vars[k].assign_sub(lr * g)

    def close(self) -> None:
        self._vars, self._grads = {}, {}
