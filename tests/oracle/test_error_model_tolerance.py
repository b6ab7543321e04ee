"""The error model (gradcheck.oracle.error_model) and what explicit atol/rtol mean in a check."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import NumpyFunction
from gradcheck.oracle import error_model as tolerance

EPS64 = float(np.finfo(np.float64).eps)
EPS32 = float(np.finfo(np.float32).eps)


def test_eps_by_name():
    assert tolerance.eps("float64") == EPS64
    assert tolerance.eps("float32") == EPS32
    assert tolerance.eps("float16") == float(np.finfo(np.float16).eps)
    assert tolerance.eps("bfloat16") == 2.0**-7


def test_model_allowance_formula_and_source():
    a = tolerance.model_allowance(1e-12, 3.0, "float64", conditioning=2.0)
    expected = tolerance.FD_SAFETY * 1e-12 + tolerance.ROUNDING_GAMMA * EPS64 * (3.0 + 2.0)
    assert a.allowed == pytest.approx(expected, rel=1e-15)
    assert "FD error 1e-12" in a.source and "eps(float64)" in a.source
    assert "conditioning 2" in a.source and a.source.endswith(f"= {expected:.3g}")


def test_rounding_scales_with_the_dtype():
    a64 = tolerance.model_allowance(0.0, 1.0, "float64").allowed
    a32 = tolerance.model_allowance(0.0, 1.0, "float32").allowed
    assert a32 / a64 == pytest.approx(EPS32 / EPS64)


@pytest.mark.parametrize("atol,rtol,expected,want", [
    (0.0, None, 5.0, 0.0),
    (None, 0.0, 5.0, 0.0),
    (0.0, 0.0, 5.0, 0.0),
    (1e-3, None, 5.0, 1e-3),
    (None, 1e-3, -5.0, 5e-3),
    (1e-3, 1e-2, 2.0, 1e-3 + 2e-2),
])
def test_explicit_tolerance_means_exactly_atol_plus_rtol(atol, rtol, expected, want):
    a = tolerance.allowance(expected, fd_error=1.0, magnitude=1e6, dtype="float32",
                            conditioning=1e6, atol=atol, rtol=rtol)
    assert a.allowed == want  # no FD error, no rounding, no size scaling
    assert a.source.startswith("explicit")


def test_rounding_allowance_formula_and_explicit_override():
    a = tolerance.rounding_allowance(2.0, 1.0, 1e-6, "float32")
    want = tolerance.ROUNDING_GAMMA * EPS32 * 3.0 + tolerance.NOISE_FACTOR * 1e-6
    assert a.allowed == pytest.approx(want, rel=1e-15)
    assert "measured rounding noise" in a.source
    assert tolerance.rounding_allowance(2.0, 1.0, 1e-6, "float32", atol=0.0).allowed == 0.0
    assert tolerance.rounding_allowance(2.0, 1.0, 1e-6, "float32", rtol=0.5).allowed == 1.0


def test_ratio():
    assert tolerance.ratio(1.0, 4.0) == 0.25
    assert tolerance.ratio(0.0, 0.0) == 0.0
    assert tolerance.ratio(1e-300, 0.0) == float("inf")


def test_forward_error_is_the_largest_of_model_and_measurements():
    y64 = np.array([1.0, 2.0, 0.0])
    y32 = np.array([1.0, 2.0 + 100 * EPS32, 0.0])
    noise = np.array([0.0, 0.0, 1000 * EPS64])
    n = tolerance.forward_error(y64, y32, noise, "float32")
    assert n == pytest.approx([1.0, 100.0, 1000.0])


def test_conditioning_norm_is_capped_at_ten_times_its_median():
    v = np.ones(4)
    fwd = np.ones(4)
    curv = np.array([1.0, 1.0, 1.0, 1.0])
    ju = np.array([1.0, 1.0, 1.0, 1e-12])  # a critical point: the ratio would be 1e12
    c = tolerance.conditioning_norm(v, fwd, curv, ju)
    assert c == pytest.approx(np.sqrt(3 + 10.0**2))


def _sin(bias: float = 0.0) -> NumpyFunction:
    return NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]) + bias,),
                         lambda a, t: (np.cos(a[0]) * t[0],), name="sin")


def test_atol_zero_is_zero_in_a_check():
    x = np.linspace(-1, 1, 5)
    report = gradcheck.check(_sin(), x, backend="numpy", atol=0, rtol=0)
    for r in report:
        if r.allowed is not None:
            assert r.allowed == 0.0
            assert r.status is (gradcheck.Status.PASSED if r.discrepancy == 0
                                else gradcheck.Status.FAILED)


def test_explicit_tolerances_are_not_scaled_by_size():
    for n in (3, 300):
        x = np.linspace(-1, 1, n)
        report = gradcheck.check(_sin(), x, backend="numpy", atol=1e-3, rtol=1e-2)
        for r in report:
            if r.kind in ("vjp", "jvp"):
                assert r.allowed == pytest.approx(1e-3 + 1e-2 * abs(r.expected), rel=1e-15)


def test_a_loose_explicit_tolerance_lets_a_small_error_pass_and_a_tight_one_fails_it():
    x = np.linspace(-1, 1, 5)
    wrong = _sin(bias=1e-6)
    assert not gradcheck.check(wrong, x, backend="numpy").passed  # the model catches it
    assert gradcheck.check(wrong, x, backend="numpy", atol=1e-4).passed
    assert not gradcheck.check(wrong, x, backend="numpy", atol=1e-9).passed


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_invalid_tolerances_are_rejected(bad):
    with pytest.raises(gradcheck.InvalidArgument, match="atol"):
        gradcheck.check(_sin(), np.ones(2), backend="numpy", atol=bad)
