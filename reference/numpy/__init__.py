"""Hand-derived references: forward + VJP + JVP per catalog op, NumPy/SciPy only.

One module per catalog family (``FAMILIES``), each exporting ``OPS: dict[str, NumpyFunction]``.
No module here may import an autodiff engine (a test checks this in a subprocess).
"""

from __future__ import annotations

from gradcheck.backends.numpy_backend import NumpyFunction
from gradcheck.ops.catalog import FAMILIES, package_op

__all__ = ["FAMILIES", "get_op"]


def get_op(name: str) -> NumpyFunction | None:
    """The reference for catalog op ``name`` (None if there is none)."""
    return package_op(__name__, name)
