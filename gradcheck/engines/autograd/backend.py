"""HIPS autograd adapter: functional reverse mode (``make_vjp``) and forward mode (``make_jvp``,
its native JVP rules) over NumPy; order 2 by nesting them.

Imported only when the ``autograd`` backend is asked for.  ``fn`` is written with
``autograd.numpy``; catalog ops come from :mod:`.autograd_ops`.  autograd computes with NumPy
on the CPU, in the dtype of its inputs.  It has no stop-gradient primitive and no stored
gradients: every call returns fresh values (functional semantics); the training hooks keep the
latest gradients of a loss the way a user's loop would.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib.metadata import version as _dist_version
from typing import Any

import autograd.numpy as anp
import numpy as np
from autograd import grad as _grad
from autograd.builtins import tuple as atuple
from autograd.core import make_jvp, make_vjp
from autograd.tracer import getval

from gradcheck.backends.base import Accumulation, Backend, Semantics
from gradcheck.backends.process_training import ParamRef
from gradcheck.backends.training import validate_max_norm
from gradcheck.engines.autograd.ops import OPS


def _as_tuple(out: Any) -> tuple[Any, ...]:
    """Outputs as a tuple; a traced tuple (autograd's ``SequenceBox``) is split element-wise."""
    value = getval(out)
    if isinstance(value, (tuple, list)):
        return tuple(out[i] for i in range(len(value)))
    return (out,)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """autograd warns when an output does not depend on an input; the result (zeros) is what
    the contract asks for, so the warning is noise here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Output seems independent of input")
        yield


def _partial(fn: Callable, args: Sequence[Any], diff: Sequence[int]) -> Callable:
    """``g(xs)`` with ``xs`` the tuple of differentiated arguments; returns a tuple of outputs."""

    def g(xs: tuple[Any, ...]) -> tuple[Any, ...]:
        full = list(args)
        for k, x in zip(diff, xs, strict=True):
            full[k] = x
        return atuple(_as_tuple(fn(*full)))  # autograd's tuple: a container it traces

    return g


class AutogradBackend(Backend):
    """HIPS autograd (``pip install autograd``)."""

    name = "autograd"
    semantics = Semantics(
        Accumulation.FUNCTIONAL,
        stop_gradient=None,
        notes="grad/make_vjp return fresh arrays; no stop-gradient primitive",
    )
    supports_jvp = True
    supports_order2 = True
    dtypes = ("float64", "float32")

    def version(self) -> str:
        return _dist_version("autograd")

    def devices(self) -> list[str]:
        return ["cpu"]

    def native_to_numpy(self, value: Any) -> np.ndarray | None:
        return value if isinstance(value, np.ndarray) else None

    def array_namespace(self) -> Any:
        return anp

    def op(self, name: str) -> Callable | None:
        return OPS.get(name)

    def evaluate(self, fn, args, device):
        return [np.asarray(o) for o in _as_tuple(fn(*args))]

    def vjp(self, fn, args, diff, cotangents, device):
        g = _partial(fn, args, diff)
        with _quiet():
            pullback, outs = make_vjp(g, tuple(args[k] for k in diff))
        cts = tuple(np.asarray(c, dtype=np.asarray(o).dtype) for c, o in
                    zip(cotangents, outs, strict=True))
        return [np.asarray(r, dtype=args[k].dtype) for k, r in zip(diff, pullback(cts),
                                                                   strict=True)]

    def jvp(self, fn, args, diff, tangents, device):
        g = _partial(fn, args, diff)
        tans = tuple(np.asarray(t, dtype=args[k].dtype) for k, t in zip(diff, tangents,
                                                                         strict=True))
        with _quiet():
            outs, out_t = make_jvp(g, tuple(args[k] for k in diff))(tans)
        return [np.asarray(t, dtype=np.asarray(o).dtype) for o, t in zip(outs, out_t,
                                                                         strict=True)]

    def vjp_function(self, fn, diff, n_args):
        def g(*xs: Any) -> tuple[Any, ...]:
            args, cts = list(xs[:n_args]), xs[n_args:]
            with _quiet():
                pullback, _ = make_vjp(_partial(fn, args, diff), tuple(args[k] for k in diff))
            return atuple(pullback(atuple(cts)))

        return g

    def jvp_function(self, fn, diff, n_args):
        def g(*xs: Any) -> tuple[Any, ...]:
            args, tans = list(xs[:n_args]), xs[n_args:]
            with _quiet():
                _, out_t = make_jvp(_partial(fn, args, diff), tuple(args[k] for k in diff))(
                    atuple(tans))
            return atuple(out_t)

        return g

    def training(self, device: str, dtype: str) -> Any:
        return AutogradTraining(dtype)


class AutogradTraining:
    """Training hooks with the method set of
    :class:`~gradcheck.backends.process_training.ProcessTraining` (create, backward, grads,
    params, zero_grad, clip_grad_norm, step), computed by ``autograd.grad`` of the loss
    ``sum(weights * op(*args))`` with respect to the parameter dict."""

    def __init__(self, dtype: str) -> None:
        self.dtype = np.dtype(dtype)
        self._params: dict[str, np.ndarray] = {}
        self._grads: dict[str, np.ndarray] = {}

    def create(self, params: Mapping[str, np.ndarray]) -> None:
        self._params = {k: np.asarray(v, dtype=self.dtype) for k, v in params.items()}
        self._grads = {}

    def backward(self, op: str, args: Sequence[Any], weights: np.ndarray | None = None) -> float:
        f = OPS[op]

        def loss(params: dict[str, Any]) -> Any:
            vals = [(getval(params[a.name]) if a.stop else params[a.name])
                    if isinstance(a, ParamRef) else np.asarray(a, dtype=self.dtype) for a in args]
            y = f(*vals)
            return anp.sum(y if weights is None else y * np.asarray(weights, dtype=self.dtype))

        with _quiet():
            grads = _grad(loss)(dict(self._params))
        self._grads = {k: np.asarray(v, dtype=self.dtype) for k, v in grads.items()}
        return float(loss(self._params))

    def grads(self) -> dict[str, np.ndarray | None]:
        return {k: self._grads.get(k) for k in self._params}

    def params(self) -> dict[str, np.ndarray | None]:
        return dict(self._params)

    def zero_grad(self) -> None:
        self._grads = {}

    def clip_grad_norm(self, max_norm: float) -> float:
        max_norm = validate_max_norm(max_norm)  # a negative threshold would reverse the step
        total = float(np.sqrt(sum(float(np.sum(g * g)) for g in self._grads.values())))
        if total > max_norm:
            self._grads = {k: g * (max_norm / total) for k, g in self._grads.items()}
        return total

    def step(self, lr: float) -> None:
        for k, g in self._grads.items():
            self._params[k] = self._params[k] - lr * g

    def close(self) -> None:
        self._params, self._grads = {}, {}
