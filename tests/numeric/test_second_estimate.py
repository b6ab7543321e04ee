"""The oracle estimates again with 2^-8 smaller steps before a check fails or abstains.

A failing comparison or a kink seen with the table's steps is re-estimated along the same
directions with every step 2^-8 times smaller (``gradcheck/numeric/second_estimate.py``).
The small-step estimate can only vindicate the backend:

* when it agrees with the first estimate within their errors, the verdict stands (a wrong rule
  is still failed, with the confirmation in ``details["oracle"]``);
* when the first estimate was off (a staircase such as ``fmod``, whose large steps see its
  average slope) or saw a kink that is only near ``x`` (a max-like logsumexp at 1e4), and
  every AD value agrees with the small-step estimate, the check passes;
* otherwise the first verdict stands: a kink at ``x`` stays inconclusive, and a small-step
  estimate that is itself too coarse (logsumexp at 3e4) never turns an abstention into a
  failure.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import NumpyFunction
from gradcheck.oracle.error_model import ErrorModel

A = -26.0
# a / b half-way between two integers: the nearest jump of fmod(a, b) in b is ~3e-3 away,
# outside the confirmation's steps (<= 5e-4) but inside the table's (0.125 .. 0.002)
B = A / (np.arange(-70, -60) + 0.5)


def _fmod(delta: float = 0.0) -> NumpyFunction:
    return NumpyFunction(lambda b: np.fmod(A, b),
                         lambda args, c: [c[0] * -np.trunc(A / args[0]) * (1 + delta)],
                         name="fmod_b")


def _only(report: gradcheck.Report, kind: str = "vjp") -> gradcheck.CheckResult:
    (r,) = [r for r in report if r.kind == kind]
    return r


# the screen's split (docs/error-model.md 2d) judges a staircase's elements at steps that
# cross no jump before the full check runs; with a floor no estimate meets, its elements below
# the screen's steps never pass, and the full check (and its second estimate) judges
NO_SPLIT = ErrorModel(split_floor=1e-300)


def test_a_staircase_is_judged_with_the_small_steps() -> None:
    r = _only(gradcheck.check(_fmod(), B, backend="numpy", modes="rev", error_model=NO_SPLIT))
    assert r.status is gradcheck.Status.PASSED, r.message
    assert "judged with those" in r.details["oracle"]


def test_a_staircase_passes_by_the_screens_split() -> None:
    r = _only(gradcheck.check(_fmod(), B, backend="numpy", modes="rev"))
    assert r.status is gradcheck.Status.PASSED, r.message
    assert "level 1" in r.details["screen_split"]


@pytest.mark.parametrize("delta", [1e-3, 1e-6])
def test_a_wrong_rule_on_a_staircase_is_not_vindicated(delta: float) -> None:
    """The wrong rule disagrees with the small steps too: the first verdict (the large steps
    saw jumps as a kink) stands, an abstention, never a pass."""
    r = _only(gradcheck.check(_fmod(delta), B, backend="numpy", modes="rev",
                              error_model=NO_SPLIT))
    assert r.status is gradcheck.Status.INCONCLUSIVE
    assert "oracle" not in r.details


@pytest.mark.parametrize("delta", [1e-3, 1e-6])
def test_a_wrong_rule_on_a_staircase_is_failed_by_the_split(delta: float) -> None:
    """With the split, the elements whose screen steps cross no jump are judged on their own:
    the wrong rule is failed there, confirmed at smaller steps, and every element named."""
    r = _only(gradcheck.check(_fmod(delta), B, backend="numpy", modes="rev"))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["failure_path"] == "projected"
    assert r.elements_over == len(B)


def test_a_wrong_rule_on_a_smooth_function_is_confirmed_and_failed() -> None:
    x = np.random.default_rng(0).standard_normal(20)
    f = NumpyFunction(np.sin, lambda a, c: [c[0] * np.cos(a[0]) * (1 + 1e-7)], name="sin")
    # the full path (the projected failing path turned off by an unreachable margin)
    full = gradcheck.ErrorModel(projected_failure_margin=1e300)
    r = _only(gradcheck.check(f, x, backend="numpy", modes="rev", error_model=full))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["oracle"].startswith("confirmed: the steps")
    # by default the failure is clear: confirmed by projected estimates (numeric/
    # projected_failure.py), with the same verdict
    r = _only(gradcheck.check(f, x, backend="numpy", modes="rev"))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["failure_path"] == "projected"


def _logsumexp(delta: float = 0.0) -> NumpyFunction:
    def f(x):
        m = np.max(x)
        return np.log(np.sum(np.exp(x - m))) + m

    return NumpyFunction(f, lambda a, c: [c[0] * np.exp(a[0] - f(a[0])) * (1 + delta)],
                         name="logsumexp")


def test_a_kink_seen_only_by_large_steps_is_not_an_abstention() -> None:
    """logsumexp of two inputs at 1e4: the table's steps (16 .. 2e3, retries included) see a
    max-like kink; the second estimate's (0.06 .. 8) see the smooth function, and the rule
    agrees with them."""
    r = _only(gradcheck.check(_logsumexp(), np.full(2, 1e4), backend="numpy", modes="rev"))
    assert r.status is gradcheck.Status.PASSED, r.message
    assert "saw a kink" in r.details["oracle"]


@pytest.mark.parametrize("x0", [1e4, 2e4])
def test_a_plateau_of_the_large_steps_is_retried_by_the_first_estimate(x0: float) -> None:
    """logsumexp of eight inputs: the central differences at the largest steps agree with each
    other on a wrong value (the max-like regime).  The smaller steps of the same table move
    away from it, so the entries' error estimates say so, the elements are retried with
    smaller steps, and the first estimate is the derivative: the rule passes, a (1 + 1e-7)
    mutant fails.  (At 2e4 the mutant was passed before: the second estimate vindicated it
    with an error estimate of 6e-7.)"""
    x = np.full(8, x0)
    r = _only(gradcheck.check(_logsumexp(), x, backend="numpy", modes="rev"))
    assert r.status is gradcheck.Status.PASSED, r.message
    assert "oracle" not in r.details
    bad = _only(gradcheck.check(_logsumexp(1e-7), x, backend="numpy", modes="rev"))
    assert bad.status is gradcheck.Status.FAILED, bad.message


@pytest.mark.parametrize("delta", [0.0, 1e-7])
def test_a_coarse_small_step_estimate_never_decides_a_check(delta: float) -> None:
    """At 3e4 the second estimate's steps (0.1 .. 16) are still too coarse: its value is off by
    7e-3 and its error estimate says so.  A wide estimate agrees with a wrong rule as readily
    as with the right one, so it may not vindicate: the check stays inconclusive, as the first
    estimate said, for the rule and for a (1 + 1e-7) mutant alike; it never fails."""
    r = _only(gradcheck.check(_logsumexp(delta), np.full(8, 3e4), backend="numpy", modes="rev"))
    assert r.status is gradcheck.Status.INCONCLUSIVE, r.message


def test_a_kink_at_the_point_stays_inconclusive() -> None:
    relu = NumpyFunction(lambda x: np.maximum(x, 0.0), lambda a, c: [c[0] * (a[0] > 0)],
                         name="relu")
    # every element at the kink (with others, the kinks are left out: numeric/kinks.py)
    r = _only(gradcheck.check(relu, np.zeros(3), backend="numpy", modes="rev"))
    assert r.status is gradcheck.Status.INCONCLUSIVE
    assert "left derivative" in r.message


def _round3(bias: float = 0.0) -> NumpyFunction:
    """``round(x, 3)``, a staircase of 1e-3 steps; its rule is 0 (plus ``bias``: a wrong one)."""
    return NumpyFunction(lambda x: np.round(x, 3), lambda a, c: [c[0] * 0.0 + c[0] * bias],
                         name="round3")


X_ROUND = np.random.default_rng(11).uniform(-9.0, 9.0, 20)


def test_estimates_that_contradict_each_other_make_a_staircase_inconclusive() -> None:
    """The large steps (0.008 .. 0.5) see the staircase's mean slope 1 with error estimates
    down to 1e-13; the small ones (3e-5 .. 2e-3) see 0 where they cross no jump and a wide
    spread where they do.  Where the two contradict each other beyond both error estimates,
    the large steps' error model does not hold, so their verdict (a failure of the right rule,
    OpInfo round.decimals_3[0]) is not given: the check is inconclusive."""
    r = _only(gradcheck.check(_round3(), X_ROUND, backend="numpy", modes="rev"))
    assert r.status is gradcheck.Status.INCONCLUSIVE, r.message
    assert "contradict each other" in r.message


@pytest.mark.parametrize("bias", [1e-3, 1.0])
def test_a_staircase_never_passes_a_wrong_rule(bias: float) -> None:
    """A wrong rule is never passed there: 1e-3 is within the small steps' wide estimate
    (inconclusive), and the mean slope 1 is what the large steps see (the contradiction
    still holds: inconclusive too, not a pass)."""
    r = _only(gradcheck.check(_round3(bias), X_ROUND, backend="numpy", modes="rev"))
    assert r.status is not gradcheck.Status.PASSED, r.message
