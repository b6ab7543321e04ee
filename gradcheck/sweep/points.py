"""Edge points, generated per op from its template and its forward, not hand-picked.

A point fills the template's shapes with the values of one *band* (log-spaced magnitudes from
the dtype's smallest subnormal to just below its overflow, both signs; exact zeros; zeros
inside otherwise ordinary values; near and at integers and half-integers; near and at +-1;
ties; saturation regions), or, for linalg ops, with degenerate matrices (identity, repeated
eigenvalues, a zero eigenvalue), or, for ops of two or more inputs, zero bases, zero
exponents and integer arguments of both signs in one input.  Every value is representable
in the dtype under test.  The values of a band are spread over the elements in an order drawn
from a seed derived from the op name, the band and the dtype.

The forward's finite domain is found by evaluating it: for an elementwise op the elements
whose output is not finite get their template values back (so ``log`` keeps the band's
positive values); any other op whose output is not finite at a point loses that point, and
the point is listed as outside the domain (:class:`Skipped`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck.core.dtypes import float_info, numpy_dtype
from gradcheck.sweep.inventory.records import ELEMENTWISE, LINALG, Op

Forward = Callable[[Sequence[np.ndarray], str], list[np.ndarray]]
Evaluate = Callable[[Sequence[np.ndarray]], list[np.ndarray]]

MAGNITUDE_BANDS = ("subnormal", "tiny", "small", "unit", "large", "huge")
SPECIAL_BANDS = ("zero", "zeros_inside", "integer", "near_integer", "half_integer", "near_one",
                 "ties", "saturation")
LINALG_POINTS = ("identity", "repeated_eigenvalues", "zero_eigenvalue")
ARGUMENT_POINTS = ("zero_base", "zero_exponent", "integer_exponent")

#: the bands each profile generates
PROFILE_BANDS = {
    "quick": ("sample", "unit", "tiny", "large", "zero", "near_integer"),
    "default": ("sample", *MAGNITUDE_BANDS, *SPECIAL_BANDS, *LINALG_POINTS, *ARGUMENT_POINTS),
    "thorough": ("sample", *MAGNITUDE_BANDS, *SPECIAL_BANDS, *LINALG_POINTS, *ARGUMENT_POINTS),
}


@dataclass(frozen=True)
class Point:
    """One point of one op: its band's name and the float64 arrays (representable in the
    dtype under test)."""

    name: str
    arrays: tuple[np.ndarray, ...]
    repaired: int = 0  # elements given their template values back (outside the domain)


@dataclass(frozen=True)
class Skipped:
    """A band that yields no point for an op, and why."""

    name: str
    reason: str


def seed_of(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("/".join(parts).encode()).digest()[:4], "big")


def finfo(dtype: str) -> tuple[float, float, float, float]:
    """(smallest subnormal, smallest normal, eps, max) of ``dtype``."""
    info = float_info(dtype)
    return (float(info.smallest_subnormal), float(info.tiny), float(info.eps), float(info.max))


def representable(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` rounded to ``dtype`` and back to float64."""
    if dtype == "float64":
        return np.asarray(values, dtype=np.float64)
    return np.asarray(values).astype(numpy_dtype(dtype)).astype(np.float64)


def band_values(band: str, n: int, dtype: str, rng: np.random.Generator) -> np.ndarray | None:
    """``n`` values of ``band`` in ``dtype`` (signs alternating, in a drawn order)."""
    sub, tiny, eps, big = finfo(dtype)
    lo, lt, le, hi = (np.log10(v) for v in (sub, tiny, eps, big))
    # the large bands span a few decades each: one check's elements stay of one scale
    spans = {"subnormal": (lo, lt), "tiny": (lt, le), "small": (le, -1.0), "unit": (-1.0, 1.0),
             "large": (1.0, min(4.0, hi / 2)), "huge": (max(hi / 2, hi - 6.0), hi - 0.05)}
    k = np.arange(n)
    sign = np.where(k % 2 == 0, 1.0, -1.0)
    if band in spans:
        a, b = spans[band]
        values = sign * 10.0 ** np.linspace(a, b, max(n, 2))[:n]
    elif band == "zero":
        values = np.zeros(n)
    elif band == "zeros_inside":
        values = sign * 10.0 ** np.linspace(-0.5, 0.5, n)
        values[::3] = 0.0
    elif band in ("integer", "near_integer", "half_integer"):
        ints = (k % 7 - 3).astype(np.float64)
        offset = {"integer": 0.0, "near_integer": 0.0, "half_integer": 0.5}[band]
        delta = 0.0 if band == "integer" else np.array([8 * eps, -8 * eps, 1e-6, -1e-3])[k % 4]
        values = ints + offset + delta * np.maximum(1.0, np.abs(ints))
    elif band == "near_one":
        delta = 10.0 ** np.linspace(np.log10(eps), -2.0, max(n, 2))[:n]
        values = sign * (1.0 + np.where(k % 4 < 2, delta, -delta))
        values[::5] = sign[::5]
    elif band == "ties":
        values = np.full(n, 0.625)
        values[1::2] = -0.375
    else:
        return None
    return representable(rng.permutation(values), dtype)


def _fill(shape: tuple[int, ...], values: np.ndarray) -> np.ndarray:
    n = int(np.prod(shape))
    return np.resize(values, n).reshape(shape).astype(np.float64) if n else np.zeros(shape)


def _square(a: np.ndarray) -> bool:
    return a.ndim >= 2 and a.shape[-1] == a.shape[-2] and a.shape[-1] >= 2


def _degenerate(kind: str, a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A symmetric matrix of ``a``'s shape with the degenerate spectrum ``kind``."""
    m = a.shape[-1]
    q, _ = np.linalg.qr(rng.normal(size=(m, m)))
    eig = {"identity": np.ones(m), "repeated_eigenvalues": np.r_[np.ones(m - 1), 2.0],
           "zero_eigenvalue": np.r_[0.0, np.linspace(1.0, 2.0, m - 1)]}[kind]
    mat = np.eye(m) if kind == "identity" else (q * eig) @ q.T
    return np.broadcast_to(mat, a.shape).copy()


def _saturation(forward: Evaluate, n: int, dtype: str) -> np.ndarray | None:
    """Values where the derivative of a one-input elementwise op is tiny next to its largest
    value on a log grid, but not zero (found by searching on that ratio)."""
    grid = np.concatenate([-(10.0 ** np.linspace(3, -3, 121)), 10.0 ** np.linspace(-3, 3, 121)])
    h = 1e-6 * np.maximum(1.0, np.abs(grid))
    try:
        up, down = forward([grid + h])[0], forward([grid - h])[0]
    except Exception:
        return None
    if up.shape != grid.shape:
        return None
    slope = np.abs(up - down) / (2 * h)
    top = np.nanmax(np.where(np.isfinite(slope), slope, np.nan)) if np.isfinite(slope).any() \
        else 0.0
    if not top:
        return None
    ratio = slope / top
    chosen = grid[(ratio > 1e-12) & (ratio < 1e-4)]
    return None if chosen.size == 0 else representable(np.resize(chosen, n), dtype)


def _finite(outs: Sequence[np.ndarray]) -> bool:
    return all(np.all(np.isfinite(o)) for o in outs)


def _repair(op: Op, arrays: list[np.ndarray], forward: Evaluate
            ) -> tuple[list[np.ndarray], int] | str:
    """The arrays with the elements outside the finite domain given their template values back
    (elementwise ops); a reason string where the point is outside the domain."""
    try:
        outs = forward(arrays)
    except Exception as exc:
        return f"the forward raised {type(exc).__name__}"
    if _finite(outs):
        return arrays, 0
    shape = arrays[0].shape
    if op.family != ELEMENTWISE or any(a.shape != shape for a in arrays) or any(
            o.shape != shape for o in outs):
        return "the forward is not finite there (outside the domain)"
    bad = np.zeros(shape, dtype=bool)
    for o in outs:
        bad |= ~np.isfinite(o)
    fixed = [np.where(bad, t, a) for a, t in zip(arrays, op.template, strict=True)]
    if bad.all():
        return "the forward is not finite at any element (outside the domain)"
    try:
        if not _finite(forward(fixed)):
            return "the forward is not finite there (outside the domain)"
    except Exception as exc:
        return f"the forward raised {type(exc).__name__}"
    return fixed, int(bad.sum())


def _arrays_for(op: Op, band: str, dtype: str, forward: Forward
                ) -> list[np.ndarray] | str | None:
    rng = np.random.default_rng(seed_of(op.backend, op.name, band, dtype))
    template = [representable(t, dtype) for t in op.template]
    if band == "sample":
        return template
    if band in LINALG_POINTS:
        if op.family != LINALG or not any(_square(t) for t in template):
            return None
        return [_degenerate(band, t, rng) if _square(t) else t for t in template]
    if band in ARGUMENT_POINTS:
        if len(template) < 2:
            return None
        out = list(template)
        if band == "zero_base":
            out[0] = np.zeros_like(out[0])
        elif band == "zero_exponent":
            out[1] = np.zeros_like(out[1])
        else:
            out[1] = _fill(out[1].shape, np.array([2.0, -1.0, 3.0, -2.0, 0.0, 1.0]))
        return out
    if band == "saturation":
        if op.family != ELEMENTWISE or len(template) != 1:
            return None
        values = _saturation(lambda xs: forward(xs, "float64"), template[0].size, dtype)
        if values is None:
            return "no saturation region on the searched grid"
        return [_fill(template[0].shape, values)]
    out = []
    for t in template:
        values = band_values(band, max(t.size, 1), dtype, rng)
        if values is None:
            return None
        out.append(_fill(t.shape, values))
    return out


def points(op: Op, dtype: str, profile: str, forward: Forward
           ) -> tuple[list[Point], list[Skipped]]:
    """The edge points of ``op`` in ``dtype`` for ``profile``; ``forward(arrays, dtype)``
    evaluates the op in ``dtype`` (float64 numpy outputs) to find its finite domain there."""
    made: list[Point] = []
    skipped: list[Skipped] = []
    seen: set[bytes] = set()
    for band in PROFILE_BANDS[profile]:
        arrays = _arrays_for(op, band, dtype, forward)
        if arrays is None:
            continue  # the band does not apply to this op's structure
        if isinstance(arrays, str):
            skipped.append(Skipped(band, arrays))
            continue
        repaired = _repair(op, arrays, lambda xs: forward(xs, dtype))
        if isinstance(repaired, str):
            skipped.append(Skipped(band, repaired))
            continue
        fixed, count = repaired
        key = b"".join(a.tobytes() for a in fixed)
        if key in seen:
            skipped.append(Skipped(band, "the same values as an earlier band after the domain "
                                         "repair"))
            continue
        seen.add(key)
        made.append(Point(band, tuple(fixed), count))
    return made, skipped
