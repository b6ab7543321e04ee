"""What one training step should do: the declared optimizer applied to the clipped true
gradient, with declared ties and target updates, from a given state (float64)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.model_audit.optimizers import update
from gradcheck.semantics.context import global_norm


@dataclass(frozen=True)
class Tie:
    """Parameters ``a`` and ``b`` are one weight kept as two parameters (``b`` equals ``a``, or
    ``a.T`` with ``transpose``) and synced by the step: the weight's gradient is the sum of both,
    the optimizer updates ``a`` and ``b`` is set to the result."""

    a: str
    b: str
    transpose: bool = False

    def of(self, x: np.ndarray) -> np.ndarray:
        return x.T if self.transpose else x


@dataclass(frozen=True)
class TargetUpdate:
    """A target network updated by the step: every ``every``-th step, after the optimizer,
    ``target <- (1 - tau) target + tau source`` (``tau=1``: a hard copy).  ``target`` and
    ``source`` are dotted prefixes; parameters pair by the rest of their names."""

    target: str
    source: str
    tau: float
    every: int = 1

    def pairs(self, names: Sequence[str]) -> list[tuple[str, str]]:
        out = []
        for n in names:
            if n == self.target or n.startswith(self.target + "."):
                src = self.source + n[len(self.target):]
                if src not in names:
                    raise ValueError(f"TargetUpdate: {n!r} has no source parameter {src!r}")
                out.append((n, src))
        if not out:
            raise ValueError(f"TargetUpdate: no parameter under {self.target!r}")
        return out


@dataclass(frozen=True)
class Prediction:
    """Predicted parameters, the magnitude of the terms (error model), the optimizer state after
    the step, the clip factor ``s`` and the global norm of the gradient that was clipped."""

    values: dict[str, np.ndarray]
    magnitude: dict[str, np.ndarray]
    state: dict[str, dict]
    s: float
    norm: float


def predict(model: Any, values: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray],
            moving: Sequence[str], state: Mapping[str, dict], t: int, *,
            max_norm: float | None, eps: float, ties: Sequence[Tie] = (),
            targets: Sequence[TargetUpdate] = (), scale: float = 1.0, s: float | None = None,
            repeat: int = 1, clip_value: float | None = None) -> Prediction:
    """One step (``repeat`` steps with the same gradient) at step index ``t``; ``moving``: the
    parameters the optimizer should update (have a gradient, not declared stopped); ``scale``
    multiplies the gradient (used to name a failure by its factor); ``clip_value`` clips each
    element to ``[-clip_value, clip_value]`` before the norm clip."""
    names = list(values)
    if clip_value is not None:
        grads = {k: np.clip(np.asarray(grads[k], dtype=np.float64), -clip_value, clip_value)
                 if k in moving else grads[k] for k in grads}
    norm = global_norm({k: grads[k] for k in moving})
    if s is None:
        s = 1.0 if max_norm is None else min(1.0, max_norm / (norm + eps)) if norm else 1.0
    g = {k: scale * s * np.asarray(grads[k], dtype=np.float64) for k in moving}
    tied_b = {t_.b: t_ for t_ in ties}
    for tie in ties:
        if tie.a in g and tie.b in g:
            g[tie.a] = g[tie.a] + tie.of(g[tie.b])
    target_of = {tk: (tu, sk) for tu in targets for tk, sk in tu.pairs(names)}
    new = {k: np.asarray(values[k], dtype=np.float64) for k in names}
    mag = {k: 2.0 * np.abs(new[k]) for k in names}
    st = {k: dict(v) for k, v in state.items()}
    for _ in range(repeat):
        for k in moving:
            if k in tied_b or k in target_of:
                continue
            h = model.hyper(k, t)
            if h is None:
                continue
            p_new, st[k], m = update(h, new[k], g[k], st.get(k, {}))
            mag[k] = mag[k] + m
            new[k] = p_new
    for tie in ties:
        new[tie.b] = tie.of(new[tie.a])
        mag[tie.b] = tie.of(mag[tie.a])
    for tk, (tu, sk) in target_of.items():
        if (t + 1) % tu.every == 0:
            new[tk] = (1.0 - tu.tau) * new[tk] + tu.tau * new[sk]
            mag[tk] = mag[tk] + np.abs(new[tk]) + tu.tau * mag[sk]
    return Prediction(new, mag, st, float(s), norm)
