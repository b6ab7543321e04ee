"""The ``linalg`` catalog family written for PyTorch (same gauges as
:mod:`gradcheck.ops.linalg`)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def _sym(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (x + x.mT)


def _signs(row: torch.Tensor) -> torch.Tensor:
    """Signs making ``row`` positive, as constants (locally constant gauge)."""
    return torch.where(row < 0, -1.0, 1.0).to(row.dtype).detach()


def _qr(a):
    q, r = torch.linalg.qr(a)
    d = _signs(torch.diagonal(r))
    return q * d, r * d[:, None]


def _eigh(x):
    w, v = torch.linalg.eigh(_sym(x))
    return w, v * _signs(v[0])


def _svd(a):
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    d = _signs(u[0])
    return u * d, s, vh * d[:, None]


def _slogdet(a):
    sign, logabs = torch.linalg.slogdet(a)
    return sign, logabs


OPS: dict[str, Callable] = {
    "matmul": torch.matmul,
    "matmul_broadcast": torch.matmul,
    "einsum_bij_bjk": lambda a, b: torch.einsum("bij,bjk->bik", a, b),
    "einsum_ij_ji": lambda a, b: torch.einsum("ij,ji->", a, b),
    "einsum_i_ij_j": lambda x, a, y: torch.einsum("i,ij,j->", x, a, y),
    "solve": torch.linalg.solve,
    "solve_triangular_lower": lambda low, b: torch.linalg.solve_triangular(low, b, upper=False),
    "inv": torch.linalg.inv,
    "det": torch.linalg.det,
    "slogdet": _slogdet,
    "cholesky": lambda x: torch.linalg.cholesky(_sym(x)),
    "cholesky_lower": torch.linalg.cholesky,
    "qr": _qr,
    "eigh": _eigh,
    "eigvalsh": lambda x: torch.linalg.eigvalsh(_sym(x)),
    "svd": _svd,
    "svdvals": torch.linalg.svdvals,
    "trace": torch.trace,
    "norm_fro": lambda a: torch.linalg.matrix_norm(a, "fro"),
    "norm_nuc": lambda a: torch.linalg.matrix_norm(a, "nuc"),
    "norm_2": lambda a: torch.linalg.matrix_norm(a, 2),
    "matrix_exp": torch.linalg.matrix_exp,
}
