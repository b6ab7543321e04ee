"""Expression DAGs with shared nodes: the data, a Hypothesis strategy, evaluation on any array
namespace, the FD oracle of their gradient and the rounding magnitude of that gradient.

A :class:`Dag` lists named leaves, then nodes ``(op, args)`` whose ``args`` index earlier values
(leaves first), so a value used by several nodes (or twice by one ``mul``) is *fan-out*: its
gradient is the sum of the contributions.  The loss is ``sum_k w_k * sum(node_k)``.  Every use
of a leaf reads it anew from the model (``read(name)``), as ``p["b"] * p["c"]`` does.

The magnitude of gradient element ``i`` is the *absolute gradient*: reverse accumulation with
every partial derivative replaced by its absolute value, i.e. the sum over paths of
``|product of partials|``, the sum of absolute terms the rounding of reverse mode scales with.
The same pass with signed partials is an exact second oracle (:func:`reference_gradient`): FD
error estimates undercover now and then, so a backend is blamed only when it disagrees with
both oracles (docs/error-model.md, section 3).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.oracle import fd

OPS: dict[str, int] = {"add": 2, "sub": 2, "mul": 2, "sin": 1, "tanh": 1}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*"}


@dataclass(frozen=True)
class Dag:
    """An expression DAG over named leaves (see module doc)."""

    leaves: tuple[str, ...]
    nodes: tuple[tuple[str, tuple[int, ...]], ...]
    weights: tuple[float, ...]

    def _name(self, i: int) -> str:
        return self.leaves[i] if i < len(self.leaves) else f"n{i - len(self.leaves)}"

    def text(self) -> str:
        """Readable form, e.g. ``n0 = a * b; n1 = b * c; n2 = n0 + n1; loss = sum(n2)``."""
        parts = []
        for k, (op, args) in enumerate(self.nodes):
            names = [self._name(i) for i in args]
            rhs = f" {_SYMBOL[op]} ".join(names) if op in _SYMBOL else f"{op}({names[0]})"
            parts.append(f"n{k} = {rhs}")
        terms = [f"{w:g}*sum(n{k})" if w != 1 else f"sum(n{k})"
                 for k, w in enumerate(self.weights) if w != 0]
        return "; ".join(parts) + "; loss = " + (" + ".join(terms) or "0")

    def uses(self) -> dict[str, int]:
        """How many times each value is read, for values read more than once (fan-out)."""
        count: dict[int, int] = {}
        for _, args in self.nodes:
            for i in args:
                count[i] = count.get(i, 0) + 1
        return {self._name(i): c for i, c in sorted(count.items()) if c > 1}


def _apply(op: str, xp: Any, args: list[Any]) -> Any:
    if op == "add":
        return args[0] + args[1]
    if op == "sub":
        return args[0] - args[1]
    if op == "mul":
        return args[0] * args[1]
    return getattr(xp, op)(args[0])


def evaluate(dag: Dag, xp: Any, read: Callable[[str], Any]) -> Any:
    """The loss of ``dag`` on namespace ``xp``; leaves come from ``read`` at every use.  Leaves
    may carry leading batch axes (the last axis is summed)."""
    values: list[Any] = []
    n_leaves = len(dag.leaves)

    def arg(i: int) -> Any:
        return read(dag.leaves[i]) if i < n_leaves else values[i - n_leaves]

    for op, args in dag.nodes:
        values.append(_apply(op, xp, [arg(i) for i in args]))
    total: Any = 0.0
    for w, v in zip(dag.weights, values, strict=True):
        if w != 0:
            total = total + w * xp.sum(v, -1)
    return total


def reference_gradient(dag: Dag, leaves: Mapping[str, np.ndarray]
                       ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Exact reverse accumulation in NumPy float64: the gradient (contributions of every use
    *summed*) and the absolute gradient (the same with every partial replaced by its absolute
    value: the sum over paths of ``|product of partials|``, the rounding magnitude)."""
    n_leaves = len(dag.leaves)
    vals = [np.asarray(leaves[k], np.float64) for k in dag.leaves]
    for op, args in dag.nodes:
        vals.append(_apply(op, np, [vals[i] for i in args]))
    adj = [np.zeros_like(v) for v in vals]
    mag = [np.zeros_like(v) for v in vals]
    for k, w in enumerate(dag.weights):
        adj[n_leaves + k] = adj[n_leaves + k] + w
        mag[n_leaves + k] = mag[n_leaves + k] + abs(w)
    for k in reversed(range(len(dag.nodes))):
        op, args = dag.nodes[k]
        x = [vals[i] for i in args]
        for i, d in zip(args, _partials(op, x), strict=True):
            adj[i] = adj[i] + adj[n_leaves + k] * d
            mag[i] = mag[i] + mag[n_leaves + k] * np.abs(d)
    return ({k: adj[i] for i, k in enumerate(dag.leaves)},
            {k: mag[i] for i, k in enumerate(dag.leaves)})


def _partials(op: str, x: list[np.ndarray]) -> list[np.ndarray]:
    if op == "add":
        return [np.ones_like(x[0]), np.ones_like(x[1])]
    if op == "sub":
        return [np.ones_like(x[0]), -np.ones_like(x[1])]
    if op == "mul":
        return [x[1], x[0]]
    if op == "sin":
        return [np.cos(x[0])]
    return [1.0 - np.tanh(x[0]) ** 2]


def fd_gradient(forward: Callable[[Mapping[str, np.ndarray]], np.ndarray],
                params: Mapping[str, np.ndarray]) -> tuple[dict, dict]:
    """Full gradient of a scalar NumPy ``forward(leaves)`` by the FD oracle, with its error
    estimate; ``forward`` receives leaves with a leading batch axis."""
    names = list(params)
    shapes = [np.shape(params[k]) for k in names]
    sizes = [int(np.prod(s)) for s in shapes]
    x0 = np.concatenate([np.ravel(params[k]).astype(np.float64) for k in names])

    def f_batch(X: np.ndarray) -> np.ndarray:
        leaves, start = {}, 0
        for k, s, n in zip(names, shapes, sizes, strict=True):
            leaves[k] = X[:, start:start + n].reshape((len(X),) + s)
            start += n
        return np.asarray(forward(leaves), dtype=np.float64).reshape(len(X), 1)

    est = fd.directional_derivatives(f_batch, x0, np.eye(x0.size))
    value, error = est.value[:, 0], est.error[:, 0]
    out_v, out_e, start = {}, {}, 0
    for k, s, n in zip(names, shapes, sizes, strict=True):
        out_v[k] = value[start:start + n].reshape(s)
        out_e[k] = error[start:start + n].reshape(s)
        start += n
    return out_v, out_e


def strategy(leaves: tuple[str, ...] = ("a", "b", "c"), max_nodes: int = 7) -> Any:
    """Hypothesis strategy of DAGs over ``leaves`` with 2..``max_nodes`` nodes."""
    from hypothesis import strategies as st

    ops = sorted(OPS)

    @st.composite
    def build(draw: Any) -> Dag:
        n = draw(st.integers(2, max_nodes))
        nodes = []
        for i in range(n):
            op = draw(st.sampled_from(ops))
            avail = len(leaves) + i
            nodes.append((op, tuple(draw(st.integers(0, avail - 1)) for _ in range(OPS[op]))))
        weights = tuple(draw(st.sampled_from((1.0, -1.0, 0.5, 2.0))) for _ in range(n))
        return Dag(tuple(leaves), tuple(nodes), weights)

    return build()
