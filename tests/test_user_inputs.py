"""What users pass to check/assert_gradients, and what comes back when nothing can be decided."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import GradientMismatch, NothingDecided, NumpyFunction, Status

X = np.array([0.3, -1.2, 0.7])


def _sin(jvp: bool = True, scale: float = 1.0) -> NumpyFunction:
    return NumpyFunction(np.sin, lambda a, c: (scale * c[0] * np.cos(a[0]),),
                         (lambda a, t: (np.cos(a[0]) * t[0],)) if jvp else None, name="sin")


# -- 1. never green on nothing -----------------------------------------------------------------


def test_all_nan_function_raises_nothing_decided_with_the_reason():
    f = NumpyFunction(lambda x: np.full_like(x, np.nan), lambda a, c: (np.zeros_like(a[0]),),
                      name="all_nan")
    assert gradcheck.check(f, X, backend="numpy").passed  # check: nothing wrong was shown...
    with pytest.raises(NothingDecided) as info:  # ...but assert_gradients does not pass it
        gradcheck.assert_gradients(f, X, backend="numpy")
    text = str(info.value)
    assert text.startswith("gradient check decided nothing: 1 checks: 1 inconclusive "
                           "(1 not decided)")
    assert "non-finite value(s) at the sample point" in text
    assert isinstance(info.value, GradientMismatch) and isinstance(info.value, AssertionError)
    assert info.value.report.decided == []


def test_forward_mode_without_a_forward_rule_raises_nothing_decided():
    with pytest.raises(NothingDecided) as info:
        gradcheck.assert_gradients(_sin(jvp=False), X, backend="numpy", modes=("fwd",))
    assert "[skipped]" in str(info.value) and "has no hand-derived jvp" in str(info.value)
    # the same function with its forward rule is decided and passes
    report = gradcheck.assert_gradients(_sin(), X, backend="numpy", modes=("fwd",))
    assert [r.status for r in report.decided] == [Status.PASSED]


def test_jax_custom_vjp_in_forward_mode_decides_nothing():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (g * jnp.cos(x),))
    with pytest.raises(NothingDecided, match="forward mode is not available"):
        gradcheck.assert_gradients(f, X, backend="jax", modes=("fwd",))
    gradcheck.assert_gradients(f, X, backend="jax", modes=("rev",))


def test_a_wrong_gradient_is_still_a_mismatch_not_nothing_decided():
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(_sin(scale=1.01), X, backend="numpy", modes=("rev",))
    assert not isinstance(info.value, NothingDecided)


def test_partly_decided_report_passes_and_counts_what_was_not_decided():
    # |x| has a kink at x = 0: that block is inconclusive, the other blocks are decided
    f = NumpyFunction(lambda x, y: (np.abs(x), y ** 2),
                      lambda a, c: (c[0] * np.sign(a[0]), 2 * a[1] * c[1]),
                      lambda a, t: (np.sign(a[0]) * t[0], 2 * a[1] * t[1]), name="absq")
    report = gradcheck.assert_gradients(f, np.array([0.0, 1.0, -2.0]), np.array([0.5, 1.5]),
                                        backend="numpy")
    n_undecided = len(report.undecided)
    assert n_undecided == 2 and len(report.decided) == len(report) - 2
    assert report.summary() == (f"{len(report)} checks: {len(report) - 2} passed, "
                                "2 inconclusive (2 not decided)")
