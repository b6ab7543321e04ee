"""Inventories of the other installed engines, read from their namespaces and probed through
gradcheck's own adapter (:func:`._namespaces.adapter_tried`):

* ``autograd``: ``autograd.numpy`` and ``autograd.scipy.special`` (HIPS autograd);
* ``mlx``: ``mlx.core``;
* ``tinygrad``: the methods of ``tinygrad.Tensor`` (``tinygrad.Tensor.relu``), called as
  ``x.method(*others)``.

Dtypes, forward mode and order 2 are what the adapter declares.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from gradcheck.sweep.inventory import namespaces
from gradcheck.sweep.inventory.records import Inventory, LeftOut, Op

ENGINES = {
    "autograd": ("autograd.numpy", "autograd.scipy.special"),
    "mlx": ("mlx.core",),
    "tinygrad": ("tinygrad.Tensor",),
}


class _Method:
    """``x.name(*others)`` on the engine's tensor: a tensor method as a function."""

    def __init__(self, name: str) -> None:
        self.method = name
        self.__name__ = name

    def __call__(self, x: Any, *others: Any) -> Any:
        return getattr(x, self.method)(*others)


def _spaces(backend: str) -> list[tuple[str, Any]]:
    out = []
    for path in ENGINES[backend]:
        module, _, cls = path.rpartition(".") if path == "tinygrad.Tensor" else (path, "", "")
        obj = importlib.import_module(module)
        out.append((path, getattr(obj, cls) if cls else obj))
    return out


def inventory(backend: str, names: Sequence[str] | None = None) -> Inventory:
    if backend not in ENGINES:
        raise ValueError(f"the sweep has no inventory for backend {backend!r}; it reads "
                         f"torch, jax, {', '.join(ENGINES)}")
    from gradcheck.backends.registry import get_backend

    be = get_backend(backend)
    tried = namespaces.adapter_tried(backend)
    dtypes = tuple(be.dtypes)
    ops: list[Op] = []
    left: list[LeftOut] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, attr, obj in namespaces.walk(_spaces(backend), names, backend, left):
            fn: Callable[..., Any] = _Method(attr) if backend == "tinygrad" else obj
            built = namespaces.probe(name, attr, fn, backend, tried, dtypes,
                                      bool(be.supports_jvp), bool(be.supports_order2))
            if isinstance(built, Op):
                ops.append(built)
            else:
                left.append(LeftOut(name, backend, built))
    return Inventory(backend, tuple(ops), tuple(left))
