"""The ``linalg`` catalog family written for tinygrad: products and einsum only (tinygrad 0.14
has ``qr`` and ``svd`` forwards but no solve, inverse, determinant, Cholesky or eigensolver, and
the catalog's factorization ops need gauge-fixed outputs that are checked elsewhere)."""

from __future__ import annotations

from collections.abc import Callable

from tinygrad import Tensor

OPS: dict[str, Callable] = {
    "matmul": Tensor.matmul,
    "matmul_broadcast": Tensor.matmul,
    "einsum_bij_bjk": lambda a, b: Tensor.einsum("bij,bjk->bik", a, b),
    "einsum_ij_ji": lambda a, b: Tensor.einsum("ij,ji->", a, b),
    "einsum_i_ij_j": lambda x, a, y: Tensor.einsum("i,ij,j->", x, a, y),
    "trace": lambda a: a.diagonal().sum(),
    "norm_fro": lambda a: a.square().sum().sqrt(),
}

_NONE = "tinygrad 0.14 has no {}"
MISSING = {
    "solve": _NONE.format("linear solver"),
    "solve_triangular_lower": _NONE.format("triangular solver"),
    "inv": _NONE.format("matrix inverse"),
    "det": _NONE.format("determinant"),
    "slogdet": _NONE.format("determinant"),
    "cholesky": _NONE.format("Cholesky factorization"),
    "cholesky_lower": _NONE.format("Cholesky factorization"),
    "qr": "tinygrad 0.14's Tensor.qr is not mapped (Householder loop; gradient not checked here)",
    "eigh": _NONE.format("symmetric eigensolver"),
    "eigvalsh": _NONE.format("symmetric eigensolver"),
    "svd": "tinygrad 0.14's Tensor.svd is not mapped (iterative; gradient not checked here)",
    "svdvals": "tinygrad 0.14's Tensor.svd is not mapped (iterative; gradient not checked here)",
    "norm_nuc": _NONE.format("nuclear norm"),
    "norm_2": _NONE.format("spectral norm"),
    "matrix_exp": _NONE.format("matrix exponential"),
}
