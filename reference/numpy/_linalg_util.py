"""Small NumPy helpers of the linear-algebra reference rules (no AD engine)."""

from __future__ import annotations

import numpy as np


def mT(a: np.ndarray) -> np.ndarray:
    """Transpose of the last two axes."""
    return np.swapaxes(a, -1, -2)


def sym(a: np.ndarray) -> np.ndarray:
    """``(A + A^T) / 2``."""
    return 0.5 * (a + mT(a))


def off_diag_inverse_gaps(w: np.ndarray, square: bool = False) -> np.ndarray:
    """``F[i, j] = 1 / (w_j - w_i)`` off the diagonal, 0 on it (``w_j^2 - w_i^2`` if square)."""
    v = w**2 if square else w
    gap = v[None, :] - v[:, None]
    np.fill_diagonal(gap, np.inf)
    return 1.0 / gap


def first_row_signs(v: np.ndarray) -> np.ndarray:
    """Signs that make the first row of ``v`` positive (the catalog's eigenvector gauge)."""
    s = np.sign(v[0])
    return np.where(s == 0, 1.0, s)


def prod_except_self(s: np.ndarray) -> np.ndarray:
    """``out[i] = prod_{j != i} s[j]`` without division (exact when some ``s[j] == 0``)."""
    one = np.ones(1, dtype=s.dtype)
    left = np.concatenate([one, np.cumprod(s[:-1])])
    right = np.concatenate([np.cumprod(s[::-1][:-1])[::-1], one])
    return left * right


def adjugate(a: np.ndarray) -> np.ndarray:
    """``adj(A)`` (so that ``d det(A) = tr(adj(A) dA)``), valid for singular ``A``.

    With ``A = U S V^T``: ``adj(A) = det(U) det(V) V diag(prod_{j!=i} s_j) U^T``, since
    ``adj(Q) = det(Q) Q^T`` for orthogonal ``Q`` and ``adj(XY) = adj(Y) adj(X)``.
    """
    u, s, vh = np.linalg.svd(a)
    scale = np.linalg.det(u) * np.linalg.det(vh)
    return scale * (mT(vh) * prod_except_self(s)) @ mT(u)
