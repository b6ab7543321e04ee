"""The records of an inventory: :class:`Op`, :class:`LeftOut`, :class:`Inventory`, and the
structural families that choose the edge points."""


from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: structural families: they choose which edge points are generated
ELEMENTWISE, REDUCTION, LINALG, OTHER = "elementwise", "reduction", "linalg", "other"


@dataclass(frozen=True)
class Op:
    """One differentiable op of a backend, ready to check.

    ``fn(*arrays)`` computes the op on the backend's arrays (kwargs already bound);
    ``template`` holds float64 arrays of one valid call; ``family`` is one of
    :data:`ELEMENTWISE`, :data:`REDUCTION`, :data:`LINALG`, :data:`OTHER`.
    """

    name: str
    backend: str
    fn: Callable[..., Any] = field(compare=False, repr=False)
    template: tuple[np.ndarray, ...] = field(compare=False, repr=False)
    dtypes: tuple[str, ...] = ("float64", "float32")
    fwd: bool = True
    order2: bool = True
    family: str = OTHER
    #: the op's name in other libraries' terms (``erfcx``) for the triage's references
    leaf: str = ""
    #: kwargs bound into ``fn`` written out for the reproducer (``dim=1``)
    call: str = ""
    #: the gradient tests the backend's own suite skips or xfails for this op (OpInfo)
    upstream_skips: tuple[str, ...] = ()


@dataclass(frozen=True)
class LeftOut:
    """A name a namespace exposes that the sweep does not check, and why."""

    name: str
    backend: str
    reason: str


@dataclass(frozen=True)
class Inventory:
    """Everything one backend exposes: the ops checked and the names left out."""

    backend: str
    ops: tuple[Op, ...]
    left_out: tuple[LeftOut, ...] = ()

    def select(self, patterns: Sequence[str] | None) -> Inventory:
        """Only the ops (and left-out names) matching one of the globs (all for none)."""
        if not patterns:
            return self
        return Inventory(self.backend, tuple(o for o in self.ops if matches(o.name, patterns)),
                         tuple(x for x in self.left_out if matches(x.name, patterns)))


def matches(name: str, patterns: Sequence[str]) -> bool:
    """``name`` matches a glob of ``patterns`` exactly, or a pattern without glob characters
    is a substring of it."""
    for p in patterns:
        if any(c in p for c in "*?["):
            if fnmatch.fnmatchcase(name, p):
                return True
        elif p == name or p in name:
            return True
    return False


def family_of(name: str, template: Sequence[np.ndarray], out_shapes: Sequence[tuple[int, ...]]
              ) -> str:
    """The structural family from the name and the shapes of one call."""
    leaf = name.rsplit(".", 1)[-1]
    if ".linalg." in name or leaf in _LINALG_LEAVES:
        return LINALG
    in_shapes = [a.shape for a in template]
    if out_shapes and all(s == in_shapes[0] for s in out_shapes) and all(
            s == in_shapes[0] for s in in_shapes):
        return ELEMENTWISE
    if out_shapes and all(int(np.prod(s)) < int(np.prod(in_shapes[0])) for s in out_shapes):
        return REDUCTION
    return OTHER


_LINALG_LEAVES = frozenset({
    "det", "slogdet", "logdet", "inverse", "inv", "pinv", "cholesky", "cholesky_inverse",
    "cholesky_solve", "svd", "svdvals", "eig", "eigh", "eigvals", "eigvalsh", "qr", "lu",
    "lu_solve", "lu_factor", "solve", "lstsq", "matrix_power", "matrix_exp", "expm", "norm",
    "matrix_norm", "cond", "matrix_rank", "triangular_solve", "solve_triangular", "pinverse",
    "householder_product", "cross", "tensorinv", "tensorsolve", "multi_dot", "ldl_factor",
    "polar", "sqrtm", "logm", "schur", "hessenberg", "trace",
})
