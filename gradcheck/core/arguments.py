"""Validation of the public entry points' scalar arguments (``check``, ``assert_gradients``,
``check_semantics``, ``audit``): a wrong type or range is an :class:`InvalidArgument` naming the
argument, never a ``TypeError`` deep inside NumPy or a silently coerced value."""

from __future__ import annotations

import math
import numbers
from typing import Any

from gradcheck.core.errors import InvalidArgument


def integer(name: str, value: Any, *, minimum: int | None = None) -> int:
    """``value`` as an ``int``: Python and NumPy integers only (not ``bool``, not ``1.0``,
    not ``"3"``), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgument(f"{name}={value!r} must be an integer "
                              f"(got {type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise InvalidArgument(f"{name}={value!r} must be an integer >= {minimum}")
    return value


def seed(value: Any) -> int:
    """A random seed: an integer >= 0 (``numpy.random.default_rng`` rejects negative ones)."""
    return integer("seed", value, minimum=0)


def timeout(value: Any) -> float | None:
    """``None`` (no limit) or a finite number of seconds > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            math.isfinite(float(value)) and float(value) > 0):
        raise InvalidArgument(f"timeout={value!r} must be None or a finite number of seconds "
                              "> 0")
    return float(value)


def tolerance(name: str, value: Any) -> float | None:
    """``atol``/``rtol``: ``None`` or a finite real number >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            math.isfinite(float(value)) and float(value) >= 0):
        raise InvalidArgument(f"{name}={value!r} must be a finite number >= 0")
    return float(value)
