"""Hand-derived references: forward + VJP + JVP per catalog op, NumPy/SciPy only.

One module per catalog family (``gradcheck.ops.catalog.FAMILIES``), each exporting
``OPS: dict[str, NumpyFunction]``; the ``numpy`` backend looks an op up through the catalog
(``get_backend("numpy").op(name)``).  No module here may import an autodiff engine (a test
checks this in a subprocess), nor anything of gradcheck above its bottom layer (the import
contract in pyproject.toml).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import Any

__all__ = ["get_op"]


@cache
def _ops() -> dict[str, Any]:
    """Every family module's ``OPS``, merged (the public modules of this package)."""
    out: dict[str, Any] = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            out.update(importlib.import_module(f"{__name__}.{info.name}").OPS)
    return out


def get_op(name: str) -> Any:
    """The reference rule (a :class:`~gradcheck.NumpyFunction`) of catalog op ``name``, or None
    (the numpy backend's ``op(name)`` finds the same rule through the catalog)."""
    return _ops().get(name)
