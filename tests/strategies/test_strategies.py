"""``gradcheck.strategies``: arrays for the user's own @given gradient tests.  The values stay
in range, representable and away from declared kinks; a @given test finds a mutant's bug (one
that shows only at the catalog's special values too) and passes the correct op."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import gradcheck
from gradcheck import GradientMismatch, NumpyFunction
from gradcheck import strategies as gst

SETTINGS = settings(max_examples=40, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(gst.arrays(gst.shapes(max_dims=2), "float32", min_value=-3.0, max_value=3.0,
                  avoid=[0.0, 1.0]))
def test_values_are_in_range_representable_and_away_from_the_kinks(x):
    assert x.dtype == np.float32 and np.all(np.isfinite(x))
    assert np.all((x >= -3.0) & (x <= 3.0))
    assert np.all(np.abs(x) >= 0.125) and np.all(np.abs(x - 1.0) >= 0.125)  # fd_h0_factor


def test_special_values_come_from_the_catalogs_bands():
    pool = gst.special_values("float64", min_value=-4, max_value=4)
    assert {0.0, 1.0, -1.0, 2.0, -3.0, 0.625, -0.375} <= set(pool)  # zero, integers, ties
    assert any(0 < abs(v - 1.0) < 1e-10 for v in pool)  # next to an integer
    assert any(0 < abs(v - 0.5) < 1e-10 for v in pool)  # next to a half-integer
    assert 0.0 not in gst.special_values(avoid=[0.0], margin=1e-3)
    with pytest.raises(gradcheck.InvalidArgument, match="bands='nope' is not valid"):
        gst.special_values(bands=["nope"])
    with pytest.raises(gradcheck.InvalidArgument, match="leaves nothing"):
        gst.elements(min_value=-0.1, max_value=0.1, avoid=[0.0])


def _relu(scale_on_0_1: float) -> NumpyFunction:
    """relu; the mutant's backward is off by ``scale_on_0_1`` on (0, 1) only."""
    def vjp(a, c):
        x = a[0]
        return (c[0] * (x > 0) * np.where(x < 1, scale_on_0_1, 1.0),)
    return NumpyFunction(lambda x: np.maximum(x, 0.0), vjp, name="relu")


def _sin(wrong_at_integers: float) -> NumpyFunction:
    """sin; the mutant's backward is off only where x is an integer (a special value)."""
    def vjp(a, c):
        x = a[0]
        return (c[0] * np.cos(x) * np.where(x == np.round(x), wrong_at_integers, 1.0),)
    return NumpyFunction(np.sin, vjp, name="sin")


def _given_test(op: NumpyFunction, **kw):
    @SETTINGS
    @given(gst.arrays((3,), "float64", **kw))
    def test(x):
        gradcheck.assert_gradients(op, x, backend="numpy", modes=("rev",))
    return test


@pytest.mark.parametrize("make, kw", [(_relu, {"avoid": [0.0]}), (_sin, {})],
                         ids=["kink avoided", "bug at special values"])
def test_a_given_test_finds_the_mutant_and_passes_the_correct_op(make, kw):
    _given_test(make(1.0), **kw)()  # the correct op: every example decided and passed
    with pytest.raises(GradientMismatch):
        _given_test(make(1.01), **kw)()
