"""The NumPy backend: functions that carry hand-derived derivatives.

NumPy has no autodiff, so a function checked on this backend is a :class:`NumpyFunction`: a
forward written with NumPy plus a hand-derived VJP (and optionally a JVP).  This is how a user
checks a manual backward pass, and how ``reference/numpy`` rules are themselves verified.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gradcheck.backends.base import Accumulation, Backend, Semantics
from gradcheck.core.rules import NumpyFunction
from gradcheck.ops.catalog import IMPLEMENTATIONS, package_op

__all__ = ["NumpyBackend", "NumpyFunction"]


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
    supports_order2 = True  # for functions whose vjp is itself a NumpyFunction: see below
    dtypes = ("float64", "float32", "float16")

    def version(self) -> str:
        return np.__version__

    def devices(self) -> list[str]:
        return ["cpu"]

    def native_to_numpy(self, value: Any) -> np.ndarray | None:
        return value if isinstance(value, np.ndarray) else None

    def op(self, name: str) -> Callable | None:
        """The hand-derived reference of catalog op ``name`` (``gradcheck.reference.numpy``,
        found through the catalog's implementations like every backend's op table)."""
        return package_op(IMPLEMENTATIONS["numpy"], name)

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
        if isinstance(f.vjp, NumpyFunction):
            grads = _as_tuple(f.vjp.forward(*args, *cotangents))
        else:
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

    def supports_order2_for(self, fn: Callable) -> bool:
        """Only a :class:`NumpyFunction` whose ``vjp`` is itself one carries second-order rules
        (the catalog's reference rules are first order); a derivative of the VJP by finite
        differences would check the oracle against itself."""
        return isinstance(fn, NumpyFunction) and isinstance(fn.vjp, NumpyFunction)

    def vjp_function(self, fn, diff, n_args):
        """The hand-written VJP as a :class:`NumpyFunction` of ``(*args, *cotangents)`` returning
        the gradients of the ``diff`` inputs, with its own hand-written rules."""
        f = self._require(fn)
        inner = f.vjp
        if not isinstance(inner, NumpyFunction):
            raise NotImplementedError(
                f"{f.__name__}: order 2 needs a vjp that is itself a NumpyFunction with its own "
                "vjp/jvp (see gradcheck.NumpyFunction)")

        def forward(*xs: np.ndarray) -> tuple[np.ndarray, ...]:
            grads = _as_tuple(inner.forward(*xs))
            return tuple(np.zeros_like(xs[k]) if grads[k] is None else grads[k] for k in diff)

        def vjp(xs: Sequence[np.ndarray], cts: Sequence[np.ndarray]) -> Sequence[Any]:
            full = [np.zeros_like(xs[k]) for k in range(n_args)]
            for pos, k in enumerate(diff):
                full[k] = cts[pos]
            return inner.vjp(list(xs), full)

        def jvp(xs: Sequence[np.ndarray], tans: Sequence[np.ndarray]) -> tuple[Any, ...]:
            out = _as_tuple(inner.jvp(list(xs), list(tans)))  # type: ignore[misc]
            return tuple(out[k] for k in diff)

        return NumpyFunction(forward, vjp, jvp if inner.jvp is not None else None,
                             name=f"vjp of {f.__name__}")

    def jvp_function(self, fn, diff, n_args):
        raise NotImplementedError(
            "the numpy backend carries second-order rules through NumpyFunction.vjp only: "
            "JVP of JVP is not checked")

    def training(self, device: str, dtype: str) -> Any:
        from gradcheck.engines.numpy.training import NumpyTraining

        return NumpyTraining(self, device, dtype)
