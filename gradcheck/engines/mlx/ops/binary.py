"""Elementwise binary catalog ops written for MLX."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx

OPS: dict[str, Callable[..., Any]] = {
    "add": mx.add,
    "sub": mx.subtract,
    "mul": mx.multiply,
    "div": mx.divide,
    "pow": mx.power,
    "atan2": mx.arctan2,
    "maximum": mx.maximum,
    "minimum": mx.minimum,
    "logaddexp": mx.logaddexp,
    "add_bcast": mx.add,
    "mul_bcast": mx.multiply,
    "div_bcast": mx.divide,
    "mul_scalar": mx.multiply,
}

MISSING = {"hypot": "MLX 0.32 has no hypot"}
