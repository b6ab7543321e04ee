"""A user's function of nested and complex inputs seen as a function of real arrays.

:func:`flatten_inputs` flattens each input with the engine's own pytree utility
(:meth:`Backend.tree_flatten`) and names every leaf by its path (``params['w']``); a complex
leaf becomes two real leaves (``z.real``, ``z.imag``).  :class:`FlatCall` is the function the
numeric pipeline checks: it takes those real leaves, rebuilds the user's structure (``x + 1j *
y`` for a complex leaf), calls the function, and returns its output's leaves flattened the same
way, a complex output leaf as its ``.real`` and ``.imag``.  The oracle differentiates that
real function; the engine differentiates it through its own complex rules, so a complex rule
that breaks the engine's convention (a ``backward`` missing a ``conj``) shows as a wrong real
derivative, named by the part it spoils (``docs/complex.md``).
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.backends._cache import FunctionCache
from gradcheck.backends.base import Backend
from gradcheck.core import pytree
from gradcheck.core.dtypes import is_complex
from gradcheck.core.errors import InvalidArgument

ARRAY, COMPLEX, STATIC = "array", "complex", "static"
_FLAT = re.compile(r"\[\d+\]")


def is_complex_value(value: Any) -> bool:
    """Whether an engine's array (or a NumPy one, or a Python number) is complex, without
    importing the engine: torch's dtypes say ``is_complex``, JAX's are NumPy dtypes."""
    if isinstance(value, complex):
        return True
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return False
    flag = getattr(dtype, "is_complex", None)
    if isinstance(flag, bool):
        return flag
    try:
        return is_complex(np.dtype(dtype))
    except TypeError:
        return False


@dataclass(frozen=True)
class _Input:
    """One positional input: how to rebuild it from its leaves, and each leaf's kind (an
    array passed to the engine, a complex array passed as two real ones, or a constant kept
    as it was: a string, ``None``, a Python number)."""

    rebuild: pytree.Rebuild
    kinds: tuple[str, ...]
    constants: tuple[Any, ...]  # the value of each STATIC leaf, None for the others


class FlatCall:
    """``fn`` as a function of real arrays: see the module docstring.  ``output_paths`` names
    each output leaf once the function has been called (None where the output is one array or
    a flat tuple of arrays without a complex one: outputs are then named by position);
    ``complex_parts`` says whether a complex input or output was split."""

    def __init__(self, fn: Callable, backend: Backend, inputs: Sequence[_Input] | None,
                 complex_inputs: bool) -> None:
        self.fn, self.backend, self.inputs = fn, backend, None if inputs is None else tuple(
            inputs)
        self.complex_parts = complex_inputs
        self.output_paths: tuple[str, ...] | None = None
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, *args: Any) -> tuple[Any, ...]:
        if self.inputs is None:
            out = self.fn(*args)
        else:
            it = iter(args)
            rebuilt = []
            for spec in self.inputs:
                leaves = []
                for kind, constant in zip(spec.kinds, spec.constants, strict=True):
                    if kind == COMPLEX:
                        re_part, im_part = next(it), next(it)
                        leaves.append(re_part + 1j * im_part)
                    else:
                        leaves.append(constant if kind == STATIC else next(it))
                rebuilt.append(spec.rebuild(leaves))
            out = self.fn(*rebuilt)
        return self._flat_output(out)

    def _flat_output(self, out: Any) -> tuple[Any, ...]:
        pairs = self.backend.tree_flatten(out)[0]
        leaves: list[Any] = []
        paths: list[str] = []
        split = False
        for path, leaf in pairs:
            if is_complex_value(leaf) and not isinstance(leaf, complex):
                split = True
                leaves += [leaf.real, leaf.imag]
                paths += [f"{path}.real", f"{path}.imag"]
            else:
                leaves.append(leaf)
                paths.append(path)
        self.complex_parts = self.complex_parts or split
        flat = all(p == "" for p in paths) or (
            isinstance(out, (list, tuple)) and not hasattr(type(out), "_fields")
            and all(_FLAT.fullmatch(p) for p in paths))
        self.output_paths = None if flat and not split else tuple(paths)
        return tuple(leaves)


@dataclass(frozen=True)
class FlatInputs:
    """The inputs of a check as real arrays: ``arrays`` (what the pipeline checks), ``paths``
    (each one's name: ``params['w']``, ``z.real``) and ``call`` (the function of them)."""

    arrays: tuple[np.ndarray, ...]
    paths: tuple[str, ...]
    call: FlatCall


def input_names(fn: Callable, count: int) -> tuple[str, ...]:
    """The name of each positional input: the function's parameter name where its signature
    says it (``params``), else ``inputs[k]``."""
    names = [f"inputs[{k}]" for k in range(count)]
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return tuple(names)
    for k, p in enumerate(params[:count]):
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names[k] = p.name
        else:
            break
    return tuple(names)


def _leaf_array(backend: Backend, value: Any, name: str) -> np.ndarray | None:
    """The leaf as a NumPy array, or None for a constant (anything that is not an array)."""
    native = backend.native_to_numpy(value)
    if native is not None:
        return native
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    if isinstance(value, numbers.Number) or value is None or isinstance(value, (str, bytes)):
        return None  # a Python number is a constant, as a string or a None
    try:
        return np.asarray(value)
    except Exception as exc:
        raise InvalidArgument(f"{name}={type(value).__name__} cannot be converted to an "
                              f"array: {exc}") from exc


def _numbers(value: Any) -> bool:
    """A (nested) list or tuple of Python numbers: one array, as ``np.asarray`` reads it."""
    if isinstance(value, (list, tuple)) and not hasattr(type(value), "_fields"):
        return bool(value) and all(_numbers(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tree(backend: Backend, value: Any) -> tuple[list[tuple[str, Any]], pytree.Rebuild, Any]:
    """The engine's flattening of ``value``, but a list of numbers is one array leaf."""
    if isinstance(value, (list, tuple)) and _numbers(value):
        return [("", np.asarray(value))], lambda leaves: leaves[0], "numbers"
    return backend.tree_flatten(value)


def needs_flattening(backend: Backend, inputs: Sequence[Any]) -> bool:
    """Whether an input is nested (a dict, list, tuple, NamedTuple, dataclass, or a node the
    engine's pytree utility knows; not a list of numbers, which is an array) or complex."""
    for value in inputs:
        if isinstance(value, (list, tuple)) and _numbers(value):
            continue
        pairs = backend.tree_flatten(value)[0]
        if len(pairs) != 1 or pairs[0][0] != "" or pairs[0][1] is not value:
            return True
        native = backend.native_to_numpy(value)
        if is_complex_value(native if native is not None else value):
            return True
    return False


_CALLS = FunctionCache(size=64)


def flatten_inputs(backend: Backend, fn: Callable, inputs: Sequence[Any],
                   names: Sequence[str]) -> FlatInputs:
    """The inputs as real arrays named by path, and the function of them (cached per function
    and input structure: adapters key their compiled transforms on the function object)."""
    arrays: list[np.ndarray] = []
    paths: list[str] = []
    specs: list[_Input] = []
    key: list[Any] = []
    complex_inputs = False
    for value, root in zip(inputs, names, strict=True):
        pairs, rebuild, structure = _tree(backend, value)
        kinds, constants = [], []
        for path, leaf in pairs:
            name = root + path
            a = _leaf_array(backend, leaf, name)
            if a is None:
                kinds.append(STATIC)
                constants.append(leaf)
            elif is_complex(a.dtype):
                complex_inputs = True
                kinds.append(COMPLEX)
                constants.append(None)
                arrays += [np.ascontiguousarray(a.real), np.ascontiguousarray(a.imag)]
                paths += [f"{name}.real", f"{name}.imag"]
            else:
                kinds.append(ARRAY)
                constants.append(None)
                arrays.append(a)
                paths.append(name)
        specs.append(_Input(rebuild, tuple(kinds), tuple(constants)))
        key.append((structure, tuple(kinds), _constant_key(constants)))
    try:
        hash(tuple(key))
        cache_key: Any = ("inputs", tuple(key))
    except TypeError:  # an unhashable constant: a fresh wrapper
        cache_key = None

    def build() -> FlatCall:
        return FlatCall(fn, backend, specs, complex_inputs)

    call = build() if cache_key is None else _CALLS.get(fn, (id(backend), cache_key), build)
    return FlatInputs(tuple(arrays), tuple(paths), call)


def _constant_key(constants: Sequence[Any]) -> tuple[Any, ...]:
    return tuple((type(c).__name__, c) for c in constants)


def realified(fn: Callable, backend: Backend) -> FlatCall:
    """``fn`` (of real arrays) with its complex outputs returned as ``.real`` and ``.imag``."""
    return _CALLS.get(fn, (id(backend), "outputs"), lambda: FlatCall(fn, backend, None, False))


def select(paths: Sequence[str], names: Sequence[str], wrt: Any) -> tuple[int, ...]:
    """The indices of the arrays (named ``paths``) that ``wrt`` chooses: an input's position
    (``0``: the input named ``names[0]``), a path (``"params"``, ``"params['w']"``, ``"z"``:
    the array at that path and every array under it), or a sequence of these."""
    items = list(wrt) if isinstance(wrt, (list, tuple, set, frozenset)) else [wrt]
    if not items:
        raise InvalidArgument("wrt=() selects nothing to differentiate: pass a position, a "
                              "path or a list of them")
    roots = list(names)
    chosen: set[int] = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise InvalidArgument(f"wrt={wrt!r}: each item must be an input position (int) or "
                                  f"a path (str); got {type(item).__name__}")
        if isinstance(item, int):
            if not 0 <= item < len(roots):
                raise InvalidArgument(f"wrt={item!r}: there are {len(roots)} inputs "
                                      f"(positions 0 to {len(roots) - 1})")
            prefix = roots[item]
        else:
            prefix = item.replace('"', "'")
        hit = [k for k, p in enumerate(paths) if p == prefix or (
            p.startswith(prefix) and p[len(prefix)] in "[.")]
        if not hit:
            raise InvalidArgument(f"wrt={item!r} names no input array; the arrays are: "
                                  f"{', '.join(paths)}")
        chosen.update(hit)
    return tuple(sorted(chosen))



def source(value: Any, root: str, paths: Sequence[str]) -> str:
    """A Python expression that rebuilds the input ``value`` (named ``root``) from a list
    ``leaves`` holding the arrays named ``paths``: the reproducer's inputs.  A container that
    gradcheck's own flattener does not know (a node registered only with the engine) raises
    ``ValueError``: the caller says so in the script instead."""
    index = {p: k for k, p in enumerate(paths)}

    def expr(node: Any, path: str) -> str:
        name = root + path
        if name in index:
            return f"leaves[{index[name]}]"
        if f"{name}.real" in index:
            return f"(leaves[{index[name + '.real']}] + 1j * leaves[{index[name + '.imag']}])"
        if node is None or isinstance(node, (str, bytes, bool, int, float, complex)):
            return repr(node)
        if isinstance(node, dict):
            return "{" + ", ".join(f"{k!r}: {expr(v, f'{path}[{k!r}]')}"
                                   for k, v in node.items()) + "}"
        if isinstance(node, tuple) and hasattr(type(node), "_fields"):
            return _constructor(node, [(f, expr(getattr(node, f), f"{path}.{f}"))
                                       for f in node._fields])  # type: ignore[attr-defined]
        if isinstance(node, (list, tuple)):
            items = [expr(v, f"{path}[{k}]") for k, v in enumerate(node)]
            return (f"[{', '.join(items)}]" if isinstance(node, list)
                    else f"({', '.join(items)}{',' if len(items) == 1 else ''})")
        if pytree.is_container(node):
            fields = [f.name for f in dataclasses.fields(node) if f.init]
            return _constructor(node, [(f, expr(getattr(node, f), f"{path}.{f}"))
                                       for f in fields])
        raise ValueError(f"{name}: a {type(node).__name__} cannot be written in a script")

    return expr(value, "")


def _constructor(node: Any, fields: Sequence[tuple[str, str]]) -> str:
    cls = type(node)
    args = ", ".join(f"{f}={e}" for f, e in fields)
    return (f"__import__({cls.__module__!r}, fromlist=['_']).{cls.__qualname__}({args})")
