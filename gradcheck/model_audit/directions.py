"""The seeded directions of the model protocol, regenerated on both sides of the pipe.

``docs/protocol-model.md`` ("Directions both sides regenerate") fixes the rule; the Rust and Go
libraries implement the same one and test the same vectors.  A direction is
``{"seed": S, "scope": [{"name", "start", "stop", "scale"}, ...]}``; its element ``j`` of tensor
``N`` is ``scale * sign(S, N, j)`` inside ``[start, stop)`` and 0 elsewhere, with::

    key  = mix(S XOR fnv1a64(N))
    z    = mix(key + (j + 1) * 0x9E3779B97F4A7C15)      (wrapping, mod 2^64)
    sign = +1 if the top bit of z is 0, else -1

``mix`` is the splitmix64 finalizer.  The generator is counter-based: any element or slice is
computed on its own, vectorised here with NumPy ``uint64`` (wrapping arithmetic), in blocks, so
a 1e7-element tensor costs a few passes over one block buffer.

:func:`sample_indices` is ``model.step``'s stratified sample of a tensor's flat indices (it
depends only on the tensor's size and the sample count).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["GOLDEN", "Direction", "Scope", "fnv1a64", "mix", "mix_array", "sample_indices",
           "signs", "values"]

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_BLOCK = 1 << 20  # elements generated at once


def fnv1a64(name: str) -> int:
    """FNV-1a (64 bit) of ``name``'s UTF-8 bytes."""
    h = _FNV_OFFSET
    for b in name.encode("utf-8"):
        h = ((h ^ b) * _FNV_PRIME) & MASK64
    return h


def mix(x: int) -> int:
    """The splitmix64 finalizer of one integer (mod 2^64)."""
    x &= MASK64
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & MASK64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & MASK64
    x ^= x >> 31
    return x


def mix_array(x: np.ndarray) -> np.ndarray:
    """:func:`mix` of every element of a ``uint64`` array, in place (returned)."""
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= _M1
        x ^= x >> np.uint64(27)
        x *= _M2
        x ^= x >> np.uint64(31)
    return x


def _key(seed: int, name: str) -> int:
    return mix((int(seed) ^ fnv1a64(name)) & MASK64)


def signs(seed: int, name: str, start: int, stop: int) -> np.ndarray:
    """The signs (``int8``, +1 / -1) of elements ``start..stop-1`` of tensor ``name``."""
    if not 0 <= start <= stop:
        raise ValueError(f"invalid element range [{start}, {stop})")
    out = np.empty(stop - start, dtype=np.int8)
    key = np.uint64(_key(seed, name))
    golden = np.uint64(GOLDEN)
    for lo in range(start, stop, _BLOCK):
        hi = min(lo + _BLOCK, stop)
        z = np.arange(lo + 1, hi + 1, dtype=np.uint64)
        with np.errstate(over="ignore"):
            z *= golden
            z += key
        mix_array(z)
        top = (z >> np.uint64(63)).astype(np.int8)
        out[lo - start:hi - start] = 1 - 2 * top
    return out


def values(seed: int, name: str, size: int, start: int = 0, stop: int | None = None,
           scale: float = 1.0) -> np.ndarray:
    """The direction's float64 values over the whole tensor (``size`` elements): ``scale *
    sign`` in ``[start, stop)``, 0 elsewhere."""
    stop = size if stop is None else min(int(stop), size)
    out = np.zeros(size)
    if stop > start:
        out[start:stop] = signs(seed, name, start, stop)
        out[start:stop] *= scale
    return out


@dataclass(frozen=True)
class Scope:
    """One entry of a direction's scope: tensor ``name``, elements ``[start, stop)`` (``stop``
    None: to the end), every element ``+-scale``."""

    name: str
    scale: float = 1.0
    start: int = 0
    stop: int | None = None

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "start": self.start, "scale": self.scale}
        if self.stop is not None:
            out["stop"] = self.stop
        return out


@dataclass(frozen=True)
class Direction:
    """A seeded direction: what ``model.line`` carries instead of the vector."""

    seed: int
    scope: tuple[Scope, ...]

    def wire(self) -> dict[str, Any]:
        return {"seed": self.seed, "scope": [s.wire() for s in self.scope]}

    def arrays(self, sizes: Mapping[str, int]) -> dict[str, np.ndarray]:
        """The direction as one flat float64 array per named tensor (its scope's tensors)."""
        out: dict[str, np.ndarray] = {}
        for s in self.scope:
            v = values(self.seed, s.name, sizes[s.name], s.start, s.stop, s.scale)
            out[s.name] = out[s.name] + v if s.name in out else v
        return out

    def size(self, sizes: Mapping[str, int]) -> int:
        """How many elements the direction moves."""
        return sum(max(0, min(sizes[s.name], sizes[s.name] if s.stop is None else s.stop)
                       - s.start) for s in self.scope)


def sample_indices(n: int, k: int) -> np.ndarray:
    """``model.step``'s sampled flat indices of a tensor of ``n`` elements: all of them when
    ``n <= k``, else one per stratum ``[floor(m n / k), floor((m+1) n / k))``, ``m < k``, at
    offset ``mix(m) mod width`` (ascending)."""
    if n <= k:
        return np.arange(n, dtype=np.int64)
    m = np.arange(k, dtype=np.uint64)
    lo = (np.arange(k, dtype=object) * n) // k
    hi = (np.arange(1, k + 1, dtype=object) * n) // k
    width = (hi - lo).astype(np.uint64)
    off = mix_array(m.copy()) % width
    return lo.astype(np.int64) + off.astype(np.int64)


def scope_of(names: Sequence[str], scales: Mapping[str, float]) -> tuple[Scope, ...]:
    """Whole-tensor scope entries for ``names`` with their scales."""
    return tuple(Scope(n, float(scales[n])) for n in names)
