"""NumPy reference training hooks: hand-derived gradients, functional semantics, a clip that
accumulates in float64 and rejects invalid thresholds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gradcheck.backends.base import Backend
from gradcheck.backends.training import (
    ClipSemantics,
    NumpyLoss,
    TrainingHooks,
    validate_max_norm,
)
from gradcheck.core.dtypes import numpy_dtype


class NumpyTraining(TrainingHooks):
    """Reference hooks without AD: losses are :class:`NumpyLoss` (hand-derived gradients); every
    gradient call returns fresh arrays (functional); the clip accumulates in float64."""

    clip_semantics = ClipSemantics("pre_clip", 0.0, "gradcheck reference: returns the norm "
                                   "before clipping; coefficient max_norm / norm")
    runner_kind = "plain call of the hand-derived gradient"

    def __init__(self, backend: Backend, device: str, dtype: str) -> None:
        super().__init__(backend, device, dtype)
        self._np_dtype = numpy_dtype(dtype)
        self._params: dict[str, np.ndarray] = {}
        self._grads: dict[str, np.ndarray] | None = None
        self._retained: tuple[NumpyLoss, tuple[Any, ...], float] | None = None

    @property
    def xp(self) -> Any:
        return np

    def create_parameters(self, values: Mapping[str, np.ndarray]) -> None:
        self._params = {k: np.array(v, dtype=self._np_dtype) for k, v in values.items()}
        self._grads = None

    def adopt(self, model: Any) -> None:
        if not isinstance(model, Mapping):
            raise TypeError(f"the numpy hooks adopt a dict of arrays, got {type(model).__name__}")
        self.create_parameters(model)

    @property
    def model(self) -> dict[str, np.ndarray]:
        return dict(self._params)

    def parameter_names(self) -> tuple[str, ...]:
        return tuple(self._params)

    def parameter_values(self) -> dict[str, np.ndarray]:
        return {k: v.astype(np.float64) for k, v in self._params.items()}

    def assign(self, values: Mapping[str, np.ndarray]) -> None:
        for k, v in values.items():
            self._params[k] = np.array(v, dtype=self._np_dtype).reshape(self._params[k].shape)

    def to_native(self, a: np.ndarray) -> np.ndarray:
        return np.asarray(a, dtype=self._np_dtype)

    def model_copy(self, dtype: str) -> dict[str, np.ndarray]:
        return {k: v.astype(numpy_dtype(dtype)) for k, v in self._params.items()}

    def make_loss(self, forward, grad=None):
        if grad is None:
            raise NotImplementedError("the numpy backend has no AD: this probe needs a "
                                      "hand-derived gradient, which would only restate the rule")
        return NumpyLoss(lambda p, *xs: forward(np, p, *xs), grad,
                         getattr(forward, "__name__", "loss"))

    @staticmethod
    def _require(loss_fn: Any) -> NumpyLoss:
        if not isinstance(loss_fn, NumpyLoss):
            raise TypeError("the numpy training hooks need a gradcheck NumpyLoss(value, grad), "
                            f"got {type(loss_fn).__name__}")
        return loss_fn

    def loss_value(self, loss_fn, *inputs):
        with self.seeded():
            return float(self._require(loss_fn).value(self.model, *inputs))

    def _fresh(self, loss: NumpyLoss, inputs: tuple, scale: float) -> dict[str, np.ndarray]:
        with self.seeded():
            g = loss.grad(self.model, *inputs)
        return {k: (scale * np.asarray(g[k], dtype=np.float64)).astype(self._np_dtype)
                for k in self._params}

    def backward(self, loss_fn, *inputs, scale=1.0, retain=False):
        loss = self._require(loss_fn)
        self._grads = self._fresh(loss, inputs, scale)  # functional: replaced, never added
        self._retained = (loss, inputs, scale) if retain else None
        with self.seeded():
            return float(loss.value(self.model, *inputs))

    def backward_again(self) -> None:
        if self._retained is None:
            raise RuntimeError("backward_again() needs a backward(retain=True) first")
        self._grads = self._fresh(*self._retained)

    def gradients(self):
        if self._grads is None:
            return {k: None for k in self._params}
        return {k: g.copy() for k, g in self._grads.items()}

    def monitor_argument(self) -> Any:
        return self.gradients()

    def set_gradients(self, values):
        self._grads = {k: np.array(values[k], dtype=self._np_dtype) for k in self._params}

    def zero_grad(self) -> None:
        self._grads = None

    def clip_grad_norm(self, max_norm: float) -> float:
        limit = validate_max_norm(max_norm)
        if self._grads is None:
            return 0.0
        with np.errstate(all="ignore"):  # non-finite gradients give a non-finite norm
            norm = float(np.sqrt(sum(np.sum(np.square(g.astype(np.float64)))
                                     for g in self._grads.values())))
            if not norm <= limit:
                coef = limit / norm
                self._grads = {k: (g.astype(np.float64) * coef).astype(self._np_dtype)
                               for k, g in self._grads.items()}
        return norm

    def sgd_step(self, lr: float) -> None:
        if self._grads is None:
            return
        for k, g in self._grads.items():
            self._params[k] = (self._params[k] - lr * g).astype(self._np_dtype)

    def compile(self, loss_fn):
        loss = self._require(loss_fn)

        def run(*inputs: Any) -> dict[str, np.ndarray]:
            return {k: np.asarray(v, dtype=np.float64) for k, v in self._fresh(loss, inputs,
                                                                               1.0).items()}

        return run

    def run_user_step(self, step, *inputs):
        with self.seeded():
            out = step(self.model, *inputs)
        out = out[0] if isinstance(out, tuple) else out
        self.assign(out)
