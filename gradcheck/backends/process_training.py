"""Stateful training hooks of a process backend: the ``train.*`` messages of the protocol.

The semantic probes need an engine's *stateful* behaviour: parameters that live in the engine,
a backward pass that writes gradients where the engine keeps them, reading them back, reset,
global-norm clipping and an SGD step.  A child keeps that state in a *session*; this class is
the Python side of one session.  The loss of a backward pass is always

    loss = sum(weights * op(*args))

for a protocol op ``op`` whose arguments are parameters (:class:`ParamRef`, possibly behind the
engine's stop-gradient primitive), or constant arrays.  Passing the same parameter twice is how
fan-out is probed; ``ParamRef(name, stop=True)`` is how stop points are probed.

What ``backward`` does to stored gradients is the engine's own semantics: an accumulating
engine adds, a functional one (the child keeps the last fresh gradient store) replaces.  The
semantic checks measure it against the declaration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.backends.wire import (
    ProtocolError,
    decode_array,
    decode_scalar,
    encode_array,
    encode_scalar,
)


@dataclass(frozen=True)
class ParamRef:
    """A parameter of the session as an argument of the loss op."""

    name: str
    stop: bool = False  # wrap in the engine's stop-gradient primitive


class ProcessTraining:
    """One training session in the child of a :class:`~gradcheck.backends.process.ProcessBackend`.

    Methods map one-to-one to protocol messages (``train.create``, ``train.backward``,
    ``train.grads``, ``train.zero_grad``, ``train.clip_grad_norm``, ``train.step``,
    ``train.params``, ``train.close``).
    """

    def __init__(self, backend: Any, device: str, dtype: str) -> None:
        self.backend = backend
        self.device = device
        self.dtype = dtype
        self.session: str | None = None

    def _req(self, method: str, **params: Any) -> dict[str, Any]:
        if self.session is None and method != "train.create":
            raise RuntimeError("call create(params) first")
        if self.session is not None:
            params["session"] = self.session
        return self.backend.request(method, params)

    def _arrays(self, raw: Any, what: str) -> dict[str, np.ndarray | None]:
        if not isinstance(raw, dict):
            raise ProtocolError(f"malformed answer: {what} must be an object of arrays")
        return {k: None if v is None else decode_array(v, f"{what}[{k!r}]").astype(self.dtype)
                for k, v in raw.items()}

    def create(self, params: Mapping[str, np.ndarray]) -> None:
        """Create parameters with these initial values (a new session)."""
        result = self._req("train.create", device=self.device, dtype=self.dtype,
                           params={k: encode_array(v, self.dtype) for k, v in params.items()})
        self.session = str(result["session"])

    def backward(self, op: str, args: Sequence[ParamRef | np.ndarray],
                 weights: np.ndarray | None = None) -> float:
        """Backward pass of ``sum(weights * op(*args))`` into the stored gradients; returns the
        loss value."""
        wire_args = [{"param": a.name, "stop": a.stop} if isinstance(a, ParamRef)
                     else {"array": encode_array(a, self.dtype)} for a in args]
        loss: dict[str, Any] = {"op": op, "args": wire_args}
        if weights is not None:
            loss["weights"] = encode_array(weights, self.dtype)
        res = self._req("train.backward", loss=loss)
        return decode_scalar(res["loss"], "train.backward: loss") if "loss" in res else float("nan")

    def grads(self) -> dict[str, np.ndarray | None]:
        """The stored gradient of every parameter (None where the engine holds none)."""
        return self._arrays(self._req("train.grads").get("grads"), "grads")

    def params(self) -> dict[str, np.ndarray | None]:
        """Current parameter values."""
        return self._arrays(self._req("train.params").get("params"), "params")

    def zero_grad(self) -> None:
        """Reset the stored gradients (the engine's own reset)."""
        self._req("train.zero_grad")

    def clip_grad_norm(self, max_norm: float) -> float:
        """Scale stored gradients so their global L2 norm is at most ``max_norm``; returns the
        norm before clipping, as the engine computed it."""
        res = self._req("train.clip_grad_norm", max_norm=encode_scalar(max_norm))
        return decode_scalar(res.get("total_norm"), "train.clip_grad_norm: total_norm")

    def step(self, lr: float) -> None:
        """One SGD step ``p -= lr * grad`` with the stored gradients."""
        self._req("train.step", lr=float(lr))

    def close(self) -> None:
        """Forget the session in the child."""
        if self.session is not None:
            self._req("train.close")
            self.session = None
