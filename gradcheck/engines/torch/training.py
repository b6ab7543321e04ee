"""PyTorch training hooks: ``.grad`` accumulation, ``clip_grad_norm_``, ``torch.optim.SGD``.

Everything goes through the APIs users call, unchanged: ``loss.backward()`` adds into ``.grad``,
``zero_grad`` sets ``.grad`` to None (the default of ``Module.zero_grad`` and
``Optimizer.zero_grad``), :func:`torch.nn.utils.clip_grad_norm_` clips and returns the norm
*before* clipping (coefficient ``max_norm / (norm + 1e-6)`` clamped to 1), the stop-gradient
primitive is ``Tensor.detach``, the runner is ``torch.compile(backend="aot_eager")`` (forward and
backward graphs captured; no C compiler needed).
"""

from __future__ import annotations

import copy
import os
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from gradcheck.backends.training import ClipSemantics, CutPoint, TrainingHooks

_DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
           "bfloat16": torch.bfloat16}
_DEVICES = {"gpu": "cuda"}
_HOST = ("item", "tolist", "numpy", "__array__")
_CUTS = _HOST + ("detach", "detach_", "requires_grad_")


def _np(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy().copy()


class TorchTraining(TrainingHooks):
    """PyTorch: stored gradients live in ``param.grad`` and accumulate."""

    clip_semantics = ClipSemantics(
        "pre_clip", 1e-6,
        "torch.nn.utils.clip_grad_norm_: returns the total norm before clipping; gradients are "
        "scaled by min(max_norm / (total_norm + 1e-6), 1)")
    own_clips = ("torch.nn.utils.clip_grad.clip_grad_norm_",
                 "torch.nn.utils.clip_grad.clip_grad_norm")
    runner_kind = "torch.compile(backend='aot_eager') + torch.autograd.grad"

    def __init__(self, backend: Any, device: str, dtype: str) -> None:
        super().__init__(backend, device, dtype)
        self._tdtype = _DTYPES[dtype]
        self._dev = torch.device(_DEVICES.get(device, device))
        self._params: dict[str, torch.Tensor] = {}
        self._module: Any = None
        self._retained: torch.Tensor | None = None

    @property
    def xp(self) -> Any:
        return torch

    # -- parameters ------------------------------------------------------------------------
    def create_parameters(self, values: Mapping[str, np.ndarray]) -> None:
        self._module = None
        self._params = {k: torch.nn.Parameter(self.to_native(v)) for k, v in values.items()}

    def adopt(self, model: Any) -> None:
        if isinstance(model, torch.nn.Module):
            self._module = model
            self._params = dict(model.named_parameters())
        elif isinstance(model, Mapping):
            self._module = None
            self._params = dict(model)
        else:
            raise TypeError("the torch hooks adopt an nn.Module or a dict of tensors, got "
                            f"{type(model).__name__}")
        first = next(iter(self._params.values()), None)
        if first is not None:
            self._tdtype, self._dev = first.dtype, first.device
            self.dtype = str(first.dtype).replace("torch.", "")

    @property
    def model(self) -> Any:
        return self._module if self._module is not None else dict(self._params)

    def parameter_names(self) -> tuple[str, ...]:
        return tuple(self._params)

    def parameter_values(self) -> dict[str, np.ndarray]:
        return {k: _np(p).astype(np.float64) for k, p in self._params.items()}

    def assign(self, values: Mapping[str, np.ndarray]) -> None:
        with torch.no_grad():
            for k, v in values.items():
                p = self._params[k]
                p.copy_(torch.tensor(np.asarray(v, dtype=np.float64).reshape(p.shape),
                                     dtype=p.dtype))

    def trainable(self, name: str) -> bool:
        return bool(self._params[name].requires_grad)

    def to_native(self, a: np.ndarray) -> torch.Tensor:
        return torch.tensor(np.asarray(a, dtype=np.float64), device=self._dev,
                            dtype=self._tdtype)

    def cast_tree(self, obj: Any, dtype: str) -> Any:
        if isinstance(obj, torch.Tensor):
            return obj.to(_DTYPES[dtype]) if obj.is_floating_point() else obj
        if isinstance(obj, (tuple, list)):
            return type(obj)(self.cast_tree(o, dtype) for o in obj)
        if isinstance(obj, Mapping):
            return {k: self.cast_tree(v, dtype) for k, v in obj.items()}
        return obj

    def model_copy(self, dtype: str) -> Any:
        if self._module is not None:
            return copy.deepcopy(self._module).to(_DTYPES[dtype])
        return {k: torch.nn.Parameter(p.detach().clone().to(_DTYPES[dtype]),
                                      requires_grad=p.requires_grad)
                for k, p in self._params.items()}

    # -- gradients -------------------------------------------------------------------------
    def snapshot(self) -> Any:
        """Parameters, ``.grad``, buffers (BatchNorm running statistics, ``num_batches_tracked``)
        and every submodule's train/eval flag, cloned bitwise."""
        params = {k: p.detach().clone() for k, p in self._params.items()}
        grads = {k: None if p.grad is None else p.grad.detach().clone()
                 for k, p in self._params.items()}
        module = self._module
        buffers = {} if module is None else {k: b.detach().clone()
                                             for k, b in module.named_buffers()}
        modes = {} if module is None else {k: m.training for k, m in module.named_modules()}
        return params, grads, buffers, modes

    def restore(self, snap: Any) -> None:
        params, grads, buffers, modes = snap
        with torch.no_grad():
            for k, p in self._params.items():
                p.copy_(params[k])
                p.grad = None if grads[k] is None else grads[k].clone()
            if self._module is not None:
                for k, b in self._module.named_buffers():
                    if k in buffers:
                        b.copy_(buffers[k])
                for k, m in self._module.named_modules():
                    if k in modes:
                        m.training = modes[k]

    def evaluate_eagerly(self, loss_fn, *inputs):
        with torch.no_grad():
            return super().evaluate_eagerly(loss_fn, *inputs)

    def loss_value(self, loss_fn, *inputs):
        with torch.no_grad(), self.seeded():
            return float(loss_fn(self.model, *inputs))

    def backward(self, loss_fn, *inputs, scale=1.0, retain=False):
        with self.seeded():
            loss = loss_fn(self.model, *inputs)
        target = loss if scale == 1.0 else loss * scale
        if not target.requires_grad:  # nothing to differentiate: no parameter reached it
            self._retained = None
            return float(loss.detach())
        target.backward(retain_graph=retain)
        self._retained = target if retain else None
        return float(loss.detach())

    def backward_again(self) -> None:
        if self._retained is None:
            raise RuntimeError("backward_again() needs a backward(retain=True) first")
        self._retained.backward(retain_graph=True)

    def gradients(self):
        return {k: None if p.grad is None else _np(p.grad) for k, p in self._params.items()}

    def set_gradients(self, values):
        for k, p in self._params.items():
            p.grad = torch.tensor(np.asarray(values[k], dtype=np.float64), device=p.device,
                                  dtype=p.dtype).reshape(p.shape)

    def zero_grad(self) -> None:
        for p in self._params.values():
            p.grad = None

    def clip_grad_norm(self, max_norm: float) -> float:
        params = [p for p in self._params.values() if p.grad is not None]
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))

    def sgd_step(self, lr: float) -> None:
        params = [p for p in self._params.values() if p.grad is not None]
        if params:
            torch.optim.SGD(params, lr=lr).step()

    # -- stop points, runners, user steps --------------------------------------------------
    def stop_gradient(self, x: Any) -> Any:
        return x.detach()

    def no_grad_region(self, fn: Callable) -> Callable:
        def region(*args: Any) -> Any:
            with torch.no_grad():
                return fn(*args)

        return region

    def compile(self, loss_fn):
        names = list(self._params)
        params = [self._params[k] for k in names]

        def forward(*inputs: Any) -> torch.Tensor:
            return loss_fn(self.model, *inputs)

        compiled = torch.compile(forward, backend="aot_eager", dynamic=False)

        def run(*inputs: Any) -> dict[str, np.ndarray]:
            with self.seeded():
                out = compiled(*inputs)
            grads = torch.autograd.grad(out, params, allow_unused=True)
            return {k: np.zeros(tuple(p.shape)) if g is None else _np(g).astype(np.float64)
                    for k, p, g in zip(names, params, grads, strict=True)}

        return run

    def run_user_step(self, step, *inputs):
        with self.seeded():
            step(self.model, *inputs)

    def find_cut_points(self, loss_fn, *inputs):
        recorder = _CutRecorder(self._params)
        with self.seeded(), recorder:
            loss_fn(self.model, *inputs)
        return recorder.found

    # -- the model audit's cotangents, the fan-out probe's views -------------------------------
    def gradient_at_zeros(self, f, bases):
        zs = [torch.zeros_like(b, requires_grad=True) for b in bases]
        raw = torch.autograd.grad(f(zs), zs, allow_unused=True)
        return [torch.zeros_like(z) if g is None else g.detach()
                for z, g in zip(zs, raw, strict=True)]

    @property
    def views_inplace_loss(self) -> Callable[[Any, Any], Any]:
        return _views_inplace_loss


def _views_inplace_loss(p: Any, x: Any) -> Any:
    a = p["a"]
    z = (a * x).clone()
    z[1:3] *= a[0:2]  # in-place on a view, reading a again
    z.add_(a)  # in-place add of a
    v = a.view(2, 2).t().reshape(-1)  # a view of a
    return torch.sum(torch.sin(z) * v * a)


class _CutRecorder(TorchFunctionMode):
    """Records host round trips, detaches and no-grad computation on tensors that need grad,
    with the parameters upstream of each cut (one extra backward per cut)."""

    def __init__(self, params: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.params = params
        self.found: list[CutPoint] = []
        self._seen: set[tuple[str, str]] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        first = args[0] if args else None
        if isinstance(first, torch.Tensor) and first.requires_grad:
            if name in _CUTS:
                host = name in _HOST
                kind = "host round trip" if host else "graph cut"
                self._add(f"{kind}: Tensor.{name}()", host, first)
            elif name == "__get__" and getattr(getattr(func, "__self__", None),
                                               "__name__", "") == "data":
                self._add("graph cut: Tensor.data", False, first)
            elif not torch.is_grad_enabled() and name not in ("__get__", "__set__") \
                    and not _in_custom_function():
                self._add(f"no-grad region: {name} under torch.no_grad()", False, first)
        return func(*args, **(kwargs or {}))

    def _add(self, what: str, host: bool, tensor: torch.Tensor) -> None:
        where = _user_frame()
        if (what, where) in self._seen:
            return
        self._seen.add((what, where))
        self.found.append(CutPoint(what, where, host, self._upstream(tensor)))

    def _upstream(self, tensor: torch.Tensor) -> tuple[str, ...]:
        names = [k for k, p in self.params.items() if p.requires_grad]
        if not names:
            return ()
        with torch.enable_grad():
            grads = torch.autograd.grad(tensor.sum(), [self.params[k] for k in names],
                                        retain_graph=True, allow_unused=True)
        return tuple(k for k, g in zip(names, grads, strict=True) if g is not None)


def _in_custom_function() -> bool:
    """Inside a custom ``autograd.Function.forward`` (grad mode is off there by design: the
    Function supplies its own backward, so it is not a cut)."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "apply" and frame.f_code.co_filename.endswith(
                os.path.join("autograd", "function.py")):
            return True
        frame = frame.f_back
    return False


def _user_frame() -> str:
    """``file:line`` of the innermost frame outside torch and gradcheck."""
    skip = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__)))
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(skip) and "contextlib" not in path:
            shown = path if path.startswith("<") else os.path.relpath(path)
            return f"{shown}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"
