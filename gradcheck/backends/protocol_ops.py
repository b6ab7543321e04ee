"""What each op name means across engines: the ops named by the process protocol.

An engine that is not Python (``docs/protocol.md``) cannot run a Python ``fn``; the harness
asks it for ops *by name*, so every name needs one precise meaning shared by both sides:
arity, broadcasting and axes.  This table fixes them and gives a NumPy float64 forward for
each, which serves as the oracle's forward for engines without float64 (see
:meth:`gradcheck.backends.base.Backend.oracle_forward`) and as the expected value of the
conformance kit's forward checks.

The names follow the op catalog (``gradcheck/ops``); where the catalog defines the same name
its meaning must be the same (the lead's merge reconciles the two tables).

Conventions: elementwise binary ops broadcast like NumPy; ``sum`` and ``mean`` reduce every
axis to a 0-d array; ``softmax`` and ``logsumexp_axis1`` act on the last axis; ``matmul`` is the
2-D matrix product.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Sampler = Callable[[np.random.Generator], tuple[np.ndarray, ...]]


@dataclass(frozen=True)
class ProtocolOp:
    """One op name: its arity, its float64 NumPy forward and a sampler inside its domain."""

    name: str
    arity: int
    forward: Callable[..., np.ndarray]
    sample: Sampler
    doc: str = ""


def _normal(*shapes: tuple[int, ...]) -> Sampler:
    return lambda rng: tuple(rng.standard_normal(s) for s in shapes)


def _positive(*shapes: tuple[int, ...]) -> Sampler:
    return lambda rng: tuple(rng.uniform(0.5, 2.0, s) for s in shapes)


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return z / np.sum(z, axis=-1, keepdims=True)


def _logsumexp(x: np.ndarray) -> np.ndarray:
    m = np.max(x, axis=-1, keepdims=True)
    return (m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True)))[..., 0]


_OPS = (
    ProtocolOp("sin", 1, np.sin, _normal((3, 4))),
    ProtocolOp("cos", 1, np.cos, _normal((3, 4))),
    ProtocolOp("tanh", 1, np.tanh, _normal((3, 4))),
    ProtocolOp("exp", 1, np.exp, _normal((3, 4))),
    ProtocolOp("log", 1, np.log, _positive((3, 4)), "natural log; domain x > 0"),
    ProtocolOp("sqrt", 1, np.sqrt, _positive((3, 4)), "domain x > 0"),
    ProtocolOp("square", 1, np.square, _normal((3, 4))),
    ProtocolOp("neg", 1, np.negative, _normal((3, 4))),
    ProtocolOp("sigmoid", 1, lambda x: 1.0 / (1.0 + np.exp(-x)), _normal((3, 4))),
    ProtocolOp("add", 2, np.add, _normal((3, 4), (4,)), "broadcasting like NumPy"),
    ProtocolOp("sub", 2, np.subtract, _normal((3, 4), (3, 4)), "broadcasting like NumPy"),
    ProtocolOp("mul", 2, np.multiply, _normal((3, 4), (3, 4)), "broadcasting like NumPy"),
    ProtocolOp("div", 2, np.divide, lambda r: (r.standard_normal((3, 4)),
                                               r.uniform(0.5, 2.0, (3, 4))), "x / y, y != 0"),
    ProtocolOp("matmul", 2, np.matmul, _normal((3, 4), (4, 2)), "2-D matrix product"),
    ProtocolOp("sum", 1, lambda x: np.asarray(np.sum(x)), _normal((3, 4)), "all axes, 0-d result"),
    ProtocolOp("mean", 1, lambda x: np.asarray(np.mean(x)), _normal((3, 4)), "all axes, 0-d"),
    ProtocolOp("softmax", 1, _softmax, _normal((3, 5)), "last axis"),
    ProtocolOp("logsumexp_axis1", 1, _logsumexp, _normal((3, 5)), "last axis, reduced"),
)

PROTOCOL_OPS: dict[str, ProtocolOp] = {op.name: op for op in _OPS}


def protocol_op(name: str) -> ProtocolOp | None:
    """The meaning of op ``name``, or None if the protocol does not define it."""
    return PROTOCOL_OPS.get(name)
