"""The jax inventory: the public functions of ``jax.numpy``, ``jax.numpy.linalg``,
``jax.scipy.special``, ``jax.nn`` and ``jax.lax``, probed with float arrays.

Each public callable (classes, modules and private names excluded; an alias of a function
already listed under another name is listed once, under the first name) is called with the
shapes of :data:`PROBES` in turn: one vector, two vectors, a square matrix, a matrix and a
vector, three vectors.  The first call that returns only floating arrays and whose reverse-mode
gradient JAX computes becomes the template; every other name is a :class:`LeftOut` with what
the probes met (a TypeError from the signature, an integer output, no gradient).
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .inventory import Inventory, LeftOut, Op, family_of, matches

NAMESPACES = ("jax.numpy", "jax.numpy.linalg", "jax.scipy.special", "jax.nn", "jax.lax")
_DTYPES = ("float64", "float32", "float16", "bfloat16")
# the probe values: inside (0, 1) so that log, sqrt, arcsin, atanh, logit, betainc ... accept
# them; distinct so that sort / max / unique are not at ties; an SPD matrix for linalg
_VECTOR = np.array([0.31, 0.47, 0.62, 0.83])
_SQUARE = np.array([[2.0, 0.3, 0.1], [0.3, 1.5, 0.2], [0.1, 0.2, 1.2]])
PROBES: tuple[tuple[np.ndarray, ...], ...] = (
    (_VECTOR,),
    (_VECTOR, _VECTOR[::-1] * 0.9),
    (_SQUARE,),
    (_SQUARE, _VECTOR[:3]),
    (_VECTOR, _VECTOR[::-1] * 0.9, _VECTOR * 0.5 + 0.2),
)
#: names that are not ops on arrays (constructors, dtype helpers, config, transforms)
_NOT_OPS = frozenset({
    "array", "asarray", "zeros", "ones", "empty", "full", "eye", "identity", "arange",
    "linspace", "logspace", "geomspace", "zeros_like", "ones_like", "empty_like", "full_like",
    "tri", "indices", "mgrid", "ogrid", "meshgrid", "printoptions", "set_printoptions",
    "get_printoptions", "load", "save", "savez", "fromfile", "frombuffer", "fromstring",
    "fromfunction", "fromiter", "from_dlpack", "vectorize", "frompyfunc", "piecewise",
    "result_type", "promote_types", "can_cast", "iinfo", "finfo", "dtype", "issubdtype",
    "isdtype", "broadcast_shapes", "ndim", "shape", "size", "iterable", "isscalar",
    "array_equal", "array_equiv", "allclose", "isclose", "copyto", "put", "place", "fill_diagonal",
    "one_hot", "initializers", "stop_gradient", "custom_jvp", "custom_vjp", "eval_shape",
})


def inventory(names: Sequence[str] | None = None) -> Inventory:
    import jax

    ops: list[Op] = []
    left: list[LeftOut] = []
    seen: dict[int, str] = {}
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for space in NAMESPACES:
            module = importlib.import_module(space)
            for attr in sorted(dir(module)):
                name = f"{space}.{attr}"
                if names and not matches(name, names):
                    continue
                obj = getattr(module, attr, None)
                reason = _not_an_op(attr, obj)
                if reason is None and id(obj) in seen:
                    reason = f"an alias of {seen[id(obj)]}"
                if reason is not None:
                    if not reason.startswith("-"):
                        left.append(LeftOut(name, "jax", reason))
                    continue
                seen[id(obj)] = name
                built = _probe(name, attr, obj)
                (ops if isinstance(built, Op) else left).append(
                    built if isinstance(built, Op) else LeftOut(name, "jax", built))
    return Inventory("jax", tuple(ops), tuple(left))


def _not_an_op(attr: str, obj: Any) -> str | None:
    """Why ``obj`` is not an op (a leading ``-`` for names not worth listing: private names,
    modules, constants)."""
    if attr.startswith("_") or obj is None or inspect.ismodule(obj):
        return "-"
    if isinstance(obj, (int, float, complex, str, bool, np.generic)):
        return "-"
    if inspect.isclass(obj) or not callable(obj) or attr[:1].isupper():
        return "-"
    if attr in _NOT_OPS or attr.endswith(("_p", "dtype")):
        return "not an op on arrays (a constructor, a dtype or config helper, a transform)"
    return None


def _floating(out: Any) -> list[Any] | None:
    import jax
    import jax.numpy as jnp

    leaves = jax.tree_util.tree_leaves(out)
    if not leaves:
        return None
    if not all(hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating) for x in leaves):
        return None
    return leaves


def _probe(name: str, attr: str, fn: Callable[..., Any]) -> Op | str:
    import jax
    import jax.numpy as jnp

    met: list[str] = []
    for arrays in PROBES:
        args = [jnp.asarray(a) for a in arrays]
        try:
            out = fn(*args)
        except Exception as exc:
            met.append(f"{len(arrays)} input(s): {type(exc).__name__}")
            continue
        leaves = _floating(out)
        if leaves is None:
            met.append(f"{len(arrays)} input(s): a non-floating or empty output")
            continue
        try:
            def loss(*xs: Any, f: Any = fn) -> Any:
                return sum(jnp.sum(x) for x in jax.tree_util.tree_leaves(f(*xs)))

            grads = jax.grad(loss, argnums=tuple(range(len(args))))(*args)
        except Exception as exc:
            met.append(f"{len(arrays)} input(s): no gradient ({type(exc).__name__})")
            continue
        if not all(np.all(np.isfinite(np.asarray(g))) for g in grads):
            met.append(f"{len(arrays)} input(s): a non-finite gradient at the probe")
            continue
        template = tuple(np.array(a, dtype=np.float64) for a in arrays)
        return Op(name, "jax", fn, template, _DTYPES, fwd=True, order2=True,
                  family=family_of(name, template, [tuple(x.shape) for x in leaves]),
                  leaf=attr)
    return "no probe call is differentiable: " + "; ".join(met)
