"""Hypothesis strategies for gradient tests of your own ops.

::

    from hypothesis import given
    from gradcheck import strategies as gst

    @given(gst.arrays((3, 4), "float64", avoid=[0.0]))     # |x| kept away from the kink at 0
    def test_my_abs_op(x):
        gradcheck.assert_gradients(my_abs_op, x, backend="torch")

:func:`arrays` draws arrays of a shape and dtype with finite values in ``[min_value,
max_value]``, every value representable in the dtype (drawn in float64, rounded to it), mixed
with the special values the catalog and the sweep check ops at (:data:`SPECIAL_BANDS`: zero,
integers and half-integers, values near +-1 and next to an integer, ties; the magnitude bands:
tiny, small, unit, large; :func:`gradcheck.sweep.points.band_values`), and keeps every value at
least ``margin`` away from each point of ``avoid`` (the op's declared kinks: ``abs`` and
``relu`` at 0, ``clip`` at its bounds).  The default margin is the oracle's largest relative
finite-difference step (``ErrorModel.fd_h0_factor`` times ``max(1, |kink|)``): a kink nearer
than that is inside the largest steps' stencil, and the check is inconclusive there, not wrong
(``docs/error-model.md``), which wastes the example.  :func:`shapes` draws shapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gradcheck.core.dtypes import numpy_dtype
from gradcheck.core.errors import InvalidArgument
from gradcheck.oracle.error_model import DEFAULT_MODEL
from gradcheck.sweep.points import band_values, representable

#: the catalog's special-value bands :func:`arrays` mixes in by default (the sweep's
#: ``subnormal`` and ``huge`` bands are left out: engines flush subnormals, and huge values
#: overflow most ops; pass ``bands=`` to choose)
SPECIAL_BANDS = ("zero", "integer", "near_integer", "half_integer", "near_one", "ties", "tiny",
                 "small", "unit", "large")
ALL_BANDS = ("subnormal", *SPECIAL_BANDS, "huge")
_POOL = 64  # values drawn per band (a fixed seed: the pool is the same in every run)
DTYPES = ("float64", "float32", "float16", "bfloat16")


def _margin(point: float, margin: float | None) -> float:
    return margin if margin is not None else DEFAULT_MODEL.fd_h0_factor * max(1.0, abs(point))


def _allowed(lo: float, hi: float, avoid: Sequence[float], margin: float | None
             ) -> list[tuple[float, float]]:
    """The parts of ``[lo, hi]`` at least the margin away from every point of ``avoid``."""
    parts = [(lo, hi)]
    for k in avoid:
        m = _margin(k, margin)
        out = []
        for a, b in parts:
            if k + m <= a or k - m >= b:
                out.append((a, b))
                continue
            if a < k - m:
                out.append((a, float(np.nextafter(k - m, -np.inf))))
            if k + m < b:
                out.append((float(np.nextafter(k + m, np.inf)), b))
        parts = out
    return parts


def _away(x: float, avoid: Sequence[float], margin: float | None) -> bool:
    return all(abs(x - k) >= _margin(k, margin) for k in avoid)


def special_values(dtype: str = "float64", *, bands: Iterable[str] = SPECIAL_BANDS,
                   min_value: float = -np.inf, max_value: float = np.inf,
                   avoid: Sequence[float] = (), margin: float | None = None) -> list[float]:
    """The catalog's special values of ``bands`` in ``dtype``, inside ``[min_value,
    max_value]`` and away from ``avoid``, sorted (the pool :func:`arrays` mixes in)."""
    pool: set[float] = set()
    for band in bands:
        if band not in ALL_BANDS:
            raise InvalidArgument.choice("bands", band, ALL_BANDS)
        values = band_values(band, _POOL, dtype, np.random.default_rng(0))
        if values is not None:
            pool.update(float(v) for v in values)
    return sorted(v for v in pool if min_value <= v <= max_value and _away(v, avoid, margin))


def elements(dtype: str = "float64", *, min_value: float = -10.0, max_value: float = 10.0,
             avoid: Sequence[float] = (), margin: float | None = None,
             bands: Iterable[str] | None = SPECIAL_BANDS) -> st.SearchStrategy[float]:
    """One value: finite, in ``[min_value, max_value]``, representable in ``dtype``, at least
    the margin away from each point of ``avoid``; a special value of ``bands`` about one
    draw in four (``bands=None``: none)."""
    if dtype not in DTYPES:
        raise InvalidArgument.choice("dtype", dtype, DTYPES)
    if not (np.isfinite(min_value) and np.isfinite(max_value) and min_value <= max_value):
        raise InvalidArgument(f"min_value={min_value!r}, max_value={max_value!r}: need finite "
                              "bounds with min_value <= max_value")
    avoid = [float(k) for k in avoid]
    parts = _allowed(float(min_value), float(max_value), avoid, margin)
    if not parts:
        raise InvalidArgument(f"avoid={avoid!r} with margin {margin} leaves nothing of "
                              f"[{min_value}, {max_value}]: widen the range or pass a smaller "
                              "margin=")
    floats = st.one_of(*(st.floats(a, b, allow_nan=False, allow_infinity=False,
                                   allow_subnormal=False) for a, b in parts))
    # rounded to the dtype: a value rounded into a kink's neighbourhood or out of range is
    # drawn again
    plain = floats.map(lambda v: float(representable(np.float64(v), dtype))).filter(
        lambda v: min_value <= v <= max_value and _away(v, avoid, margin))
    pool = special_values(dtype, bands=bands or (), min_value=min_value, max_value=max_value,
                          avoid=avoid, margin=margin)
    if not pool:
        return plain
    return st.one_of(plain, plain, plain, st.sampled_from(pool))


def shapes(*, min_dims: int = 0, max_dims: int = 3, min_side: int = 1,
           max_side: int = 5) -> st.SearchStrategy[tuple[int, ...]]:
    """Array shapes (small by default: each example runs the finite-difference oracle)."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def arrays(shape: int | tuple[int, ...] | st.SearchStrategy[tuple[int, ...]],
           dtype: str = "float64", *, min_value: float = -10.0, max_value: float = 10.0,
           avoid: Sequence[float] = (), margin: float | None = None,
           bands: Iterable[str] | None = SPECIAL_BANDS) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``shape`` (an int, a tuple or a strategy such as :func:`shapes`) and
    ``dtype`` (a float dtype name; ``bfloat16`` needs ``ml_dtypes``) whose elements are drawn
    by :func:`elements` with the same keyword arguments."""
    each = elements(dtype, min_value=min_value, max_value=max_value, avoid=avoid,
                    margin=margin, bands=bands)
    return hnp.arrays(np.float64, shape, elements=each).map(
        lambda a: a.astype(numpy_dtype(dtype)))


__all__ = ["ALL_BANDS", "DTYPES", "SPECIAL_BANDS", "arrays", "elements", "shapes",
           "special_values"]
