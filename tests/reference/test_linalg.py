"""The ``linalg`` family: hand-derived NumPy rules verified against the FD oracle, the torch and
JAX implementations checked on the same samples, and mutants showing the checks bite."""

from __future__ import annotations

import numpy as np

from gradcheck import NumpyFunction, Status
from gradcheck.ops import linalg as family
from gradcheck.reference.numpy import linalg as ref
from gradcheck.reference.numpy._linalg_util import mT, off_diag_inverse_gaps, sym
from tests.support.family_checks import (
    failed_kinds,
    family_tests,
    mutant_caught,
    sample_of,
    with_vjp,
)

SPECS = family.SPECS


def test_samplers_stay_in_the_domain():
    rng = np.random.default_rng(3)
    by_name = {s.name: s for s in SPECS}
    spd = by_name["cholesky"].sample(rng)[0]
    assert np.all(np.linalg.eigvalsh(spd) >= 1.0 - 1e-12)
    w = np.linalg.eigvalsh(by_name["eigh"].sample(rng)[0])
    assert np.min(np.diff(w)) >= 2.0
    s = np.linalg.svd(by_name["svd"].sample(rng)[0], compute_uv=False)
    assert np.min(-np.diff(s)) >= 1.0 and s[-1] >= 1.0
    assert np.linalg.cond(by_name["solve"].sample(rng)[0]) <= 2.0 + 1e-9


# JAX in the quick profile: a strict known entry and the gauge-fixed decompositions; every op
# in the ci and thorough profiles (see family_tests).
JAX_QUICK = ("cholesky_lower", "det", "qr", "eigh", "svd")

TestLinalg = family_tests(SPECS, "linalg", JAX_QUICK)


# -- mutants: wrong rules the checks must reject ------------------------------------------------


def test_mutant_eigh_transposed_gaps_is_caught():
    """F_ij = 1/(w_i - w_j) instead of 1/(w_j - w_i): every eigenvector gradient flips sign."""
    good = ref.OPS["eigh"]

    def vjp(args, cts):
        w, v = good.forward(args[0])
        inner = np.diag(cts[0]) - off_diag_inverse_gaps(w) * (mT(v) @ cts[1])
        return (sym(v @ inner @ mT(v)),)

    report = mutant_caught(with_vjp(good, vjp), sample_of(SPECS, "eigh"))
    assert "vjp" in failed_kinds(report) and "jvp" not in failed_kinds(report)


def test_mutant_svd_without_complement_term_is_caught():
    """Dropping (I - U U^T) gU S^{-1} V^T: right for square matrices, wrong for 5x3 ones."""
    good = ref.OPS["svd"]

    def vjp(args, cts):
        u, s, vh = good.forward(args[0])
        f = off_diag_inverse_gaps(s, square=True)
        ju, jv = f * (mT(u) @ cts[0]), f * (vh @ mT(cts[2]))
        core = np.diag(cts[1]) + (ju + mT(ju)) * s + s[:, None] * (jv + mT(jv))
        return (u @ core @ vh,)

    report = mutant_caught(with_vjp(good, vjp), sample_of(SPECS, "svd"))
    assert "vjp" in failed_kinds(report)


def test_mutant_det_rule_via_inverse_fails_at_a_singular_matrix():
    """det(A) A^{-T} is the textbook gradient, but A^{-1} does not exist where det = 0: at a
    singular matrix the rule has no value while adj(A)^T (the reference) is right.

    The matrix must be singular *in floating point*.  The catalog's ``rank_deficient`` point is
    rank 3 in exact arithmetic, but its float64 rounding is not singular (smallest singular value
    1.7e-16, det 4.3e-16); there LAPACK's inverse exists and det(A) A^{-T} agrees with adj(A)^T
    to rounding (the tiny pivot cancels between det and inv), so the harness rightly passes it
    (numpy 2.4).  With two equal rows the elimination produces an exact zero pivot: ``inv``
    raises, and a rule that guards the singular case with det(A) = 0 returns 0, not adj(A)^T."""
    point = next(p for s in SPECS if s.name == "det" for p in s.special
                 if p.name == "rank_deficient")
    a = point.args[0].copy()
    a[3] = a[0]  # rank 3 exactly: adj(A) has rank 1, not 0
    assert np.linalg.det(a) == 0.0
    good = ref.OPS["det"]

    def vjp(args, cts):
        return (cts[0] * np.linalg.det(args[0]) * mT(np.linalg.inv(args[0])),)

    def guarded_vjp(args, cts):
        try:
            return vjp(args, cts)
        except np.linalg.LinAlgError:  # "det = 0, so the gradient is 0"
            return (np.zeros_like(args[0]),)

    raising = mutant_caught(with_vjp(good, vjp), (a,))
    assert not raising.passed
    assert [(r.kind, r.status) for r in raising.results if not r.ok] == [
        ("vjp", Status.ERROR)], raising.summary()
    assert "LinAlgError" in next(r.message for r in raising.results if r.kind == "vjp")
    assert "vjp" in failed_kinds(mutant_caught(with_vjp(good, guarded_vjp), (a,)))
    assert mutant_caught(good, (a,)).passed
    assert mutant_caught(good, point.args).passed


def test_fwd_rev_bound_stays_tight_for_a_cancelling_scalar_output():
    """x^T A y cancels, so forward-vs-reverse needs the reverse side's sum of |terms| (the
    correct rule passes, see test_numpy_reference_rule[einsum_i_ij_j]); a JVP off by a relative
    1e-9 must still fail it."""
    good = ref.OPS["einsum_i_ij_j"]
    off = NumpyFunction(good.forward, good.vjp,
                        lambda a, t: tuple(o * (1 + 1e-9) for o in good.jvp(a, t)))
    args = sample_of(SPECS, "einsum_i_ij_j")
    assert mutant_caught(good, args).passed
    assert "fwd_rev" in failed_kinds(mutant_caught(off, args))


def test_search_draws_structured_domains_from_the_sampler():
    """box_domain=False: the Hypothesis search must not draw a Cholesky input elementwise (a
    random box matrix is rarely positive definite; a singular one fooled the search of solve)."""
    from hypothesis import given, settings

    from gradcheck.harness.runner import Case
    from gradcheck.plugin.search import strategy

    @settings(max_examples=10, deadline=None, database=None)
    @given(inputs=strategy(Case("numpy", "cpu", "float64", "cholesky")))
    def draws(inputs):
        assert np.min(np.linalg.eigvalsh(inputs[0])) >= 1.0 - 1e-12

    draws()
