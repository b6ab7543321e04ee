"""The verdict on non-finite AD values (``numeric/judge.py``, docs/error-model.md class e): a
non-finite value fails only against a value known to be finite, never against an estimate
that does not bound the derivative, and two equal non-finite values decide nothing.  Mutant
pairs through ``check`` at the points that exposed it: a reciprocal at 1e-300 (its derivative,
-1e600, is beyond float64: -inf is its rounding) and ``torch.addcdiv`` at a divisor of 3e-300
(its reverse mode is -inf where the derivative is -5.6e298; its forward mode is right)."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.core.results import Status
from gradcheck.core.taxonomy import CheckKind
from gradcheck.numeric.judge import AllowanceModel, Comparison, judge

torch = pytest.importorskip("torch")

INF, NAN = float("inf"), float("nan")


def _one(kind: CheckKind, actual: float, expected: float, fd_error: float,
         terms: float = 1.0) -> Status:
    c = Comparison(kind, np.array([actual]), np.array([expected]), np.array([fd_error]),
                   np.array([terms]), "float64")
    return judge(c, AllowanceModel()).status


@pytest.mark.parametrize("actual", [INF, -INF, NAN])
def test_a_non_finite_value_fails_against_an_estimate_that_bounds_itself(actual):
    assert _one(CheckKind.VJP, actual, 3.3e307, 1e295) is Status.FAILED
    assert _one(CheckKind.VJP, actual, 0.0, 0.0) is Status.FAILED  # exactly flat: known


@pytest.mark.parametrize("actual", [INF, -INF, NAN])
def test_a_non_finite_value_is_not_decided_against_an_estimate_that_does_not(actual):
    # the FD error above 1% of its value: the derivative may be beyond float64 (and a NaN
    # projection with infinite terms is inf - inf, not a NaN in the derivative)
    assert _one(CheckKind.VJP, actual, 5.99, 9e299, terms=INF) is Status.INCONCLUSIVE
    assert _one(CheckKind.VJP, actual, 0.0, 2.4, terms=INF) is Status.INCONCLUSIVE


def test_a_nan_in_the_derivative_itself_fails_against_any_finite_estimate():
    assert _one(CheckKind.VJP, NAN, 5.99, 9e299, terms=2.0) is Status.FAILED
    assert _one(CheckKind.VJP, NAN, 5.99, 9e299, terms=NAN) is Status.FAILED
    assert _one(CheckKind.VJP, INF, 5.99, 9e299, terms=2.0) is Status.INCONCLUSIVE


def test_two_ad_values_equal_and_infinite_decide_nothing_different_ones_fail():
    assert _one(CheckKind.FWD_REV, -INF, -INF, 0.0) is Status.INCONCLUSIVE
    assert _one(CheckKind.FWD_REV, NAN, NAN, 0.0, terms=INF) is Status.INCONCLUSIVE
    # both paths NaN of finite terms: a NaN in the derivative itself (jax's cumlogsumexp at
    # leading -inf entries), a failure whatever the other path says
    assert _one(CheckKind.FWD_REV, NAN, NAN, 0.0, terms=7.33) is Status.FAILED
    assert _one(CheckKind.FWD_REV, INF, -INF, 0.0) is Status.FAILED
    assert _one(CheckKind.FWD_REV, NAN, INF, 0.0) is Status.FAILED
    assert _one(CheckKind.FWD_REV, INF, 8.8e297, 0.0) is Status.FAILED  # one path finite


def test_a_finite_failure_on_another_probe_is_reported_over_an_undecided_one():
    c = Comparison(CheckKind.VJP, np.array([-INF, 1.1]), np.array([5.99, 1.0]),
                   np.array([9e299, 1e-12]), np.array([1.0, 1.0]), "float64")
    v = judge(c, AllowanceModel())
    assert v.status is Status.FAILED and v.probe == 1


def _statuses(rep: gradcheck.Report, kind: str) -> set[str]:
    return {r.status.value for r in rep.results if r.kind.value == kind}


def test_a_derivative_beyond_float64_is_not_a_failure():
    """1/x at 1e-300: -inf is the rounding of -1e600; a/b at b = 3e-300 likewise (-3e598),
    through the scaled per-component check too."""
    rep = gradcheck.check(lambda x: 1 / x, np.array([1e-300]), backend="torch")
    assert not any(r.status is Status.FAILED for r in rep.results)
    assert "not decided" in next(r for r in rep.results if r.kind.value == "vjp").message
    # -inf and +inf entries projected together: NaN, inf - inf
    rep = gradcheck.check(lambda x: 1 / x, np.array([1e-300, 2.0, -3e-300]), backend="torch")
    assert not any(r.status is Status.FAILED for r in rep.results)
    rep = gradcheck.check(lambda a, b: a / b, np.array([0.3]), np.array([3e-300]),
                          backend="torch")
    assert not any(r.status is Status.FAILED for r in rep.results)


def test_a_reverse_mode_inf_at_a_tiny_divisor_fails_and_the_right_forward_mode_passes():
    """torch.addcdiv's reverse mode (tensor2**2 underflows: docs/upstream T3) against its
    twin written out, a + 0.5 b / c: the mutant's VJP fails against the estimate scaled per
    element, its JVP (right) passes with it, and the twin passes."""
    args = (np.array([0.3]), np.array([1e-300]), np.array([3e-300]))
    bad = gradcheck.check(lambda a, b, c: torch.addcdiv(a, b, c, value=0.5), *args,
                          backend="torch")
    assert "failed" in _statuses(bad, "vjp")
    assert _statuses(bad, "jvp") == {"passed"}
    assert "failed" in _statuses(bad, "fwd_rev")
    good = gradcheck.check(lambda a, b, c: a + 0.5 * b / c, *args, backend="torch")
    assert good.passed and not any(r.status is Status.FAILED for r in good.results)
