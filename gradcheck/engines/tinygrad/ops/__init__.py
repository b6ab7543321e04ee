"""The catalog ops written for tinygrad (``tinygrad.Tensor`` methods), one module per catalog
family.

Each family module exports ``OPS`` (tensors in, tensors out) and ``MISSING``: ops tinygrad 0.14
has no function for, with the reason.  Ops are the engine's own ``Tensor`` methods; nothing is
composed here that tinygrad does not compose itself, except where a module says so.
"""

from __future__ import annotations

from collections.abc import Callable

from gradcheck.ops.catalog import FAMILIES, package_op

__all__ = ["FAMILIES", "get_op"]


def get_op(name: str) -> Callable | None:
    """The tinygrad implementation of catalog op ``name`` (None if there is none)."""
    return package_op(__name__, name)
