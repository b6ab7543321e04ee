"""The ``linalg`` catalog family written for JAX (same gauges as :mod:`gradcheck.ops.linalg`)."""

from __future__ import annotations

from collections.abc import Callable

import jax.scipy.linalg as jsl

from gradcheck.engines.jax.ops._common import jax, jnp


def _mT(a):
    return jnp.swapaxes(a, -1, -2)


def _sym(x):
    return 0.5 * (x + _mT(x))


def _signs(row):
    """Signs making ``row`` positive, treated as constants (locally constant gauge)."""
    return jax.lax.stop_gradient(jnp.where(row < 0, -1.0, 1.0).astype(row.dtype))


def _slogdet(a):
    sign, logabs = jnp.linalg.slogdet(a)
    return sign, logabs


def _qr(a):
    q, r = jnp.linalg.qr(a)
    d = _signs(jnp.diagonal(r))
    return q * d, r * d[:, None]


def _eigh(x):
    w, v = jnp.linalg.eigh(_sym(x))
    return w, v * _signs(v[0])


def _svd(a):
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    d = _signs(u[0])
    return u * d, s, vh * d[:, None]


OPS: dict[str, Callable] = {
    "matmul": jnp.matmul,
    "matmul_broadcast": jnp.matmul,
    "einsum_bij_bjk": lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
    "einsum_ij_ji": lambda a, b: jnp.einsum("ij,ji->", a, b),
    "einsum_i_ij_j": lambda x, a, y: jnp.einsum("i,ij,j->", x, a, y),
    "solve": jnp.linalg.solve,
    "solve_triangular_lower": lambda low, b: jsl.solve_triangular(low, b, lower=True),
    "inv": jnp.linalg.inv,
    "det": jnp.linalg.det,
    "slogdet": _slogdet,
    "cholesky": lambda x: jnp.linalg.cholesky(_sym(x)),
    "cholesky_lower": lambda x: jax.lax.linalg.cholesky(x, symmetrize_input=False),
    "qr": _qr,
    "eigh": _eigh,
    "eigvalsh": lambda x: jnp.linalg.eigvalsh(_sym(x)),
    "svd": _svd,
    "svdvals": lambda a: jnp.linalg.svd(a, compute_uv=False),
    "trace": jnp.trace,
    "norm_fro": lambda a: jnp.linalg.norm(a, "fro"),
    "norm_nuc": lambda a: jnp.linalg.norm(a, "nuc"),
    "norm_2": lambda a: jnp.linalg.norm(a, 2),
    "matrix_exp": jsl.expm,
}
