"""tinygrad adapter: ``Tensor.gradient`` (functional reverse mode) and ``Tensor.backward``
(eager, into ``.grad``); ``Tensor.detach`` as the stop point.  No forward mode.

Imported only when the ``tinygrad`` backend is asked for (``pip install tinygrad``).

Device.  The harness's ``"cpu"`` is tinygrad's ``CPU`` device when a C compiler named by ``CC``
(default ``clang``) is on the PATH: tinygrad's CPU device compiles its kernels and its own
runtime programs with clang (``gcc`` does not accept its flags).  Without clang it is tinygrad's
``PYTHON`` device, an interpreter of the same kernels written in Python: same results, no
compiler, slower on large tensors (measured in docs/adapters.md).  ``GRADCHECK_TINYGRAD_DEVICE``
overrides the choice.  Every call runs under ``Context(DEV=...)`` so tensors created inside
an op land on the same device (without it, tinygrad's default device search finds no usable
device when clang is absent: ``PYTHON`` is never picked by default), and results that tinygrad
folded to a device-less constant are placed on that device before they are read.

Semantics.  ``Tensor.backward`` fills ``.grad`` of every floating tensor of the graph that is
still alive and *adds* into an existing ``.grad`` (accumulating, like PyTorch); resetting is
``param.grad = None`` (what ``Optimizer.zero_grad`` does).  ``Tensor.gradient`` returns fresh
tensors and is what the VJP uses; the eager path is the alternative the EAGER_FUNC check
compares with it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from importlib.metadata import version as _dist_version
from typing import Any

import numpy as np
from tinygrad import Tensor, TinyJit, dtypes
from tinygrad.helpers import Context

from gradcheck.backends.base import Accumulation, Backend, Semantics
from gradcheck.backends.process_training import ParamRef
from gradcheck.backends.training import validate_max_norm

_DTYPES = {"float64": dtypes.float64, "float32": dtypes.float32, "float16": dtypes.float16}


@cache
def engine_device() -> str:
    """The tinygrad device behind the harness's ``"cpu"`` (see the module doc)."""
    chosen = os.environ.get("GRADCHECK_TINYGRAD_DEVICE")
    if chosen:
        return chosen.upper()
    return "CPU" if shutil.which(os.environ.get("CC", "clang")) else "PYTHON"


def _ctx() -> Context:
    return Context(DEV=engine_device())


def _native(a: np.ndarray) -> Tensor:
    # np.asarray(order="C") keeps 0-d arrays 0-d (np.ascontiguousarray would make them (1,))
    return Tensor(np.asarray(a, order="C"), device=engine_device())


def _numpy(t: Tensor) -> np.ndarray:
    if t.device is None:
        # a result folded to a constant (the gradient of ``sum`` is the cotangent expanded) has
        # no device, and tinygrad realizes device-less tensors on "CPU" whatever the default:
        # without clang that raises FileNotFoundError; place it on the engine device instead
        t = t.clone(engine_device())
    return np.array(t.numpy(), copy=True)


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _is_float(t: Any) -> bool:
    return isinstance(t, Tensor) and dtypes.is_float(t.dtype)


def _vjp(fn: Callable, args: list[Tensor], diff: Sequence[int], cts: Sequence[Tensor]
         ) -> list[Tensor]:
    """``J^T v`` through ``Tensor.gradient``, one call per floating output, summed."""
    leaves = [args[k] for k in diff]
    total: list[Tensor] | None = None
    for out, ct in zip(_as_list(fn(*args)), cts, strict=True):
        if not _is_float(out):
            continue
        parts = out.gradient(*leaves, gradient=ct.cast(out.dtype))
        total = parts if total is None else [t + p for t, p in zip(total, parts, strict=True)]
    return total if total is not None else [x.zeros_like() for x in leaves]


def _pairing(outs: Sequence[Any], cts: Sequence[Tensor]) -> Tensor:
    """The scalar ``sum_i <v_i, f_i(x)>`` over the floating outputs."""
    terms = [(o * c.cast(o.dtype)).sum() for o, c in zip(outs, cts, strict=True) if _is_float(o)]
    return sum(terms[1:], terms[0])


class TinygradBackend(Backend):
    """tinygrad (``pip install tinygrad``; its CPU device needs clang, see the module doc)."""

    name = "tinygrad"
    semantics = Semantics(
        Accumulation.ACCUMULATE,
        stop_gradient="detach",
        notes="Tensor.backward adds into .grad of every live floating tensor of the graph; "
              "reset with param.grad = None (Optimizer.zero_grad); Tensor.gradient is "
              "functional",
    )
    supports_jvp = False
    supports_order2 = True
    dtypes = ("float64", "float32")

    def version(self) -> str:
        return _dist_version("tinygrad")

    def devices(self) -> list[str]:
        return ["cpu"]

    def native_to_numpy(self, value: Any) -> np.ndarray | None:
        return _numpy(value) if isinstance(value, Tensor) else None

    def array_namespace(self) -> Any:
        return Tensor

    def op(self, name: str) -> Callable | None:
        from gradcheck.engines.tinygrad.ops import get_op

        return get_op(name)

    def evaluate(self, fn, args, device):
        with _ctx():
            return [_numpy(o) for o in _as_list(fn(*[_native(a) for a in args]))]

    def evaluate_batch(self, fn, args, batched, device):
        """One ``TinyJit`` of ``fn`` replayed for every row: tinygrad's graph rewriting and
        scheduling cost ~30 ms of Python per eager call, a replay ~8 ms (the oracle evaluates
        hundreds of rows).  The JIT captures the kernels on its second call; the first two rows
        run eagerly.  Outputs are copied (``contiguous``) so that a view of an input (transpose)
        is a kernel the JIT replays, not a stale buffer; the last row is recomputed eagerly and
        any difference, or anything the JIT refuses, falls back to the eager loop."""
        size = next(len(a) for a, b in zip(args, batched, strict=True) if b)
        if size < 4:
            return super().evaluate_batch(fn, args, batched, device)

        def row(i: int) -> list[Any]:  # tinygrad Tensors
            return [_native(a[i] if b else a).realize()
                    for a, b in zip(args, batched, strict=True)]

        with _ctx():
            jitted = TinyJit(lambda *xs: tuple(o.contiguous().realize()
                                               for o in _as_list(fn(*xs))))
            try:
                rows = [[_numpy(o) for o in jitted(*row(i))] for i in range(size)]
            except Exception:  # a function the JIT cannot capture: evaluate eagerly
                return super().evaluate_batch(fn, args, batched, device)
            last = [_numpy(o) for o in _as_list(fn(*row(size - 1)))]
        if not all(np.array_equal(a, b, equal_nan=True) for a, b in zip(rows[-1], last,
                                                                         strict=True)):
            return super().evaluate_batch(fn, args, batched, device)
        return [np.stack([r[k] for r in rows]) for k in range(len(rows[0]))]

    def vjp(self, fn, args, diff, cotangents, device):
        with _ctx():
            grads = _vjp(fn, [_native(a) for a in args], diff,
                         [_native(c) for c in cotangents])
            return [_numpy(g) for g in grads]

    def alternative_vjps(self, fn, args, diff, cotangents, device):
        """``Tensor.backward`` of ``sum_i <v_i, f_i(x)>``, read from the inputs' ``.grad``."""
        with _ctx():
            targs = [_native(a) for a in args]
            loss = _pairing(_as_list(fn(*targs)), [_native(c) for c in cotangents])
            loss.backward()
            grads = [targs[k].grad for k in diff]
            return {"Tensor.backward into .grad": [
                np.zeros(args[k].shape, args[k].dtype) if g is None else _numpy(g)
                for k, g in zip(diff, grads, strict=True)]}

    def vjp_function(self, fn, diff, n_args):
        def g(*xs: Any) -> tuple[Any, ...]:
            return tuple(_vjp(fn, list(xs[:n_args]), diff, xs[n_args:]))

        return g

    def training(self, device: str, dtype: str) -> Any:
        return TinygradTraining(dtype)


class TinygradTraining:
    """Training hooks (method set of :class:`~.process_training.ProcessTraining`) on tinygrad
    tensors: ``loss.backward()`` adds into ``.grad`` (the engine's own accumulation),
    ``zero_grad`` sets ``.grad = None`` like ``Optimizer.zero_grad``, the step is
    ``tinygrad.nn.optim.SGD``.  tinygrad has no clip-by-global-norm function: the clip is the
    usual ``g * min(max_norm / norm, 1)`` computed with tinygrad tensors (threshold validated)."""

    def __init__(self, dtype: str) -> None:
        self.dtype = _DTYPES[dtype]
        self._np = np.dtype(dtype)
        self._params: dict[str, Tensor] = {}

    def create(self, params: Mapping[str, np.ndarray]) -> None:
        with _ctx():
            self._params = {k: _native(np.asarray(v, dtype=self._np)).contiguous().realize()
                            for k, v in params.items()}

    def backward(self, op: str, args: Sequence[Any], weights: np.ndarray | None = None) -> float:
        from gradcheck.engines.tinygrad.ops import get_op

        with _ctx():
            vals = [(self._params[a.name].detach() if a.stop else self._params[a.name])
                    if isinstance(a, ParamRef) else _native(np.asarray(a, dtype=self._np))
                    for a in args]
            f = get_op(op)
            if f is None:
                raise ValueError(f"op {op!r} is not a tinygrad catalog op")
            y = f(*vals)
            if weights is not None:
                y = y * _native(np.asarray(weights, dtype=self._np))
            loss = y.sum()
            loss.backward()
            return float(loss.item())

    def grads(self) -> dict[str, np.ndarray | None]:
        with _ctx():
            return {k: None if p.grad is None else _numpy(p.grad)
                    for k, p in self._params.items()}

    def params(self) -> dict[str, np.ndarray | None]:
        with _ctx():
            return {k: _numpy(p) for k, p in self._params.items()}

    def zero_grad(self) -> None:
        for p in self._params.values():
            p.grad = None

    def clip_grad_norm(self, max_norm: float) -> float:
        max_norm = validate_max_norm(max_norm)
        with _ctx():
            grads = [p.grad for p in self._params.values() if p.grad is not None]
            if not grads:
                return 0.0
            norm = sum((g.square().sum() for g in grads[1:]), grads[0].square().sum()).sqrt()
            scale = (max_norm / norm).minimum(1.0)
            for p in self._params.values():
                if p.grad is not None:
                    p.grad = (p.grad * scale).realize()
            return float(norm.item())

    def step(self, lr: float) -> None:
        from tinygrad.nn.optim import SGD

        params = [p for p in self._params.values() if p.grad is not None]
        if params:
            with Context(DEV=engine_device(), TRAINING=1):  # optimizers refuse to step without
                SGD(params, lr=lr).step()

    def close(self) -> None:
        self._params = {}
