"""The ``nn`` family: hand-derived NumPy rules verified against the FD oracle, the torch and JAX
implementations checked on the same samples, and mutants showing the checks bite."""

from __future__ import annotations

import numpy as np

from gradcheck.ops import nn as family
from gradcheck.reference.numpy import nn as ref
from tests.support.family_checks import (
    failed_kinds,
    family_tests,
    mutant_caught,
    sample_of,
    with_vjp,
)

SPECS = family.SPECS


def test_pool_samples_have_no_ties():
    spec = next(s for s in SPECS if s.name == "max_pool2d")
    x = spec.sample(np.random.default_rng(2))[0]
    assert len(np.unique(x)) == x.size


# JAX in the quick profile: the ops written out with jax.lax; every op in the ci and
# thorough profiles (see family_tests).
JAX_QUICK = ("attention_causal", "conv2d_stride2_pad1", "max_pool1d_k3s1")

TestNn = family_tests(SPECS, "nn", JAX_QUICK)


# -- mutants ------------------------------------------------------------------------------------


def test_mutant_layer_norm_without_variance_term_is_caught():
    """Treating the standard deviation as a constant drops xh * mean(xh * g)."""

    def vjp(args, cts):
        x, w, _ = args
        g = cts[0]
        xc = x - x.mean(-1, keepdims=True)
        r = 1.0 / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5)
        gn = g * w
        return r * (gn - gn.mean(-1, keepdims=True)), (g * xc * r).sum(0), g.sum(0)

    report = mutant_caught(with_vjp(ref.OPS["layer_norm"], vjp), sample_of(SPECS, "layer_norm"))
    assert "vjp" in failed_kinds(report) and "jvp" not in failed_kinds(report)


def test_mutant_overlapping_max_pool_that_sets_is_caught():
    """Windows of 3 with stride 1 share their maximum: the gradients must add there."""
    good = ref.OPS["max_pool1d_k3s1"]
    x = np.array([[[0.0, 3.0, 1.0, -1.0, 0.5, 2.0]]])

    def vjp(args, cts):
        a = args[0]
        win = np.lib.stride_tricks.sliding_window_view(a, 3, axis=-1)
        pos = np.argmax(win, axis=-1) + np.arange(win.shape[-2])
        gx = np.zeros_like(a)
        np.put_along_axis(gx, pos, cts[0], axis=-1)  # last write wins
        return (gx,)

    assert mutant_caught(good, (x,)).passed
    report = mutant_caught(with_vjp(good, vjp), (x,))
    assert "vjp" in failed_kinds(report)


def test_mutant_cross_entropy_without_mean_is_caught():
    def vjp(args, cts):
        g, _ = ref.OPS["cross_entropy"].vjp(args, cts)
        return g * args[0].shape[0], None

    report = mutant_caught(with_vjp(ref.OPS["cross_entropy"], vjp),
                           sample_of(SPECS, "cross_entropy"))
    assert "vjp" in failed_kinds(report)
