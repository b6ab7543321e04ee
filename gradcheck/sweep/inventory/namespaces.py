"""Inventories read from namespaces: walk a module's public callables (aliases listed once) and
probe each with float arrays of the shapes of :data:`PROBES` until one call is differentiable.

Used by :mod:`._jax` (jax.numpy, jax.scipy.special, jax.nn, jax.lax) and :mod:`._others`
(autograd.numpy, mlx.core, tinygrad's Tensor methods); each supplies the call that evaluates
the function and its reverse-mode gradient at the probe.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from gradcheck.sweep.inventory.records import LeftOut, Op, family_of, matches

# inside (0, 1) so that log, sqrt, arcsin, atanh, logit, betainc ... accept them; distinct so
# that sort / max / unique are not at ties; an SPD matrix for linalg
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
NOT_OPS = frozenset({
    "array", "asarray", "zeros", "ones", "empty", "full", "eye", "identity", "arange",
    "linspace", "logspace", "geomspace", "zeros_like", "ones_like", "empty_like", "full_like",
    "tri", "indices", "mgrid", "ogrid", "meshgrid", "printoptions", "set_printoptions",
    "get_printoptions", "load", "save", "savez", "fromfile", "frombuffer", "fromstring",
    "fromfunction", "fromiter", "from_dlpack", "vectorize", "frompyfunc", "piecewise",
    "result_type", "promote_types", "can_cast", "iinfo", "finfo", "dtype", "issubdtype",
    "isdtype", "broadcast_shapes", "ndim", "shape", "size", "iterable", "isscalar",
    "array_equal", "array_equiv", "allclose", "isclose", "copyto", "put", "place", "fill_diagonal",
    "one_hot", "initializers", "stop_gradient", "custom_jvp", "custom_vjp", "eval_shape",
    "backward", "gradient", "realize", "numpy", "tolist", "item", "data", "assign", "detach",
    "contiguous", "clone", "to", "cast", "requires_grad_", "replace", "schedule",
})

#: (output shapes) for a differentiable call, or the reason it is not
Tried = Callable[[Callable[..., Any], tuple[np.ndarray, ...]], list[tuple[int, ...]] | str]


def not_an_op(attr: str, obj: Any) -> str | None:
    """Why ``obj`` is not an op; a leading ``-`` for names not worth listing (private names,
    modules, classes, constants)."""
    if attr.startswith("_") or obj is None or inspect.ismodule(obj):
        return "-"
    if isinstance(obj, (int, float, complex, str, bool, np.generic)):
        return "-"
    if inspect.isclass(obj) or not callable(obj) or attr[:1].isupper():
        return "-"
    if attr in NOT_OPS or attr.endswith(("_p", "dtype")):
        return "not an op on arrays (a constructor, a dtype or config helper, a transform)"
    return None


def walk(spaces: Sequence[tuple[str, Any]], names: Sequence[str] | None, backend: str,
         left: list[LeftOut]) -> Iterator[tuple[str, str, Any]]:
    """``(qualified name, attribute, callable)`` of each public callable of ``spaces`` (pairs
    of a qualified prefix and the object whose attributes are read); what is not an op, or an
    alias of one already listed, goes to ``left``."""
    seen: dict[int, str] = {}
    for prefix, space in spaces:
        for attr in sorted(dir(space)):
            name = f"{prefix}.{attr}"
            if names and not matches(name, names):
                continue
            obj = getattr(space, attr, None)
            reason = not_an_op(attr, obj)
            if reason is None and id(obj) in seen:
                reason = f"an alias of {seen[id(obj)]}"
            if reason is not None:
                if not reason.startswith("-"):
                    left.append(LeftOut(name, backend, reason))
                continue
            seen[id(obj)] = name
            yield name, attr, obj


def probe(name: str, attr: str, fn: Callable[..., Any], backend: str, tried: Tried,
          dtypes: tuple[str, ...], fwd: bool, order2: bool) -> Op | str:
    """The op built from the first differentiable probe call, or what every probe met."""
    met = []
    for arrays in PROBES:
        outcome = tried(fn, arrays)
        if isinstance(outcome, str):
            met.append(f"{len(arrays)} input(s): {outcome}")
            continue
        template = tuple(np.array(a, dtype=np.float64) for a in arrays)
        return Op(name, backend, fn, template, dtypes, fwd=fwd, order2=order2,
                  family=family_of(name, template, outcome), leaf=attr)
    return "no probe call is differentiable: " + "; ".join(met)


def adapter_tried(backend: str) -> Tried:
    """A :data:`Tried` through gradcheck's adapter for ``backend``: its ``evaluate`` and
    ``vjp`` (so any engine with an adapter can be probed the same way)."""
    from gradcheck.backends.registry import get_backend

    be = get_backend(backend)

    def tried(fn: Callable[..., Any], arrays: tuple[np.ndarray, ...]
              ) -> list[tuple[int, ...]] | str:
        args = [np.array(a) for a in arrays]
        try:
            outs = be.evaluate(fn, args, "cpu")
        except Exception as exc:
            return type(exc).__name__
        if not outs or not all(np.issubdtype(np.asarray(o).dtype, np.floating) for o in outs):
            return "a non-floating or empty output"
        try:
            cts = [np.ones(np.shape(o)) for o in outs]
            grads = be.vjp(fn, args, list(range(len(args))), cts, "cpu")
        except Exception as exc:
            return f"no gradient ({type(exc).__name__})"
        if not all(np.all(np.isfinite(np.asarray(g, dtype=np.float64))) for g in grads):
            return "a non-finite gradient at the probe"
        return [tuple(np.shape(o)) for o in outs]

    return tried
