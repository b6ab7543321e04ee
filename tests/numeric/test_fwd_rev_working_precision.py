"""Forward vs reverse mode of a function that computes below float64 inside its float64
signature (``f(x.float()).double()``: mixed precision): both modes round at the working
precision, so the comparison allows the rounding bound in the dtype its kernels run in (one
traced VJP), and still catches a forward-mode rule that is wrong, in float64 code at its own
resolution and in mixed-precision code above float32's.  (A float64 rule that cancels gets no
credit: jax's sinc' near 0 stays a strict known failure of the suites' fwd_rev.)"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradcheck
from tests.support.torch_rules import sin_with_jvp

torch = pytest.importorskip("torch")


def _sin(jvp_off: float = 0.0, working=None):
    """``sin`` with a forward-mode rule scaled by ``1 + jvp_off``, computed in ``working``."""
    sin = sin_with_jvp(1 + jvp_off)
    if working is None:
        return sin
    return lambda x: sin(x.to(working)).to(x.dtype)


def _check(fn, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gradcheck.check(fn, x, backend="torch")


def _fwd_rev(report):
    return next(r for r in report.results if r.kind.value == "fwd_rev")


X = np.random.default_rng(0).standard_normal(8)


@pytest.mark.parametrize("x", [X, np.full(8, 1.2665987014770508e-06)], ids=["random", "flat"])
def test_a_float32_inside_function_passes_forward_vs_reverse(x):
    """``erf(x.float())``: the modes differ by ~1e-7 relative (the tangent and the cotangent
    are rounded to float32 at the cast); at a point where the float32 derivative does not move
    at all (``erf'`` near 0) only the kernels' dtype explains it."""
    report = _check(lambda t: torch.erf(t.float()).to(t.dtype), x)
    assert report.passed, gradcheck.format_failure(report)
    r = _fwd_rev(report)
    assert abs(r.actual - r.expected) > 1e-9 * abs(r.expected)  # far above float64 rounding


def test_a_forward_rule_off_by_1e_9_in_float64_code_is_still_caught():
    bad, good = _check(_sin(1e-9), X), _check(_sin(), X)
    assert _fwd_rev(bad).status.value == "failed"
    assert good.passed, gradcheck.format_failure(good)


def test_a_forward_rule_off_by_1e_4_in_float32_inside_code_is_caught():
    bad = _check(_sin(1e-4, torch.float32), X)
    good = _check(_sin(0.0, torch.float32), X)
    assert _fwd_rev(bad).status.value == "failed", bad.summary()
    assert _fwd_rev(good).status.value == "passed", gradcheck.format_failure(good)
