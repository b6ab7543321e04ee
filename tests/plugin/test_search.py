"""The Hypothesis search of an op's domain: inputs stay in the sampler's box, a correct op
passes, a rule that is wrong only in part of the domain is found."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from gradcheck import NumpyFunction
from gradcheck.engines.numpy.backend import NumpyBackend
from gradcheck.harness.plan import Planned
from gradcheck.harness.runner import Case
from gradcheck.plugin.search import domain_box, search_case, strategy
from gradcheck.reference.numpy import get_op

# search_case reads the gradcheck-<profile> Hypothesis profiles, which the gradcheck plugin (the
# root conftest.py, or its pytest11 entry point) registers when pytest starts.


def test_domain_box_covers_the_sampler():
    (box,) = domain_box("log")
    assert 0.2 <= box[0] < 0.3 and 4.9 < box[1] <= 5.0 and box[2] == 0.0
    assert [b[2] >= 0.5 for b in domain_box("atan2")] == [True, True]  # kept off the origin


@settings(max_examples=20, deadline=None)
@given(strategy(Case("numpy", "cpu", "float64", "arcsin")))
def test_strategy_draws_inside_the_box(inputs):
    (x,) = inputs
    (lo, hi, _), = domain_box("arcsin")
    assert x.shape == (3, 4) and np.all((x >= lo) & (x <= hi))


def test_search_passes_a_correct_op():
    search_case(Planned(Case("numpy", "cpu", "float64", "atan2"), "search"), "ci")


def test_search_finds_a_rule_wrong_only_for_large_inputs(monkeypatch):
    ref = get_op("sin")

    def vjp(args, cts):
        (x,) = args
        return [cts[0] * np.cos(x) * np.where(x > 2.5, 1.001, 1.0)]

    buggy = NumpyFunction(ref.forward, vjp, ref.jvp, name="sin_wrong_above_2.5")
    monkeypatch.setattr(NumpyBackend, "op", lambda self, name: buggy)
    with pytest.raises(AssertionError, match="search of numpy-cpu-float64-sin found"):
        search_case(Planned(Case("numpy", "cpu", "float64", "sin"), "search"), "thorough")


def test_search_keeps_values_one_roundoff_above_the_subnormal_range():
    """cos at x = tiny(float32): its gradient -sin(x) * v is subnormal in float32 for any
    |v| < 1, which XLA on CPU flushes to 0 (the thorough run's jax-cpu-float32-cos search
    failed there, 0 vs 2.8e-38); the search rejects such inputs, keeps values one unit
    roundoff above the subnormal range and leaves float64 alone there."""
    from gradcheck.harness.plan import in_rounding_range
    from gradcheck.plugin.search import _in_model_range

    tiny32 = np.full((3, 4), float(np.finfo(np.float32).tiny))
    assert in_rounding_range("cos", (tiny32,), "float32")  # normal numbers: a special point may
    assert not _in_model_range("cos", (tiny32,), "float32")
    assert _in_model_range("cos", (tiny32,), "float64")
    assert _in_model_range("cos", (np.full((3, 4), 1e-30),), "float32")  # >= tiny / eps
    assert not _in_model_range("exp", (np.full((3, 4), -100.0),), "float32")  # output 3.7e-44
    assert _in_model_range("exp", (np.full((3, 4), -100.0),), "float64")
