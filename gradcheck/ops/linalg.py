"""Linear-algebra ops of the catalog: products, solves, determinants and decompositions.

Decompositions are only functions of their input up to a gauge (the sign of an eigenvector, of a
singular-vector pair, of a row of R), so every catalog op fixes the gauge in a way that is locally
constant around the samples, which makes the op a smooth function there:

* ``qr`` returns the factorization with a positive diagonal of ``R``;
* ``eigh`` and ``svd`` flip each eigenvector / left singular vector (and its right partner) so
  that its first component is positive; samplers keep those components away from 0 and the
  spectra well separated, so no FD step crosses a sign flip or an eigenvalue crossing.

Symmetric-input ops (``cholesky``, ``eigh``, ``eigvalsh``) take a general matrix ``X`` and
decompose ``(X + X^T) / 2``: the op is then a function of all ``n^2`` entries that every engine
computes identically.  ``cholesky_lower`` instead calls the library routine on ``X`` itself, as
users do, where LAPACK reads only the lower triangle: it checks that convention (see the known
discrepancies).

Samplers stay well conditioned (singular values in ``[1, 2]`` for solves and inverses), because
the oracle's steps scale with ``max(1, rms(x))``, not with the distance to a singularity.
"""

from __future__ import annotations

import numpy as np

from gradcheck.core.taxonomy import SECOND_ORDER_KINDS
from gradcheck.ops.spec import KnownDiscrepancy, OpSpec, SpecialPoint, normal

FAMILY = "linalg"


def _orthogonal(rng: np.random.Generator, n: int, min_first_row: float = 0.0) -> np.ndarray:
    """A random orthogonal ``n x n`` matrix whose first row entries are at least
    ``min_first_row`` in magnitude (rejection sampling; cheap for the sizes used here)."""
    while True:
        q, r = np.linalg.qr(rng.standard_normal((n, n)))
        q = q * np.sign(np.diag(r))
        if np.min(np.abs(q[0])) >= min_first_row:
            return q


def _with_singular_values(rng: np.random.Generator, m: int, n: int, s: np.ndarray,
                          min_first_row: float = 0.0) -> np.ndarray:
    """``U[:, :k] diag(s) V^T`` with random orthogonal ``U`` (first-row bound) and ``V``."""
    k = len(s)
    u = _orthogonal(rng, m, 0.0)
    while np.min(np.abs(u[0, :k])) < min_first_row:
        u = _orthogonal(rng, m, 0.0)
    v = _orthogonal(rng, n)
    return (u[:, :k] * s) @ v[:, :k].T


def _conditioned(rng: np.random.Generator, n: int) -> np.ndarray:
    """A square matrix with singular values uniform in ``[1, 2]`` (condition number <= 2)."""
    return _with_singular_values(rng, n, n, rng.uniform(1.0, 2.0, n))


def _separated_eigs(rng: np.random.Generator, n: int) -> np.ndarray:
    """Eigenvalues with gaps of at least 2 (about 2.5 apart), centred on 0."""
    lam = 2.5 * np.arange(n) + rng.uniform(-0.25, 0.25, n)
    return lam - lam.mean()


def _sample_square(n: int, count: int = 1):
    def sample(rng):
        return tuple(_conditioned(rng, n) for _ in range(count))
    return sample


def _sample_solve(n: int, k: int):
    def sample(rng):
        return _conditioned(rng, n), rng.standard_normal((n, k))
    return sample


def _sample_spd(n: int):
    def sample(rng):
        q = _orthogonal(rng, n)
        return ((q * rng.uniform(1.0, 2.0, n)) @ q.T,)
    return sample


def _sample_sym_separated(n: int):
    def sample(rng):
        q = _orthogonal(rng, n, min_first_row=0.3)
        return ((q * _separated_eigs(rng, n)) @ q.T,)
    return sample


def _sample_separated_singular(m: int, n: int):
    def sample(rng):
        s = np.sort(2.0 * np.arange(1, n + 1) + rng.uniform(-0.3, 0.3, n))[::-1]
        return (_with_singular_values(rng, m, n, s, min_first_row=0.2),)
    return sample


def _sample_lower(n: int, k: int):
    def sample(rng):
        low = np.tril(rng.standard_normal((n, n)), -1) * 0.3
        low += np.diag(rng.uniform(1.0, 2.0, n) * rng.choice([-1.0, 1.0], n))
        # the strict upper triangle is noise the op must ignore
        return low + np.triu(rng.standard_normal((n, n)), 1), rng.standard_normal((n, k))
    return sample


def _sample_tall(m: int, n: int):
    def sample(rng):
        return (_with_singular_values(rng, m, n, rng.uniform(1.0, 2.0, n)),)
    return sample


def _fixed(m: int, n: int, s: list[float], seed: int) -> np.ndarray:
    """A fixed ``m x n`` matrix with singular values ``s`` (for special points)."""
    return _with_singular_values(np.random.default_rng(seed), m, n, np.array(s))


_SYM_DOC = " of (X + X^T)/2"


def _known(backend: str, checks: tuple[str, ...], reason: str, link: str
           ) -> tuple[KnownDiscrepancy, ...]:
    """One entry per failing check (a ``"*"`` entry would also claim the checks that pass,
    e.g. eager-vs-functional, and strict xfails would then fail)."""
    return tuple(KnownDiscrepancy(backend, reason, link=link, checks=(c,)) for c in checks)


_LOWER_TORCH = _known(
    "torch", ("vjp", "jvp", "fwd_rev", "reference", "cross_backend", "search") + SECOND_ORDER_KINDS,
    "by design: torch.linalg.cholesky reads only the lower triangle, but its backward is the "
    "derivative of cholesky((A + A^T)/2) and its forward-mode rule uses the whole tangent; "
    "neither is the derivative of the computed function, and they disagree with each other",
    "https://github.com/pytorch/pytorch/issues/137284")
_LOWER_JAX = _known(
    "jax", ("vjp", "jvp", "reference", "cross_backend", "search") + SECOND_ORDER_KINDS,
    "lax.linalg.cholesky(symmetrize_input=False) ignores the upper triangle, but its JVP rule "
    "uses the whole tangent (L^{-1} dA L^{-T}): ghost derivatives w.r.t. the upper triangle "
    "(cf. jax#12795 for eigh)",
    "https://github.com/jax-ml/jax/issues/40421")


def _torch_nested_jvp(issue: int, points: tuple[str, ...] = ("*",)
                      ) -> tuple[KnownDiscrepancy, ...]:
    """torch's forward-AD rules of solve/det/slogdet read the LU factors as constants, so
    differentiating the JVP again (forward over forward) drops the d(A^{-1}) term."""
    return tuple(KnownDiscrepancy(
        "torch", checks=("jvp_of_jvp",), link=f"https://github.com/pytorch/pytorch/issues/{issue}",
        points=(p,),
        reason="forward-over-forward AD drops a second-order term: the JVP rule uses the LU "
               "factors of the forward pass as constants (also pytorch/pytorch#192540, #198017)")
        for p in points)


# at the zero matrix forward over forward is right (every second derivative of det is 0 there)
_DET = _torch_nested_jvp(196696, ("random", "rank_deficient")) + tuple(
    KnownDiscrepancy("torch", checks=(c,), points=("zero",), link="docs/known-discrepancies.md",
                     reason="torch's double backward of det at the zero matrix is nan (exact 0: "
                            "det is a quartic, its second derivatives vanish at 0; jax: 0)")
    for c in ("vjp_of_vjp", "jvp_of_vjp")) + (
    KnownDiscrepancy("jax", checks=("vjp_of_vjp",), points=("zero",),
                     link="docs/known-discrepancies.md",
                     reason="jax's reverse over reverse of det at the zero matrix is nan (exact "
                            "0; its forward over reverse and jax.hessian give 0)"),
    KnownDiscrepancy("jax", checks=("jvp_of_vjp",), points=("zero",),
                     link="docs/known-discrepancies.md",
                     reason="oracle limitation: jax's forward over reverse is 0 there (right; "
                            "finite differences 1.4e-30), but the comparison's rounding terms "
                            "are nan, taken from the nan reverse-over-reverse values (see "
                            "vjp_of_vjp), so its allowance is nan"),
    *(KnownDiscrepancy(
        "jax", checks=(c,), points=("rank_deficient",), link="docs/known-discrepancies.md",
        strict=False,
        reason="jax's second derivatives of det are nan where LAPACK's LU of the matrix has an "
               "exact zero pivot (det is a polynomial: its second derivatives exist "
               "everywhere); whether this rank-3 matrix (singular values 2, 1.5, 1, 2e-17) "
               "gets one depends on the machine's LAPACK kernels, so the xfail is not strict",
        evidence="jax 0.10.2 CPU: jax.scipy.linalg.lu_factor(A)[0] has diagonal (1.40, -0.59, "
                 "-1.17, 0.0) and jax.hessian(jnp.linalg.det)(A) is nan on one machine; on "
                 "another the pivot is nonzero and the checks pass")
      for c in SECOND_ORDER_KINDS),
    KnownDiscrepancy("torch", checks=("search",), dtypes=("float32",),
                     link="docs/known-discrepancies.md",
                     reason="oracle limitation: at one well-conditioned sample (sampler seed "
                            "1220263) torch's eager and torch.func VJPs of det differ by 1.9e-14 "
                            "relative, 1.12x the eager-vs-functional bound (16 eps x the compared "
                            "terms), which has no term for the rounding the LU solve amplifies"))

QUICK: tuple[str, ...] = ("solve", "cholesky_lower", "eigh", "svd")

SPECS: tuple[OpSpec, ...] = (
    OpSpec("matmul", FAMILY, 2, normal((3, 4), (4, 2)), doc="A @ B"),
    OpSpec("matmul_broadcast", FAMILY, 2, normal((2, 3, 4), (4, 2)),
           doc="batched (2,3,4) @ (4,2): the gradient of B sums over the batch"),
    OpSpec("einsum_bij_bjk", FAMILY, 2, normal((2, 3, 4), (2, 4, 2)),
           doc="einsum('bij,bjk->bik')"),
    OpSpec("einsum_ij_ji", FAMILY, 2, normal((3, 4), (4, 3)),
           doc="einsum('ij,ji->'): trace(A B)"),
    OpSpec("einsum_i_ij_j", FAMILY, 3, normal((3,), (3, 4), (4,)),
           doc="einsum('i,ij,j->'): bilinear form x^T A y"),
    OpSpec("solve", FAMILY, 2, _sample_solve(4, 2), doc="X = A^{-1} B, cond(A) <= 2",
           known=_torch_nested_jvp(196695),
           box_domain=False),
    OpSpec("solve_triangular_lower", FAMILY, 2, _sample_lower(4, 2),
           doc="X = tril(L)^{-1} B: the strict upper triangle of L is ignored",
           box_domain=False),
    OpSpec("inv", FAMILY, 1, _sample_square(4), doc="A^{-1}, cond(A) <= 2",
           box_domain=False),
    # box_domain=False: an elementwise box draws matrices of rank <= n - 2 (ties of entries),
    # where the exact gradient adj(A)^T is 0 and every engine returns rounding noise (~1e-18)
    # that a bound relative to the compared terms calls a failure; the special points below
    # check rank n - 1 and the zero matrix
    OpSpec("det", FAMILY, 1, _sample_square(4), doc="det(A)", known=_DET, box_domain=False,
           special=(
               # rank n - 1: the gradient adj(A)^T is not 0 (det(A) A^{-T} does not exist)
               SpecialPoint("rank_deficient", (_fixed(4, 4, [2.0, 1.5, 1.0, 0.0], 1234),)),
               SpecialPoint("zero", (np.zeros((4, 4)),)),
           )),
    OpSpec("slogdet", FAMILY, 1, _sample_square(4),
           doc="(sign, log|det A|): the sign output is locally constant",
           known=_torch_nested_jvp(192540),
           box_domain=False),
    OpSpec("cholesky", FAMILY, 1, _sample_spd(4), doc="Cholesky factor L" + _SYM_DOC,
           special=(SpecialPoint("identity", (np.eye(4),)),),
           box_domain=False),
    OpSpec("cholesky_lower", FAMILY, 1, _sample_spd(4),
           doc="the library's Cholesky of X itself (LAPACK reads the lower triangle only)",
           known=_LOWER_TORCH + _LOWER_JAX,
           box_domain=False),
    OpSpec("qr", FAMILY, 1, _sample_tall(5, 3),
           doc="reduced QR (5x3) with diag(R) > 0",
           box_domain=False),
    OpSpec("eigh", FAMILY, 1, _sample_sym_separated(4),
           doc="eigenvalues and eigenvectors (first row > 0)" + _SYM_DOC,
           box_domain=False),
    OpSpec("eigvalsh", FAMILY, 1, _sample_sym_separated(4), doc="eigenvalues" + _SYM_DOC,
           box_domain=False),
    OpSpec("svd", FAMILY, 1, _sample_separated_singular(5, 3),
           doc="reduced SVD (U, S, Vh) of a 5x3 matrix, U's first row > 0",
           box_domain=False),
    OpSpec("svdvals", FAMILY, 1, _sample_separated_singular(5, 3), doc="singular values",
           box_domain=False),
    OpSpec("trace", FAMILY, 1, normal((4, 4)), doc="trace(A)"),
    OpSpec("norm_fro", FAMILY, 1, normal((3, 4)), doc="Frobenius norm", special=(
        SpecialPoint("zero", (np.zeros((3, 4)),), expect="inconclusive"),
    )),
    OpSpec("norm_nuc", FAMILY, 1, _sample_separated_singular(5, 3),
           doc="nuclear norm (sum of singular values)", special=(
               SpecialPoint("rank_deficient", (_fixed(5, 3, [2.0, 1.0, 0.0], 7),),
                            expect="inconclusive"),
           ),
           box_domain=False),
    OpSpec("norm_2", FAMILY, 1, _sample_separated_singular(5, 3),
           doc="spectral norm (largest singular value)", special=(
               SpecialPoint("repeated_top", (_fixed(5, 3, [2.0, 2.0, 1.0], 99),),
                            expect="inconclusive"),
           ),
           box_domain=False),
    OpSpec("matrix_exp", FAMILY, 1, normal((3, 3), scale=0.5), doc="expm(A)", special=(
        SpecialPoint("zero", (np.zeros((3, 3)),)),
        SpecialPoint("nilpotent", (np.triu(np.ones((3, 3)), 1),)),
    )),
)
