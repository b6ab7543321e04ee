"""Nested inputs and outputs (pytrees), flattened without an engine.

The engines that have a pytree utility flatten with it (``torch.utils._pytree``,
``jax.tree_util``: :meth:`gradcheck.backends.base.Backend.tree_flatten`); this is the small one
of our own that every other adapter uses, and the fallback where an engine's utility leaves a
container it does not know (a plain dataclass) as a leaf.  Dicts (in insertion order), lists,
tuples, NamedTuples and dataclass instances nest; ``None`` holds no leaf; anything else is a
leaf.  Paths are written as the engines write them: ``['w']`` for a key, ``[0]`` for a
position, ``.field`` for a NamedTuple's or a dataclass's field, so that ``params['w'][1, 0]``
names an element the way the user would index it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from typing import Any

Rebuild = Callable[[Sequence[Any]], Any]


def is_container(value: Any) -> bool:
    """A node this module flattens (not a leaf): a dict, list, tuple, NamedTuple or dataclass
    instance."""
    return isinstance(value, (dict, list, tuple)) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type))


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _children(node: Any) -> tuple[list[tuple[str, Any]], Callable[[list[Any]], Any], str]:
    """``(path suffix, child)`` pairs, how to rebuild the node from its children, its type."""
    kind = f"{type(node).__module__}.{type(node).__qualname__}"
    if isinstance(node, dict):
        keys = list(node)
        return ([(f"[{k!r}]", node[k]) for k in keys],
                lambda xs: type(node)(zip(keys, xs, strict=True)) if type(node) is not dict
                else dict(zip(keys, xs, strict=True)), f"{kind}{keys!r}")
    if _is_namedtuple(node):
        fields = list(type(node)._fields)
        return ([(f".{f}", getattr(node, f)) for f in fields], lambda xs: type(node)(*xs),
                kind)
    if isinstance(node, (list, tuple)):
        return ([(f"[{k}]", v) for k, v in enumerate(node)],
                lambda xs: type(node)(xs), f"{kind}{len(node)}")
    fields = [f.name for f in dataclasses.fields(node) if f.init]
    return ([(f".{f}", getattr(node, f)) for f in fields],
            lambda xs: dataclasses.replace(node, **dict(zip(fields, xs, strict=True))), kind)


def flatten(value: Any) -> tuple[list[tuple[str, Any]], Rebuild, Hashable]:
    """``value``'s leaves with their paths (depth first), a function that rebuilds the same
    structure from new leaves (as many, in the same order), and a hashable description of the
    structure (equal for two values with the same containers, keys and fields)."""
    pairs: list[tuple[str, Any]] = []

    def walk(node: Any, path: str) -> tuple[Any, ...]:
        if node is None:
            return ("none",)
        if not is_container(node):
            pairs.append((path, node))
            return ("leaf",)
        children, _, kind = _children(node)
        return (kind, tuple(walk(child, path + suffix) for suffix, child in children))

    structure = walk(value, "")

    def rebuild(leaves: Sequence[Any]) -> Any:
        it = iter(leaves)

        def build(node: Any) -> Any:
            if node is None:
                return None
            if not is_container(node):
                return next(it)
            children, make, _ = _children(node)
            return make([build(child) for _, child in children])

        out = build(value)
        if next(it, _END) is not _END:
            raise ValueError("more leaves than the structure holds")
        return out

    return pairs, rebuild, structure


_END = object()
