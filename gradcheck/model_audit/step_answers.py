"""The answers of ``model.step`` (``docs/protocol-model.md``) read into typed records.

One :class:`StepRecord` per call of the user's step: what it logged, and per registry tensor
the whole-tensor float64 sums (gradient, applied gradient, parameter change) and the sampled
coordinates (``index``: flat C-order positions, ascending; ``None`` when the whole tensor was
sent).  Parsing is strict: a malformed answer raises
:class:`~gradcheck.backends.wire.ProtocolError`, which the caller reports as the model not
answering (exit 2), never as a finding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.backends.wire import ProtocolError, decode_array, decode_scalar

__all__ = ["TensorStep", "StepRecord", "parse_steps", "global_grad_norm"]


@dataclass(frozen=True)
class TensorStep:
    """One registry tensor in one call of the step (sums over the whole tensor, float64)."""

    name: str
    shape: tuple[int, ...]
    grad_sumsq: float
    applied_present: bool
    applied_sumsq: float
    applied_dot_grad: float
    delta_sumsq: float
    delta_dot_grad: float
    delta_dot_applied: float
    index: np.ndarray          # flat positions of the sampled elements (all of them if unsampled)
    theta: np.ndarray          # before the call, at ``index``
    grad: np.ndarray           # the library's fresh gradient before the call, at ``index``
    applied: np.ndarray | None  # what the optimizer received under this name (None: nothing)
    delta: np.ndarray          # theta after - theta before, at ``index``

    @property
    def sampled(self) -> bool:
        return self.index.size < int(np.prod(self.shape, dtype=np.int64))

    def labels(self) -> list[str]:
        """``name[i, j]`` for each sampled element (its place in the tensor)."""
        if not self.shape:
            return [self.name]
        return [f"{self.name}[{', '.join(map(str, np.unravel_index(int(i), self.shape)))}]"
                for i in self.index]


@dataclass(frozen=True)
class StepRecord:
    """One call of the user's step: the norm it logged (None: logs none), which one it says it
    is (``"pre_clip"`` / ``"post_clip"``), and its tensors in registry order."""

    logged: float | None
    which: str
    tensors: dict[str, TensorStep]

    @property
    def grad_norm(self) -> float:
        """The global L2 norm of the fresh gradient before this call (float64 sums)."""
        return global_grad_norm(t.grad_sumsq for t in self.tensors.values())

    @property
    def applied_norm(self) -> float:
        """The global L2 norm of what the optimizer received."""
        return global_grad_norm(t.applied_sumsq for t in self.tensors.values()
                                if t.applied_present)


def global_grad_norm(sumsqs: Any) -> float:
    return float(np.sqrt(sum(float(v) for v in sumsqs)))


def _num(obj: Mapping[str, Any], key: str, what: str) -> float:
    if key not in obj:
        raise ProtocolError(f"{what} lacks {key!r}")
    return decode_scalar(obj[key], f"{what}.{key}")


def _arr(obj: Mapping[str, Any], key: str, what: str, n: int) -> np.ndarray:
    if key not in obj:
        raise ProtocolError(f"{what} lacks the sampled array {key!r}")
    a = decode_array(obj[key], f"{what}.{key}").ravel()
    if a.size != n:
        raise ProtocolError(f"{what}.{key} has {a.size} elements, the index {n}")
    return a


def _tensor(name: str, shape: tuple[int, ...], obj: Any, what: str) -> TensorStep:
    if not isinstance(obj, Mapping):
        raise ProtocolError(f"{what} is not an object")
    size = int(np.prod(shape, dtype=np.int64))
    if obj.get("index") is None:
        index = np.arange(size, dtype=np.int64)
    else:
        raw = obj["index"]
        if not isinstance(raw, list) or not all(isinstance(i, int) and 0 <= i < size
                                                for i in raw):
            raise ProtocolError(f"{what}.index is not a list of positions below {size}")
        index = np.asarray(raw, dtype=np.int64)
        if index.size > 1 and not np.all(np.diff(index) > 0):
            raise ProtocolError(f"{what}.index is not ascending")
    present = obj.get("applied_present")
    if not isinstance(present, bool):
        raise ProtocolError(f"{what}.applied_present is not a boolean")
    n = index.size
    return TensorStep(
        name=name, shape=shape, grad_sumsq=_num(obj, "grad_sumsq", what),
        applied_present=present,
        applied_sumsq=_num(obj, "applied_sumsq", what) if present else 0.0,
        applied_dot_grad=_num(obj, "applied_dot_grad", what) if present else 0.0,
        delta_sumsq=_num(obj, "delta_sumsq", what),
        delta_dot_grad=_num(obj, "delta_dot_grad", what),
        delta_dot_applied=_num(obj, "delta_dot_applied", what) if present else 0.0,
        index=index, theta=_arr(obj, "theta", what, n), grad=_arr(obj, "grad", what, n),
        applied=_arr(obj, "applied", what, n) if present else None,
        delta=_arr(obj, "delta", what, n))


def parse_steps(answer: Any, registry: Sequence[tuple[str, tuple[int, ...]]],
                expected: int) -> list[StepRecord]:
    """The ``steps`` of a ``model.step`` answer, each with every registry tensor."""
    steps = answer.get("steps") if isinstance(answer, Mapping) else None
    if not isinstance(steps, list) or len(steps) != expected:
        raise ProtocolError(f"model.step answered {len(steps) if isinstance(steps, list) else 0}"
                            f" steps, {expected} were asked for")
    out = []
    for t, st in enumerate(steps):
        what = f"model.step steps[{t}]"
        if not isinstance(st, Mapping) or not isinstance(st.get("tensors"), Mapping):
            raise ProtocolError(f"{what} has no tensors object")
        logged = st.get("logged") or {}
        if not isinstance(logged, Mapping):
            raise ProtocolError(f"{what}.logged is not an object")
        norm = logged.get("grad_norm")
        which = logged.get("which") or "pre_clip"
        if which not in ("pre_clip", "post_clip"):
            raise ProtocolError(f"{what}.logged.which is {which!r}, not pre_clip or post_clip")
        tensors = {}
        for name, shape in registry:
            if name not in st["tensors"]:
                raise ProtocolError(f"{what} lacks the registry tensor {name!r}")
            tensors[name] = _tensor(name, shape, st["tensors"][name], f"{what}[{name!r}]")
        out.append(StepRecord(None if norm is None else decode_scalar(norm, f"{what}.logged"),
                              which, tensors))
    return out
