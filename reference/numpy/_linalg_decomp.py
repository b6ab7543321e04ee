"""Hand-derived rules of the matrix decompositions (Cholesky, QR, eigh, SVD), NumPy/SciPy only.

Each JVP is derived from the defining identity differentiated once; each VJP from the JVP by
``<G, dY> = <gA, dA>``.  Gauges: diag(R) > 0 for QR, first row of V (eigh) / U (SVD) > 0.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from gradcheck.core.rules import NumpyFunction

from ._linalg_util import first_row_signs, mT, off_diag_inverse_gaps, sym

# -- Cholesky -----------------------------------------------------------------------------------


def _phi(x: np.ndarray) -> np.ndarray:
    """Lower triangle with the diagonal halved (self-adjoint as a linear map)."""
    return np.tril(x) - 0.5 * np.diag(np.diag(x))


def _chol_jvp_sym(low: np.ndarray, ds: np.ndarray) -> np.ndarray:
    """A = L L^T: L^{-1} dA L^{-T} = L^{-1} dL + (L^{-1} dL)^T with L^{-1} dL lower, hence
    dL = L phi(L^{-1} dA L^{-T}) for a symmetric dA."""
    m = sla.solve_triangular(low, ds, lower=True)
    m = mT(sla.solve_triangular(low, mT(m), lower=True))
    return low @ _phi(m)


def _chol_vjp_sym(low: np.ndarray, g: np.ndarray) -> np.ndarray:
    """<G, L phi(M)> = <phi(L^T G), L^{-1} dA L^{-T}>, so gA = L^{-T} phi(L^T G) L^{-1};
    symmetrized, as only symmetric dA are used."""
    p = _phi(mT(low) @ g)
    p = sla.solve_triangular(low, p, lower=True, trans="T")
    p = mT(sla.solve_triangular(low, mT(p), lower=True, trans="T"))
    return sym(p)


def _from_lower(x: np.ndarray) -> np.ndarray:
    """The symmetric matrix LAPACK sees when it reads only the lower triangle of ``x``."""
    return np.tril(x) + mT(np.tril(x, -1))


def _from_lower_adjoint(g: np.ndarray) -> np.ndarray:
    return np.tril(g) + np.tril(mT(g), -1)


def _cholesky_ops() -> dict[str, NumpyFunction]:
    def fwd(x):
        return np.linalg.cholesky(sym(x))

    def fwd_lower(x):
        return np.linalg.cholesky(_from_lower(x))

    return {
        "cholesky": NumpyFunction(
            fwd, lambda a, c: (_chol_vjp_sym(fwd(a[0]), c[0]),),
            lambda a, t: (_chol_jvp_sym(fwd(a[0]), sym(t[0])),), name="cholesky"),
        "cholesky_lower": NumpyFunction(
            fwd_lower,
            lambda a, c: (_from_lower_adjoint(_chol_vjp_sym(fwd_lower(a[0]), c[0])),),
            lambda a, t: (_chol_jvp_sym(fwd_lower(a[0]), _from_lower(t[0])),),
            name="cholesky_lower"),
    }


# -- QR -----------------------------------------------------------------------------------------


def _qr(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    q, r = np.linalg.qr(a)
    d = np.sign(np.diag(r))
    return q * d, r * d[:, None]


def _qr_jvp(args, tans):
    """dA = dQ R + Q dR.  M = Q^T dA R^{-1} = Q^T dQ + dR R^{-1}: antisymmetric plus upper, so
    Omega = tril(M, -1) - tril(M, -1)^T, dR = (M - Omega) R, dQ = (dA - Q dR) R^{-1}."""
    q, r = _qr(args[0])
    da = tans[0]
    m = mT(sla.solve_triangular(r, mT(q.T @ da), trans="T"))  # Q^T dA R^{-1}
    low = np.tril(m, -1)
    dr = (m - low + mT(low)) @ r
    dq = mT(sla.solve_triangular(r, mT(da - q @ dr), trans="T"))
    return dq, dr


def _qr_vjp(args, cts):
    """With B = gR R^T - Q^T gQ and C = triu(B) + triu(B, 1)^T (the adjoint of M -> M - Omega):
    gA = (gQ + Q C) R^{-T}."""
    q, r = _qr(args[0])
    gq, gr = cts
    b = gr @ mT(r) - mT(q) @ gq
    c = np.triu(b) + mT(np.triu(b, 1))
    return (sla.solve_triangular(r, mT(gq + q @ c), trans="N").T,)


# -- eigh ---------------------------------------------------------------------------------------


def _eigh(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w, v = np.linalg.eigh(sym(x))
    return w, v * first_row_signs(v)


def _eigh_jvp(args, tans):
    """S V = V diag(w): with P = V^T dS V, dw = diag(P) and V^T dV = F o P with
    F_ij = 1/(w_j - w_i) (zero diagonal: the gauge keeps |v_k| = 1 and the sign fixed)."""
    w, v = _eigh(args[0])
    p = mT(v) @ sym(tans[0]) @ v
    return np.diag(p).copy(), v @ (off_diag_inverse_gaps(w) * p)


def _eigh_vjp(args, cts):
    """gS = V (diag(gw) + F o (V^T gV)) V^T, then symmetrized (dS = sym(dX))."""
    w, v = _eigh(args[0])
    gw, gv = cts
    inner = np.diag(gw) + off_diag_inverse_gaps(w) * (mT(v) @ gv)
    return (sym(v @ inner @ mT(v)),)


# -- SVD ----------------------------------------------------------------------------------------


def _svd(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    d = first_row_signs(u)
    return u * d, s, vh * d[:, None]


def _svd_jvp(args, tans):
    """A = U S V^T (m >= n, V square).  P = U^T dA V; dS = diag(P);
    U^T dU = F o (P S + S P^T), V^T dV = F o (S P + P^T S) with F_ij = 1/(s_j^2 - s_i^2)
    (from the eigenproblems of A A^T and A^T A), plus (I - U U^T) dA V S^{-1} for U."""
    u, s, vh = _svd(args[0])
    v, da = mT(vh), tans[0]
    p = mT(u) @ da @ v
    f = off_diag_inverse_gaps(s, square=True)
    du = u @ (f * (p * s + s[:, None] * mT(p))) + (da @ v - u @ p) / s
    dv = v @ (f * (s[:, None] * p + mT(p) * s))
    return du, np.diag(p).copy(), mT(dv)


def _svd_vjp(args, cts):
    """gA = U [diag(gS) + (Ju + Ju^T) S + S (Jv + Jv^T)] V^T + (I - U U^T) gU S^{-1} V^T with
    Ju = F o (U^T gU), Jv = F o (V^T gV) (adjoint of the JVP above, term by term)."""
    u, s, vh = _svd(args[0])
    gu, gs, gvh = cts
    v, gv = mT(vh), mT(gvh)
    f = off_diag_inverse_gaps(s, square=True)
    ju = f * (mT(u) @ gu)
    jv = f * (mT(v) @ gv)
    core = np.diag(gs) + (ju + mT(ju)) * s + s[:, None] * (jv + mT(jv))
    proj = gu - u @ (mT(u) @ gu)
    return (u @ core @ vh + (proj / s) @ vh,)


def _svdvals_vjp(args, cts):
    u, _, vh = np.linalg.svd(args[0], full_matrices=False)
    return ((u * cts[0]) @ vh,)


def _svdvals_jvp(args, tans):
    u, _, vh = np.linalg.svd(args[0], full_matrices=False)
    return (np.einsum("ik,ij,kj->k", u, tans[0], vh),)


DECOMPOSITIONS: dict[str, NumpyFunction] = {
    **_cholesky_ops(),
    "qr": NumpyFunction(_qr, _qr_vjp, _qr_jvp, name="qr"),
    "eigh": NumpyFunction(_eigh, _eigh_vjp, _eigh_jvp, name="eigh"),
    "svd": NumpyFunction(_svd, _svd_vjp, _svd_jvp, name="svd"),
    "svdvals": NumpyFunction(lambda a: np.linalg.svd(a, compute_uv=False), _svdvals_vjp,
                             _svdvals_jvp, name="svdvals"),
}
