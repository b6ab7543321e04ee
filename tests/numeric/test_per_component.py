"""The per-component stage's trigger: the range of the finite nonzero magnitudes."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.numeric import per_component


def _concatenated(arrays):
    """The definition: every ``|a|`` concatenated, the finite nonzero ones kept."""
    flat = np.concatenate([np.abs(np.asarray(a, dtype=np.float64)).ravel() for a in arrays]
                          or [np.zeros(0)])
    kept = flat[np.isfinite(flat) & (flat > 0)]
    return None if not kept.size else (float(kept.min()), float(kept.max()))


_RNG = np.random.default_rng(0)


@pytest.mark.parametrize("arrays", [
    [], [np.zeros(3)], [np.array(np.nan)], [np.array(2.0)], [np.zeros((0, 4))],
    [_RNG.standard_normal((3, 4)), np.array([0.0, np.inf, -1e-70])],
    [np.array([np.nan, 1e70]), np.zeros(0)], [np.array([-np.inf]), np.array([3.0, 0.0])],
    [_RNG.standard_normal(10) * 1e30, _RNG.standard_normal(5) * 1e-30],
    [np.array([5e-324, -1.0]), np.array([np.nan, np.nan])],
])
def test_the_range_is_that_of_the_finite_nonzero_magnitudes(arrays):
    assert per_component._range(arrays) == _concatenated(arrays)


def test_extreme_names_the_range_that_calls_for_the_scaled_checks():
    assert per_component.extreme([np.array([1.0, -3.0]), np.array([0.0, np.inf])]) is None
    assert "below 2^-64" in per_component.extreme([np.array([1e-30, 0.0, 1.0])])
    assert "above 2^64" in per_component.extreme([np.array([np.nan, 1e30])])
    assert "more than 2^26 apart" in per_component.extreme([np.array([1e-9]), np.array([1e9])])
    assert per_component.extreme([np.zeros(4), np.array([np.nan])]) is None
