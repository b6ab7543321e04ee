"""The ``shape`` family: hand-derived NumPy adjoints verified against the FD oracle, the torch
and JAX implementations checked on the same samples, and mutants showing the checks bite."""

from __future__ import annotations

import numpy as np

from gradcheck.ops import shape as family
from gradcheck.reference.numpy import shape as ref
from tests.support.family_checks import (
    failed_kinds,
    family_tests,
    mutant_caught,
    sample_of,
    with_vjp,
)

SPECS = family.SPECS


def test_index_samplers_repeat_an_index():
    """Repeated indices are the point of the gather/scatter samples (adds, not sets)."""
    for spec in SPECS:
        for a in spec.sample(np.random.default_rng(5)):
            if np.issubdtype(a.dtype, np.integer):
                assert len(np.unique(a)) < a.size, spec.name


# JAX in the quick profile: the hand-written index maps; every op in the ci and
# thorough profiles (see family_tests).
JAX_QUICK = ("scatter_add_axis1", "pad_reflect_2", "sort_axis1")

TestShape = family_tests(SPECS, "shape", JAX_QUICK)


# -- mutants ------------------------------------------------------------------------------------


def test_mutant_gather_adjoint_that_sets_is_caught():
    """gx[idx] = g keeps one of the repeated rows instead of adding them."""

    def vjp(args, cts):
        gx = np.zeros_like(args[0])
        gx[args[1]] = cts[0]
        return gx, None

    report = mutant_caught(with_vjp(ref.OPS["take_axis0"], vjp), sample_of(SPECS, "take_axis0"))
    assert "vjp" in failed_kinds(report) and "jvp" not in failed_kinds(report)


def test_mutant_reflect_pad_adjoint_without_fold_is_caught():
    """Cropping the padded cotangent (the constant-pad adjoint) forgets the mirrored border."""
    report = mutant_caught(with_vjp(ref.OPS["pad_reflect_2"], lambda a, c: (c[0][:, 2:-2],)),
                           sample_of(SPECS, "pad_reflect_2"))
    assert "vjp" in failed_kinds(report)


def test_mutant_broadcast_adjoint_that_averages_is_caught():
    report = mutant_caught(with_vjp(ref.OPS["broadcast_to_4x3"], lambda a, c: (c[0].mean(axis=0),)),
                           sample_of(SPECS, "broadcast_to_4x3"))
    assert "vjp" in failed_kinds(report)
