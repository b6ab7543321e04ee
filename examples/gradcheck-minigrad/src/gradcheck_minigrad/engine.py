"""A deliberately small reverse-mode engine: ``Var`` records a tape, ``backward`` replays it.

It stands in for "your engine": the adapter in :mod:`.adapter` is what a gradcheck user writes.
Gradients accumulate into ``Var.grad`` on repeated ``backward`` calls, like PyTorch's ``.grad``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class Var:
    """An array value on the tape: ``parents`` are (Var, pullback) pairs."""

    def __init__(self, value, parents: tuple[tuple[Var, Callable], ...] = ()) -> None:
        self.value = np.asarray(value)
        self.parents = parents
        self.grad: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape


def _unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for k, n in enumerate(shape):
        if n == 1 and g.shape[k] != 1:
            g = g.sum(axis=k, keepdims=True)
    return g


def sin(x: Var) -> Var:
    return Var(np.sin(x.value), ((x, lambda g: g * np.cos(x.value)),))


def tanh(x: Var) -> Var:
    y = np.tanh(x.value)
    return Var(y, ((x, lambda g: g * (1 - y * y)),))


def exp(x: Var) -> Var:
    y = np.exp(x.value)
    return Var(y, ((x, lambda g: g * y),))


def add(a: Var, b: Var) -> Var:
    return Var(a.value + b.value, ((a, lambda g: _unbroadcast(g, a.shape)),
                                   (b, lambda g: _unbroadcast(g, b.shape))))


def mul(a: Var, b: Var) -> Var:
    return Var(a.value * b.value, ((a, lambda g: _unbroadcast(g * b.value, a.shape)),
                                   (b, lambda g: _unbroadcast(g * a.value, b.shape))))


def matmul(a: Var, b: Var) -> Var:
    return Var(a.value @ b.value, ((a, lambda g: g @ b.value.T), (b, lambda g: a.value.T @ g)))


def sum(x: Var) -> Var:  # noqa: A001 - mirrors the op name
    return Var(np.sum(x.value), ((x, lambda g: g * np.ones_like(x.value)),))


def _topological(root: Var) -> list[Var]:
    order: list[Var] = []
    seen: set[int] = set()

    def visit(v: Var) -> None:
        if id(v) in seen:
            return
        seen.add(id(v))
        for p, _ in v.parents:
            visit(p)
        order.append(v)

    visit(root)
    return order


def backward(out: Var, seed: np.ndarray) -> None:
    """Propagate ``seed`` (d loss / d out) back; leaves' ``.grad`` accumulate (+=)."""
    cot: dict[int, np.ndarray] = {id(out): np.asarray(seed, dtype=out.value.dtype)}
    for v in reversed(_topological(out)):
        g = cot.pop(id(v), None)
        if g is None:
            continue
        if not v.parents:
            v.grad = g.copy() if v.grad is None else v.grad + g
        for p, pullback in v.parents:
            contrib = np.asarray(pullback(g), dtype=p.value.dtype)
            cot[id(p)] = cot[id(p)] + contrib if id(p) in cot else contrib
