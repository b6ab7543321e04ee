"""Bridge: training hooks that speak the op protocol, seen as :class:`TrainingHooks`.

Engines that cannot run a Python loss (process backends, and the autograd and TensorFlow
adapters that share their method set: ``create``, ``backward(op, args, weights)``, ``grads``,
``params``, ``zero_grad``, ``clip_grad_norm``, ``step``; see
:mod:`gradcheck.backends.process_training`) differentiate only losses of the form
``sum(weights * op(*args))`` over named parameters.  :class:`OpProtocolHooks` exposes that
subset as :class:`TrainingHooks`: losses are :class:`OpLoss` values, gradients can be *loaded*
for a single parameter (``backward("mul", [w, values])`` stores exactly ``values``), and what the
protocol has no message for (Python losses, retained graphs, runners, user models, rebinding)
raises ``NotImplementedError``, which the probes report as skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.backends.base import Backend
from gradcheck.backends.training import ClipSemantics, TrainingHooks
from gradcheck.core.dtypes import numpy_dtype

OP_METHODS = ("create", "backward", "grads", "params", "zero_grad", "clip_grad_norm", "step")


def speaks_op_protocol(obj: Any) -> bool:
    """True if ``obj`` has the op-protocol training method set."""
    return all(callable(getattr(obj, m, None)) for m in OP_METHODS)


@dataclass(frozen=True)
class OpLoss:
    """``sum(weights * op(*args))``: each arg is a parameter name, ``("stop", name)`` (the
    parameter behind the engine's stop-gradient primitive) or a constant array."""

    op: str
    args: tuple[Any, ...]
    weights: np.ndarray


class OpProtocolHooks(TrainingHooks):
    """:class:`TrainingHooks` over an op-protocol training session (see module doc)."""

    python_losses = False
    clip_semantics = ClipSemantics("pre_clip", 0.0, "op protocol: train.clip_grad_norm "
                                   "returns the norm before clipping")
    runner_kind = "none (the op protocol has no compiled runner)"

    def __init__(self, backend: Any, device: str, dtype: str, inner: Any) -> None:
        super().__init__(backend, device, dtype)
        self.inner = inner
        # an engine whose own clip function adds an epsilon says so on its session object
        self.clip_semantics = getattr(inner, "clip_semantics", type(self).clip_semantics)
        self._np_dtype = numpy_dtype(dtype)
        self._shapes: dict[str, tuple[int, ...]] = {}

    @property
    def xp(self) -> Any:
        raise NotImplementedError(self._no_python())

    def _no_python(self) -> str:
        return (f"backend {self.name!r} trains through the op protocol: it differentiates "
                "sum(weights * op(*args)) only, not a Python loss")

    def create_parameters(self, values: Mapping[str, np.ndarray]) -> None:
        self._shapes = {k: tuple(np.shape(v)) for k, v in values.items()}
        self.inner.create({k: np.asarray(v, dtype=np.float64).astype(self._np_dtype)
                           for k, v in values.items()})

    def adopt(self, model: Any) -> None:
        raise NotImplementedError(self._no_python())

    @property
    def model(self) -> Any:
        raise NotImplementedError(self._no_python())

    def parameter_names(self) -> tuple[str, ...]:
        return tuple(self._shapes)

    def parameter_values(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(v, dtype=np.float64).reshape(self._shapes[k])
                for k, v in self.inner.params().items()}

    def assign(self, values: Mapping[str, np.ndarray]) -> None:
        raise NotImplementedError("the op protocol has no message to rebind parameters")

    def to_native(self, a: np.ndarray) -> np.ndarray:
        return np.asarray(a, dtype=np.float64).astype(self._np_dtype)

    def make_loss(self, forward: Callable[..., Any], grad: Any = None) -> Callable:
        raise NotImplementedError(self._no_python())

    def loss_value(self, loss_fn, *inputs):
        raise NotImplementedError(self._no_python())

    def _args(self, loss: OpLoss) -> list[Any]:
        from gradcheck.backends.process_training import ParamRef

        out: list[Any] = []
        for a in loss.args:
            if isinstance(a, str):
                out.append(ParamRef(a))
            elif isinstance(a, tuple) and a[:1] == ("stop",):
                out.append(ParamRef(a[1], stop=True))
            else:
                out.append(self.to_native(a))
        return out

    def backward(self, loss_fn, *inputs, scale=1.0, retain=False):
        if retain:
            raise NotImplementedError("the op protocol keeps no graph to run again")
        if not isinstance(loss_fn, OpLoss):
            raise NotImplementedError(self._no_python())
        weights = self.to_native(scale * np.asarray(loss_fn.weights, dtype=np.float64))
        return float(self.inner.backward(loss_fn.op, self._args(loss_fn), weights))

    def backward_again(self) -> None:
        raise NotImplementedError("the op protocol keeps no graph to run again")

    def gradients(self):
        return {k: None if g is None else np.asarray(g).reshape(self._shapes[k])
                for k, g in self.inner.grads().items()}

    def set_gradients(self, values):
        if len(self._shapes) != 1:
            raise NotImplementedError("the op protocol can load gradients of one parameter only")
        (name, shape), = self._shapes.items()
        self.inner.zero_grad()
        self.backward(OpLoss("mul", (name, np.asarray(values[name]).reshape(shape)),
                             np.ones(shape)))

    def zero_grad(self) -> None:
        self.inner.zero_grad()

    def clip_grad_norm(self, max_norm: float) -> float:
        return float(self.inner.clip_grad_norm(max_norm))

    def sgd_step(self, lr: float) -> None:
        self.inner.step(lr)

    def compile(self, loss_fn):
        raise NotImplementedError("the op protocol has no compiled runner")

    def run_user_step(self, step, *inputs):
        raise NotImplementedError(self._no_python())


def as_training_hooks(backend: Backend, device: str, dtype: str) -> TrainingHooks:
    """``backend.training(device, dtype)`` as :class:`TrainingHooks`: hooks with the op-protocol
    method set (process backends and the adapters sharing it) are bridged; anything else is a
    ``TypeError``.  ``NotImplementedError`` from the backend passes through."""
    hooks = backend.training(device, dtype)
    if isinstance(hooks, TrainingHooks):
        return hooks
    if speaks_op_protocol(hooks):
        return OpProtocolHooks(backend, device, dtype, hooks)
    raise TypeError(f"backend {backend.name!r}: training() returned {type(hooks).__name__}, "
                    "neither TrainingHooks nor the op-protocol method set")
