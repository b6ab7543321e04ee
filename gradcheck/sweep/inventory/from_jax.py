"""The jax inventory: the public functions of ``jax.numpy``, ``jax.numpy.linalg``,
``jax.scipy.special``, ``jax.nn`` and ``jax.lax``, probed with float arrays
(:mod:`._namespaces`): the first probe call that returns only floating arrays and whose
reverse-mode gradient JAX computes (finite) becomes the template; every other name is a
:class:`~.inventory.LeftOut` with what the probes met (a TypeError from the signature, an
integer output, no gradient).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gradcheck.sweep.inventory import namespaces
from gradcheck.sweep.inventory.records import Inventory, LeftOut, Op

NAMESPACES = ("jax.numpy", "jax.numpy.linalg", "jax.scipy.special", "jax.nn", "jax.lax")
_DTYPES = ("float64", "float32", "float16", "bfloat16")


def _tried(fn: Callable[..., Any], arrays: tuple[np.ndarray, ...]) -> list[tuple[int, ...]] | str:
    """JAX directly (eager calls, ``jax.grad``): cheaper than the adapter's jitted transforms
    for a first probe of several hundred names."""
    import jax
    import jax.numpy as jnp

    args = [jnp.asarray(a) for a in arrays]
    try:
        out = fn(*args)
    except Exception as exc:
        return type(exc).__name__
    leaves = jax.tree_util.tree_leaves(out)
    if not leaves or not all(hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating)
                             for x in leaves):
        return "a non-floating or empty output"

    def loss(*xs: Any) -> Any:
        return sum(jnp.sum(x) for x in jax.tree_util.tree_leaves(fn(*xs)))

    try:
        grads = jax.grad(loss, argnums=tuple(range(len(args))))(*args)
    except Exception as exc:
        return f"no gradient ({type(exc).__name__})"
    if not all(np.all(np.isfinite(np.asarray(g))) for g in grads):
        return "a non-finite gradient at the probe"
    return [tuple(x.shape) for x in leaves]


def inventory(names: Sequence[str] | None = None) -> Inventory:
    import jax

    ops: list[Op] = []
    left: list[LeftOut] = []
    spaces = [(space, importlib.import_module(space)) for space in NAMESPACES]
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, attr, fn in namespaces.walk(spaces, names, "jax", left):
            built = namespaces.probe(name, attr, fn, "jax", _tried, _DTYPES, True, True)
            if isinstance(built, Op):
                ops.append(built)
            else:
                left.append(LeftOut(name, "jax", built))
    return Inventory("jax", tuple(ops), tuple(left))
