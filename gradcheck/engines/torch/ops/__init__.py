"""The catalog ops written for PyTorch, one module per catalog family (``FAMILIES``).

Each family module exports ``OPS: dict[str, Callable]`` (tensors in, tensors out) and may
export ``MISSING: dict[str, str]`` for ops torch cannot provide, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable

from gradcheck.ops.catalog import FAMILIES, package_op

__all__ = ["FAMILIES", "get_op"]


def get_op(name: str) -> Callable | None:
    """The torch implementation of catalog op ``name`` (None if there is none)."""
    return package_op(__name__, name)
