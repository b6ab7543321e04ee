"""Hand-derived reference rules for the ``linalg`` catalog family (NumPy/SciPy only).

Notation: ``G`` is a cotangent, ``dA`` a tangent, ``<X, Y> = sum(X * Y)``.  Each VJP is derived
from its JVP by ``<G, dY> = <gA, dA>`` for all ``dA``; the derivations are in the docstrings.
The gauges (signs of eigenvectors / singular vectors / diag(R)) are the ones of
:mod:`gradcheck.ops.linalg`.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from gradcheck.core.rules import NumpyFunction

from ._linalg_decomp import DECOMPOSITIONS
from ._linalg_util import adjugate, mT, sym
from ._linear import einsum_op, sum_to

# -- products -----------------------------------------------------------------------------------


def _matmul_vjp(args, cts):
    a, b = args
    g = cts[0]
    return sum_to(g @ mT(b), a.shape), sum_to(mT(a) @ g, b.shape)


def _matmul_jvp(args, tans):
    a, b = args
    da, db = tans
    return (da @ b + a @ db,)


# -- solves and inverses ------------------------------------------------------------------------


def _solve_vjp(args, cts):
    """X = A^{-1} B: dX = A^{-1}(dB - dA X), so gB = A^{-T} G and gA = -gB X^T."""
    a, b = args
    x = np.linalg.solve(a, b)
    gb = np.linalg.solve(mT(a), cts[0])
    return -gb @ mT(x), gb


def _solve_jvp(args, tans):
    a, b = args
    da, db = tans
    return (np.linalg.solve(a, db - da @ np.linalg.solve(a, b)),)


def _tri_forward(low, b):
    return sla.solve_triangular(np.tril(low), b, lower=True)


def _tri_vjp(args, cts):
    """Like solve with A = tril(L): gB = L^{-T} G, gL = tril(-gB X^T) (the upper part is unused)."""
    low, b = args
    x = _tri_forward(low, b)
    gb = sla.solve_triangular(np.tril(low), cts[0], lower=True, trans="T")
    return np.tril(-gb @ mT(x)), gb


def _tri_jvp(args, tans):
    low, b = args
    dl, db = tans
    return (_tri_forward(low, db - np.tril(dl) @ _tri_forward(low, b)),)


def _inv_vjp(args, cts):
    """Y = A^{-1}: dY = -Y dA Y, so gA = -Y^T G Y^T."""
    y = np.linalg.inv(args[0])
    return (-mT(y) @ cts[0] @ mT(y),)


def _inv_jvp(args, tans):
    y = np.linalg.inv(args[0])
    return (-y @ tans[0] @ y,)


# -- determinants -------------------------------------------------------------------------------


def _det_vjp(args, cts):
    """d det(A) = tr(adj(A) dA) (Jacobi), so gA = G adj(A)^T; adj via the SVD, valid when
    A is singular (where the inverse-based formula det(A) A^{-T} breaks down)."""
    return (cts[0] * mT(adjugate(args[0])),)


def _det_jvp(args, tans):
    return (np.sum(mT(adjugate(args[0])) * tans[0]),)


def _slogdet_forward(a):
    sign, logabs = np.linalg.slogdet(a)
    return np.asarray(sign, dtype=a.dtype), np.asarray(logabs, dtype=a.dtype)


def _slogdet_vjp(args, cts):
    """sign is locally constant; d log|det A| = tr(A^{-1} dA), so gA = G_log A^{-T}."""
    return (cts[1] * mT(np.linalg.inv(args[0])),)


def _slogdet_jvp(args, tans):
    a, da = args[0], tans[0]
    return np.zeros((), dtype=a.dtype), np.trace(np.linalg.solve(a, da))


# -- norms, trace, exponential ------------------------------------------------------------------


def _trace_vjp(args, cts):
    return (cts[0] * np.eye(*args[0].shape, dtype=args[0].dtype),)


def _norm_fro_vjp(args, cts):
    """d||A|| = <A, dA> / ||A|| (0 at A = 0, a kink, by convention)."""
    a = args[0]
    return (cts[0] * _safe_div(a, np.linalg.norm(a)),)


def _norm_fro_jvp(args, tans):
    a = args[0]
    return (_safe_div(np.sum(a * tans[0]), np.linalg.norm(a)),)


def _safe_div(x, d):
    return np.divide(x, d, out=np.zeros_like(x), where=d != 0)


def _svd_rule(args, tans_or_cts, which: str, kind: str):
    """nuc = sum s: d = tr(U^T dA V), gA = G U V^T; spectral = s_0: gA = G u_0 v_0^T."""
    u, _, vh = np.linalg.svd(args[0], full_matrices=False)
    if which == "2":
        u, vh = u[:, :1], vh[:1]
    basis = u @ vh
    if kind == "vjp":
        return (tans_or_cts[0] * basis,)
    return (np.sum(basis * tans_or_cts[0]),)


def _expm_frechet(a, e):
    """The Frechet derivative L(A, E): expm([[A, E], [0, A]]) = [[e^A, L(A, E)], [0, e^A]]
    (Mathias 1996).  Unlike scipy's expm_frechet it keeps float32 in float32."""
    n = a.shape[-1]
    block = np.zeros((2 * n, 2 * n), dtype=a.dtype)
    block[:n, :n] = block[n:, n:] = a
    block[:n, n:] = e
    return sla.expm(block)[:n, n:]


def _expm_vjp(args, cts):
    """E -> L(A, E) has adjoint E' -> L(A^T, E')."""
    return (_expm_frechet(mT(args[0]), cts[0]),)


def _expm_jvp(args, tans):
    return (_expm_frechet(args[0], tans[0]),)


def _eigvalsh_forward(x):
    return np.linalg.eigvalsh(sym(x))


def _eigvalsh_vjp(args, cts):
    """dw_k = v_k^T dS v_k, so gS = V diag(G) V^T (symmetric, so also gX)."""
    _, v = np.linalg.eigh(sym(args[0]))
    return ((v * cts[0]) @ mT(v),)


def _eigvalsh_jvp(args, tans):
    _, v = np.linalg.eigh(sym(args[0]))
    return (np.einsum("ik,ij,jk->k", v, sym(tans[0]), v),)


OPS: dict[str, NumpyFunction] = {
    "matmul": NumpyFunction(np.matmul, _matmul_vjp, _matmul_jvp, name="matmul"),
    "matmul_broadcast": NumpyFunction(np.matmul, _matmul_vjp, _matmul_jvp,
                                      name="matmul_broadcast"),
    "einsum_bij_bjk": einsum_op("einsum_bij_bjk", "bij,bjk->bik"),
    "einsum_ij_ji": einsum_op("einsum_ij_ji", "ij,ji->"),
    "einsum_i_ij_j": einsum_op("einsum_i_ij_j", "i,ij,j->"),
    "solve": NumpyFunction(np.linalg.solve, _solve_vjp, _solve_jvp, name="solve"),
    "solve_triangular_lower": NumpyFunction(_tri_forward, _tri_vjp, _tri_jvp,
                                            name="solve_triangular_lower"),
    "inv": NumpyFunction(np.linalg.inv, _inv_vjp, _inv_jvp, name="inv"),
    "det": NumpyFunction(np.linalg.det, _det_vjp, _det_jvp, name="det"),
    "slogdet": NumpyFunction(_slogdet_forward, _slogdet_vjp, _slogdet_jvp, name="slogdet"),
    "eigvalsh": NumpyFunction(_eigvalsh_forward, _eigvalsh_vjp, _eigvalsh_jvp, name="eigvalsh"),
    "trace": NumpyFunction(np.trace, _trace_vjp, lambda a, t: (np.trace(t[0]),), name="trace"),
    "norm_fro": NumpyFunction(np.linalg.norm, _norm_fro_vjp, _norm_fro_jvp, name="norm_fro"),
    "norm_nuc": NumpyFunction(lambda a: np.linalg.norm(a, "nuc"),
                              lambda a, c: _svd_rule(a, c, "nuc", "vjp"),
                              lambda a, t: _svd_rule(a, t, "nuc", "jvp"), name="norm_nuc"),
    "norm_2": NumpyFunction(lambda a: np.linalg.norm(a, 2),
                            lambda a, c: _svd_rule(a, c, "2", "vjp"),
                            lambda a, t: _svd_rule(a, t, "2", "jvp"), name="norm_2"),
    "matrix_exp": NumpyFunction(sla.expm, _expm_vjp, _expm_jvp, name="matrix_exp"),
    **DECOMPOSITIONS,
}
