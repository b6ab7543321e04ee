"""The catalog ops written for MLX (``mlx.core``, ``mlx.nn``, ``mlx.core.fast``), one module per
catalog family.

Each family module exports ``OPS`` (MLX arrays in, MLX arrays out) and ``MISSING``: ops MLX
0.32 cannot provide on the CPU, with the reason (no such function, or a primitive without a
VJP).  Arrays are NumPy's layout (channels first); the ops transpose to MLX's channels-last
convolutions and pools themselves.
"""

from __future__ import annotations

from collections.abc import Callable

from gradcheck.ops.catalog import FAMILIES, package_op

__all__ = ["FAMILIES", "get_op"]


def get_op(name: str) -> Callable | None:
    """The MLX implementation of catalog op ``name`` (None if there is none)."""
    return package_op(__name__, name)
