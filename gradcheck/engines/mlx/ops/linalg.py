"""The ``linalg`` catalog family written for MLX.  MLX 0.32's factorizations run on the CPU
stream but have no VJP (``Primitive::vjp not implemented`` for LUF, Inverse, Cholesky, QRF,
SVD, Eigh), so the ops built on them are skipped with that reason."""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx

OPS: dict[str, Callable] = {
    "matmul": mx.matmul,
    "matmul_broadcast": mx.matmul,
    "einsum_bij_bjk": lambda a, b: mx.einsum("bij,bjk->bik", a, b),
    "einsum_ij_ji": lambda a, b: mx.einsum("ij,ji->", a, b),
    "einsum_i_ij_j": lambda x, a, y: mx.einsum("i,ij,j->", x, a, y),
    "trace": mx.trace,
    "norm_fro": lambda a: mx.linalg.norm(a, "fro"),
}

_NO_VJP = "MLX 0.32: mx.linalg.{} has no VJP ([Primitive::vjp] Not implemented for {})"
MISSING = {
    "solve": _NO_VJP.format("solve", "LUF"),
    "solve_triangular_lower": _NO_VJP.format("solve_triangular", "Inverse"),
    "inv": _NO_VJP.format("inv", "Inverse"),
    "det": _NO_VJP.format("det", "LUF"),
    "slogdet": _NO_VJP.format("slogdet", "LUF"),
    "cholesky": _NO_VJP.format("cholesky", "Cholesky"),
    "cholesky_lower": _NO_VJP.format("cholesky", "Cholesky"),
    "qr": _NO_VJP.format("qr", "QRF"),
    "eigh": _NO_VJP.format("eigh", "Eigh"),
    "eigvalsh": _NO_VJP.format("eigvalsh", "Eigh"),
    "svd": _NO_VJP.format("svd", "SVD"),
    "svdvals": _NO_VJP.format("svd", "SVD"),
    "norm_nuc": _NO_VJP.format("norm(ord='nuc')", "SVD"),
    "norm_2": _NO_VJP.format("norm(ord=2)", "SVD"),
    "matrix_exp": "MLX 0.32 has no matrix exponential",
}
