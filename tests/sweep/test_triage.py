"""The triage's votes on a finding about one output component (the sweep's ``scaled`` check):
a projected source (``<v, J u>``, a sum over every component) votes on it only where it
resolves that component's discrepancy; below its resolution its agreement with reverse mode
says nothing, and the finding is not called a false alarm on its word (torch's ``nextafter``
at a tie: 0 for a component of 1.8e-111 beside components of 1e-16)."""

from __future__ import annotations

import dataclasses

from gradcheck.core.results import CheckResult, Status
from gradcheck.sweep.triage import classify

#: projected FD evidence: AD and FD agree to 1e-12 on a value of about 1e-16
PROJECTED = {"fd": {"fd_families_agree": True, "ad": -8.68e-16, "fd_pow2": -8.68e-16,
                    "ad_vs_fd": 1e-12}}


def _scaled(actual: float, expected: float) -> CheckResult:
    return CheckResult(kind="vjp", status=Status.FAILED, backend="torch", dtype="float64",
                       name="twin.op", order=1, actual=actual, expected=expected,
                       discrepancy=abs(actual - expected),
                       details={"sweep": {"oracle": "scaled"}})


def _check(status: Status, allowed: float) -> CheckResult:
    return CheckResult(kind="vjp", status=status, backend="torch", dtype="float64",
                       name="twin.op", order=1, allowed=allowed,
                       details={"sweep": {"oracle": "check"}})


def test_a_component_below_the_projected_resolution_is_not_a_false_alarm():
    tiny = _scaled(0.0, 1.8e-111)
    assert classify(tiny, PROJECTED, []) == "unresolved"
    # a passed projected check that allows 1e-20 could not have seen it either
    assert classify(tiny, PROJECTED, [tiny, _check(Status.PASSED, 1e-20)]) == "unresolved"


def test_a_component_the_projection_resolves_is_still_judged_by_it():
    """The same evidence decides a discrepancy it can see: right (a false alarm of the
    scaled check) or, where it disagrees itself, wrong."""
    visible = _scaled(1.0e-16, 1.2e-16)
    assert classify(visible, PROJECTED, []) == "false_alarm"
    assert classify(visible, PROJECTED, [visible, _check(Status.PASSED, 1e-20)]) == \
        "false_alarm"
    wrong = {"fd": {**PROJECTED["fd"], "ad_vs_fd": 1e-3}}
    assert classify(_scaled(0.0, 1.8e-111), wrong, []) == "confirmed"


def test_a_failed_projected_check_votes_whatever_the_component():
    """A failure of the projected check beside the component finding still says the reverse
    mode is wrong (it saw a discrepancy, whichever component it came from)."""
    tiny = _scaled(0.0, 1.8e-111)
    assert classify(tiny, {}, [tiny, _check(Status.FAILED, 1e-20)]) == "confirmed"


def test_forward_mode_is_blamed_only_beside_a_reverse_mode_that_saw_the_component():
    """A scaled JVP finding at a tiny component beside a reverse mode that passed: the
    scaled check's own VJP judged the same components, so forward mode is the wrong side; a
    projected check that allows 1e-20 says nothing about a component of 1e-111."""
    jvp = CheckResult(kind="jvp", status=Status.FAILED, backend="torch", dtype="float64",
                      name="twin.op", order=1, actual=0.0, expected=1.8e-111,
                      discrepancy=1.8e-111, details={"sweep": {"oracle": "scaled"}})
    scaled_vjp = CheckResult(kind="vjp", status=Status.PASSED, backend="torch",
                             dtype="float64", name="twin.op", order=1, allowed=1e-125,
                             details={"sweep": {"oracle": "scaled"}})
    assert classify(jvp, PROJECTED, [jvp, _check(Status.PASSED, 1e-20)]) == "unresolved"
    assert classify(jvp, PROJECTED, [jvp, scaled_vjp]) == "confirmed"


def test_mpmath_right_where_it_judged_does_not_cover_a_nan_it_could_not_judge():
    """lgamma' at a subnormal: the true value overflows, mpmath cannot evaluate it, torch
    gives nan; mpmath's agreement at the other elements says nothing about that one."""
    nan_finding = CheckResult(kind="vjp", status=Status.FAILED, backend="torch",
                              dtype="float64", name="twin.lgamma", order=1,
                              actual=float("nan"), expected=-1.1)
    mp = {"order": 1, "max_relative_error": 0.0, "forward_matches": True, "elements": 60}
    assert classify(nan_finding, {"mpmath": {**mp, "unjudged_nonfinite": 2}}, []) == \
        "unresolved"
    assert classify(nan_finding, {"mpmath": {**mp, "unjudged_nonfinite": 0}}, []) == \
        "false_alarm"
    wrong = {**mp, "max_relative_error": 0.5, "unjudged_nonfinite": 2}
    assert classify(nan_finding, {"mpmath": wrong}, []) == "confirmed"


def test_a_passed_check_says_nothing_about_a_nan_it_did_not_judge():
    """A check fails every non-finite value it judges; one that passed beside a nan finding
    never saw the nan (torch.hypot at 1.6e308: the scaled check passed the finite components),
    so it is no vote that the nan is right."""
    nan = CheckResult(kind="vjp", status=Status.FAILED, backend="torch", dtype="float64",
                      name="twin.hypot", order=1, actual=float("nan"), expected=6.9,
                      details={"sweep": {"oracle": "check"}})
    scaled_pass = CheckResult(kind="vjp", status=Status.PASSED, backend="torch",
                              dtype="float64", name="twin.hypot", order=1, allowed=1e-15,
                              details={"sweep": {"oracle": "scaled"}})
    assert classify(nan, {}, [nan, scaled_pass]) == "unresolved"
    finite = CheckResult(kind="vjp", status=Status.FAILED, backend="torch", dtype="float64",
                         name="twin.hypot", order=1, actual=6.0, expected=6.9,
                         details={"sweep": {"oracle": "check"}})
    assert classify(finite, {}, [finite, scaled_pass]) == "false_alarm"


def test_a_failure_gradcheck_check_labels_rounding_level_is_classed_so():
    """gradcheck.check labels a failure within 1600 eps of its comparison's scale as at the
    rounding level (multi_head_attention_forward's second derivative: 1.9e-12 on terms of
    2e-12 beside a scale of 1.6e3); the triage keeps that label rather than calling the
    evidence's agreement a false alarm."""
    r = CheckResult(kind="vjp_of_vjp", status=Status.FAILED, backend="torch", dtype="float64",
                    name="twin.mha", order=2, actual=-4.0e-13, expected=1.5e-12,
                    details={"sweep": {"oracle": "check"}, "rounding_level": 4.4e-12})
    agree = {"fd": {**PROJECTED["fd"], "ad": -1645.15, "fd_pow2": -1645.15}}
    assert classify(r, agree, []) == "rounding_level"
    unlabelled = CheckResult(kind="vjp_of_vjp", status=Status.FAILED, backend="torch",
                             dtype="float64", name="twin.mha", order=2, actual=-4.0e-13,
                             expected=1.5e-12, details={"sweep": {"oracle": "check"}})
    assert classify(unlabelled, agree, []) == "false_alarm"


def _jvp_of_jvp() -> CheckResult:
    return CheckResult(kind="jvp_of_jvp", status=Status.FAILED, backend="jax",
                       dtype="float64", name="twin.log1p", order=2, actual=1.24e12,
                       expected=-1.8e5, details={"sweep": {"oracle": "check"}})


def _passed_vjp_of_vjp() -> CheckResult:
    return CheckResult(kind="vjp_of_vjp", status=Status.PASSED, backend="jax",
                       dtype="float64", name="twin.log1p", order=2, allowed=1e-6,
                       details={"sweep": {"oracle": "check"}})


def test_a_forward_path_that_gives_what_reverse_mode_gives_shares_its_verdict():
    """jax's log1p at -1 + 1e-6: gradcheck.check's steps cross the pole and fail forward over
    forward beside a passing reverse over reverse; along the evidence's direction both give
    the same value, which mpmath finds exact, so the forward finding is the oracle's false
    alarm, not the path's bug (before: confirmed)."""
    fd = {"fd_families_agree": False, "ad": 9.498454377737818e9, "one_sided_gap": 0.11,
          "ad_fwd_fwd": 9.498454377737818e9, "fwd_fwd_vs_fd": 0.67}
    exact = {"order": 2, "max_relative_error": 1.5e-16, "forward_matches": True}
    siblings = [_jvp_of_jvp(), _passed_vjp_of_vjp()]
    assert classify(_jvp_of_jvp(), {"fd": fd, "mpmath": exact}, siblings) == "false_alarm"
    # no word on reverse mode: the failure is not shown to be the forward path's
    assert classify(_jvp_of_jvp(), {"fd": fd}, siblings) == "unresolved"
    # reverse mode wrong (mpmath, no kink on the direction), forward equal to it: wrong too
    wrong = {**exact, "max_relative_error": 0.3}
    smooth = {**fd, "one_sided_gap": 0.0}
    assert classify(_jvp_of_jvp(), {"fd": smooth, "mpmath": wrong}, siblings) == "confirmed"


def test_a_forward_path_that_differs_from_reverse_mode_is_judged_by_the_fd():
    """torch's cholesky_inverse: forward mode differs from reverse mode and from a resolved
    FD (pytorch#196682); a forward path that differs from reverse mode but matches the FD is
    the right one."""
    base = {"fd_families_agree": True, "ad": -0.00636350912, "fd_pow2": -0.00636350914,
            "ad_vs_fd": 1e-9, "one_sided_gap": 1e-7, "linearity_gap": 1e-9}
    jvp = CheckResult(kind="jvp", status=Status.FAILED, backend="torch", dtype="float64",
                      name="twin.cholesky_inverse", order=1, actual=-0.5, expected=-0.34,
                      details={"sweep": {"oracle": "check"}})
    off = {**base, "ad_fwd": -0.0049, "fwd_vs_fd": 0.23, "fwd_vs_fine": 0.23}
    assert classify(jvp, {"fd": off}, [jvp]) == "confirmed"
    on = {**base, "ad_fwd": -0.0063635091, "fwd_vs_fd": 3e-10, "fwd_vs_fine": 1e-8}
    on["ad"] = 0.1  # reverse mode off along this direction, forward on the FD
    assert classify(jvp, {"fd": on}, [jvp]) == "false_alarm"


def test_reclassifying_marks_results_with_the_known_entries_added_since():
    """A stream written before an entry existed is summarised as a new run would be: its
    failed result of torch's hardsigmoid is known, and is no finding."""
    from gradcheck.sweep.triage import findings, reclassified

    r = CheckResult(kind="vjp", status=Status.FAILED, backend="torch", dtype="float64",
                    name="torch.nn.functional.hardsigmoid", order=1, actual=0.75,
                    expected=0.7499999776, test_id="sweep:t",
                    details={"sweep": {"oracle": "check", "point": "unit"},
                             "triage": {"class": "confirmed", "key": "k", "evidence": {}}})
    (again,) = reclassified([r])
    assert again.known and "float32 rounding of 1/6" in again.details["known"]
    assert findings([r]) == []
    twin = dataclasses.replace(r, name="twin.hardsigmoid")  # no entry: still a finding
    assert not reclassified([twin])[0].known and len(findings([twin])) == 1
