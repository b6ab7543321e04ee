"""Micro-batches of a gradient-accumulation step, and the gradients its usual bugs produce.

With ``TrainStep(micro_batches=K)`` the audit can split the batch as the step does (``split=``,
default: every array of the batch cut along its first axis into chunks of ``ceil(n / K)``, as
``torch.chunk`` does) and compute each micro-batch's true gradient ``G_k`` (the loss's own
reduction over the micro-batch).  A step that disagrees with the declared optimizer is then
compared with what the accumulation bugs people write would have produced:

* ``(1 / K) sum_k G_k``: every micro-batch weighted ``1 / K`` although they are uneven (the
  full-batch mean weights each by its size);
* ``G_K / K`` or ``G_K``: only the last micro-batch's gradient (``zero_grad`` inside the loop);
* ``clip(sum_{k<K} G_k / K) + G_K / K``: the clip applied before the last micro-batch's backward;
* ``K`` optimizer steps, each with ``G_k / K`` at the parameters the previous one left
  (``optimizer.step()`` inside the loop; predicted by the caller, which owns the optimizer
  model).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.semantics.context import BugClass, filled, global_norm


def length(batch: Any) -> int | None:
    if isinstance(batch, Mapping):
        for v in batch.values():
            n = length(v)
            if n is not None:
                return n
        return None
    if isinstance(batch, (tuple, list)):
        for v in batch:
            n = length(v)
            if n is not None:
                return n
        return None
    shape = getattr(batch, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else None


def _cut(batch: Any, lo: int, hi: int) -> Any:
    if isinstance(batch, Mapping):
        cut = {k: _cut(v, lo, hi) for k, v in batch.items()}
        return cut if type(batch) is dict else type(batch)(cut)  # type: ignore[call-arg]
    if isinstance(batch, tuple):
        return tuple(_cut(v, lo, hi) for v in batch)
    if isinstance(batch, list):
        return [_cut(v, lo, hi) for v in batch]
    shape = getattr(batch, "shape", None)
    return batch[lo:hi] if shape is not None and len(shape) else batch


def chunks(batch: Any, k: int) -> list[Any]:
    """``batch`` cut like ``torch.chunk(x, k)`` along the first axis of every array in it."""
    n = length(batch)
    if n is None or k < 1:
        raise ValueError("the batch has no array to split into micro-batches; pass split=")
    size = -(-n // k)
    return [_cut(batch, lo, min(lo + size, n)) for lo in range(0, n, size)]


def split_batch(batch: Any, k: int, split: Callable[[Any, int], Sequence[Any]] | None
                ) -> list[Any]:
    return list(split(batch, k)) if split is not None else chunks(batch, k)


def gradients(hooks: Any, loss_fn: Any, parts: Sequence[Any],
              like: Mapping[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Each micro-batch's true gradient at the hooks' current parameters (stored gradients
    restored)."""
    out = []
    for part in parts:
        left = hooks.snapshot()
        hooks.zero_grad()
        hooks.backward(loss_fn, part)
        out.append(filled(hooks.gradients(), like))
        hooks.restore(left)
    return out


@dataclass(frozen=True)
class Variant:
    """A gradient a known accumulation bug produces: its bug class, the hint naming it, the
    gradient and whether the step clips it afterwards."""

    bug: BugClass
    hint: str
    grads: dict[str, np.ndarray]
    clipped_after: bool = True


def _sum(parts: Sequence[Mapping[str, np.ndarray]], w: float) -> dict[str, np.ndarray]:
    return {k: w * np.sum([p[k] for p in parts], axis=0) for k in parts[0]}


def variants(parts: Sequence[Mapping[str, np.ndarray]], sizes: Sequence[int],
             max_norm: float | None, clip_eps: Sequence[float] = (0.0,)) -> list[Variant]:
    """The gradients of the accumulation bugs (see module doc) from micro-batch gradients;
    ``clip_eps``: the epsilons the engine's clip may add to the norm (each is tried)."""
    k = len(parts)
    if k < 2:
        return []
    out = []
    if len(set(sizes)) > 1:
        out.append(Variant(BugClass.UNEVEN_MICRO_BATCHES,
                           f": the step weighted the {k} micro-batches (sizes "
                           f"{', '.join(map(str, sizes))}) equally, each loss divided by K = {k}; "
                           "the full-batch mean weights each by its size: scale micro-batch i's "
                           "loss by its size / the batch size", _sum(parts, 1.0 / k)))
    out.append(Variant(BugClass.ZERO_GRAD_IN_ACCUMULATION,
                       f": the step used only the last of the {k} micro-batches' gradients "
                       "(divided by K): zero_grad() inside the accumulation loop resets the "
                       "earlier ones; call it once, before the loop", _sum(parts[-1:], 1.0 / k)))
    out.append(Variant(BugClass.ZERO_GRAD_IN_ACCUMULATION,
                       f": the step used only the last of the {k} micro-batches' gradients: "
                       "zero_grad() inside the accumulation loop resets the earlier ones; call "
                       "it once, before the loop", _sum(parts[-1:], 1.0)))
    if max_norm is not None:
        head = _sum(parts[:-1], 1.0 / k)
        norm = global_norm(head)
        tail = _sum(parts[-1:], 1.0 / k)
        for e in clip_eps:
            s = min(1.0, max_norm / (norm + e)) if norm else 1.0
            out.append(Variant(BugClass.CLIP_BEFORE_LAST_MICRO_BATCH,
                               f": the step clipped the sum of the first {k - 1} micro-batch "
                               f"gradients (to max_norm = {max_norm:g}) and then added the last "
                               "one unclipped: clip after the loop, just before "
                               "optimizer.step()",
                               {n: s * head[n] + tail[n] for n in head}, clipped_after=False))
    return out
