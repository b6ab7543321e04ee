"""The NumPy backend: functions that carry hand-derived derivatives.

NumPy has no autodiff, so a function checked on this backend is a :class:`NumpyFunction`: a
forward written with NumPy plus a hand-derived VJP (and optionally a JVP).  This is how a user
checks a manual backward pass, and how ``reference/numpy`` rules are themselves verified.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Accumulation, Backend, Semantics


@dataclass(frozen=True)
class NumpyFunction:
    """A NumPy function with hand-derived derivatives.

    ``forward(*args)`` returns an array or a tuple of arrays.
    ``vjp(args, cotangents)`` returns one gradient per argument (None for non-differentiable
    ones); ``cotangents`` has one array per output.
    ``jvp(args, tangents)`` (optional) returns one output tangent per output; ``tangents`` has one
    array per argument (zeros for arguments not being differentiated).
    """

    forward: Callable[..., Any]
    vjp: Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], Sequence[Any]]
    jvp: Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], Sequence[Any]] | None = None
    name: str = ""

    def __call__(self, *args: Any) -> Any:
        return self.forward(*args)

    @property
    def __name__(self) -> str:  # so reproducers can name it
        return self.name or getattr(self.forward, "__name__", "numpy_function")


def _as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


class NumpyBackend(Backend):
    """Reference backend: forward and derivatives are plain NumPy (no autodiff engine)."""

    name = "numpy"
    semantics = Semantics(
        Accumulation.FUNCTIONAL,
        stop_gradient=None,
        notes="hand-derived rules; every call returns fresh gradients",
    )
    supports_jvp = True
    supports_order2 = False
    dtypes = ("float64", "float32", "float16")

    def version(self) -> str:
        return np.__version__

    def devices(self) -> list[str]:
        return ["cpu"]

    def native_to_numpy(self, value: Any) -> np.ndarray | None:
        return value if isinstance(value, np.ndarray) else None

    def _require(self, fn: Callable) -> NumpyFunction:
        if not isinstance(fn, NumpyFunction):
            raise TypeError(
                "the numpy backend needs a gradcheck.NumpyFunction(forward, vjp, jvp=None): "
                f"got {type(fn).__name__}"
            )
        return fn

    def evaluate(self, fn: Callable, args: Sequence[np.ndarray], device: str) -> list[np.ndarray]:
        f = fn.forward if isinstance(fn, NumpyFunction) else fn
        return [np.asarray(o) for o in _as_tuple(f(*args))]

    def vjp(self, fn, args, diff, cotangents, device):
        f = self._require(fn)
        grads = _as_tuple(f.vjp(list(args), list(cotangents)))
        if len(grads) != len(args):
            raise ValueError(f"vjp returned {len(grads)} gradients for {len(args)} arguments")
        return [
            np.zeros_like(args[k]) if grads[k] is None else np.asarray(grads[k]) for k in diff
        ]

    def jvp(self, fn, args, diff, tangents, device):
        f = self._require(fn)
        if f.jvp is None:
            raise NotImplementedError(f"{f.__name__} has no hand-derived jvp")
        full = [np.zeros_like(a) for a in args]
        for k, t in zip(diff, tangents, strict=True):
            full[k] = t
        return [np.asarray(o) for o in _as_tuple(f.jvp(list(args), full))]

    def training(self, device: str, dtype: str) -> Any:
        from .training import NumpyTraining

        return NumpyTraining(self, device, dtype)
