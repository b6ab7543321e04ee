"""The rounding level of a training step's gradient, and what it does to the step.

The audit's reference gradient is one backward over the whole batch; a correct step may sum
``K`` micro-batch gradients instead.  Both are the same number up to rounding, and for a
parameter whose gradient cancels (a bias before a normalisation; the key bias of attention,
whose gradient is identically zero because softmax ignores a constant shift) the rounding *is*
the gradient.  The step comparison therefore needs an allowance for the gradient itself:

* *Measured noise.*  Two more backwards of the same loss scaled by 3 and by 0.3 (not powers of
  two: every product and sum in the backward rounds differently) give two samples of the
  gradient's rounding in the model's dtype; ``sigma_p`` is the largest difference from the
  reference gradient over parameter ``p``'s elements (the terms summed into an element of one
  tensor are of one kind, so the tensor's largest sample bounds its elements').
* *The gradient's rounding level*, elementwise: ``noise_factor x sigma_p x (1 + K) / 2 +
  rounding_gamma x eps(dtype) x (|g| + K max|g_p|)``: each of the ``K`` partial gradients
  rounds like one backward, and their sum adds ``K`` roundings of the largest partial.  ``K``
  is ``TrainStep(micro_batches=K)``, 16 when undeclared (the largest accumulation the audit
  assumes without being told).
* *Propagated through the optimizer.*  The declared optimizer is run two more times, from
  ``g + level`` and ``g - level`` (each with its own state, carried from step to step); the
  allowance of each parameter element is twice the larger distance of those from the
  prediction.  Under SGD that is ``lr`` times the level (with momentum, accumulated); under Adam
  a gradient at its rounding level is a step of either sign of up to ``lr``, so such elements
  are judged by whether their gradient is below its rounding level, not by the step's size.

Elements whose gradient is below its rounding level at every audited step are reported (the
true gradient is zero, or too small to be resolved in this dtype: they cannot learn from this
loss).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.oracle.error_model import ErrorModel, eps
from gradcheck.semantics.context import filled

DEFAULT_MICRO_BATCHES = 16
_SCALES = (3.0, 0.3)


@dataclass(frozen=True)
class GradientNoise:
    """The rounding level of one step's gradient: ``sigma`` (largest measured rounding sample
    per parameter), ``level`` (the allowed gradient error, elementwise) and ``below`` (elements
    whose gradient is within its level)."""

    sigma: dict[str, float]
    level: dict[str, np.ndarray]
    below: dict[str, np.ndarray]
    micro_batches: int


def measure(hooks: Any, loss_fn: Any, batch: Any, grads: Mapping[str, np.ndarray],
            like: Mapping[str, np.ndarray], micro_batches: int | None,
            error_model: ErrorModel) -> GradientNoise:
    """Two rescaled backwards at the current parameters (stored gradients restored after)."""
    samples = []
    for scale in _SCALES:
        left = hooks.snapshot()
        hooks.zero_grad()
        hooks.backward(loss_fn, batch, scale=scale)
        raw = filled(hooks.gradients(), like)
        hooks.restore(left)
        samples.append({k: v / scale for k, v in raw.items()})
    k_mb = int(micro_batches) if micro_batches else DEFAULT_MICRO_BATCHES
    dt = hooks.dtype
    sigma, level, below = {}, {}, {}
    for k, g in grads.items():
        g = np.asarray(g, dtype=np.float64)
        s = max((float(np.max(np.abs(x[k] - g))) if g.size else 0.0) for x in samples)
        sigma[k] = s
        top = float(np.max(np.abs(g))) if g.size else 0.0
        level[k] = (error_model.noise_bound(s) * (1 + k_mb) / 2.0
                    + error_model.rounding_gamma * eps(dt) * (np.abs(g) + k_mb * top))
        below[k] = np.abs(g) <= level[k]
    return GradientNoise(sigma, level, below, k_mb)


def shifted(grads: Mapping[str, np.ndarray], noise: GradientNoise, sign: float
            ) -> dict[str, np.ndarray]:
    """``g + sign x level``."""
    return {k: np.asarray(g, dtype=np.float64) + sign * noise.level[k] for k, g in grads.items()}


def propagated(pred: Mapping[str, np.ndarray], plus: Mapping[str, np.ndarray],
               minus: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The parameter-space allowance: twice the larger distance of the shifted predictions."""
    return {k: 2.0 * np.maximum(np.abs(plus[k] - pred[k]), np.abs(minus[k] - pred[k]))
            for k in pred}


def unresolved(masks: Sequence[Mapping[str, np.ndarray]]) -> dict[str, tuple[int, int]]:
    """Parameters with elements below their rounding level at every step: name -> (count,
    size)."""
    if not masks:
        return {}
    out = {}
    for k in masks[0]:
        m = np.logical_and.reduce([np.asarray(x[k], dtype=bool) for x in masks])
        n = int(np.sum(m))
        if n:
            out[k] = (n, int(m.size))
    return out


def describe_unresolved(found: Mapping[str, tuple[int, int]], limit: int = 6) -> str:
    """``"; gradient below its rounding level at every step (zero: cannot learn from this
    loss): att.in_proj_bias 8 of 24 elements"``, or ``""``."""
    if not found:
        return ""
    parts = [f"{k} {'all' if n == size else n} of {size} element{'s' if size > 1 else ''}"
             for k, (n, size) in list(found.items())[:limit]]
    more = len(found) - limit
    return ("; gradient below its rounding level at every step (its true value is zero or not "
            "resolvable in this dtype: cannot learn from this loss): " + ", ".join(parts)
            + (f", ... ({more} more)" if more > 0 else ""))
