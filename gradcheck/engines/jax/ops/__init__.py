"""The catalog ops written with ``jax.numpy`` / ``jax.lax``: an independent AD engine.

One module per catalog family (``FAMILIES``), each exporting ``OPS: dict[str, Callable]``; each
op takes and returns JAX arrays.  Importing a family module imports jax (with x64 enabled by
the jax backend adapter first).
"""

from __future__ import annotations

from collections.abc import Callable

from gradcheck.ops.catalog import FAMILIES, package_op

__all__ = ["FAMILIES", "get_op"]


def get_op(name: str) -> Callable | None:
    """The JAX implementation of catalog op ``name`` (None if there is none)."""
    return package_op(__name__, name)
