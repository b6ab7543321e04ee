"""CheckResult JSON round trip and Report semantics."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

import gradcheck
from gradcheck import CheckResult, Report, Status, WorstElement
from gradcheck.core.results import KnownMark


def _result(**kw) -> CheckResult:
    base = dict(
        kind="vjp", status=Status.FAILED, backend="torch", device="cpu", dtype="float32",
        name="f", input_index=1, output_index=0, expected=1.5, actual=float("inf"),
        discrepancy=float("inf"), relative_discrepancy=float("nan"), allowed=1e-12,
        allowed_source="10 x FD error ...", discrepancy_ratio=float("-inf"), message="m",
        seed=7, shapes=((3, 4), (4,)),
        worst=(WorstElement((0, 1, 2), float("nan"), -2.0, 1e-9),),
        reproducer="gradcheck.check(...)", convergence=((0.125, 1.0), (0.0625, 1.1)),
        details={"probe": 1, "noise": float("inf"), "nested": {"x": [1.0, float("nan")]}},
        test_id="tests/x.py::t", duration_s=0.25,
    )
    base.update(kw)
    return CheckResult(**base)


def _same(a, b) -> bool:
    """Equality where nan equals nan, recursively."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return _same(dataclasses.asdict(a), dataclasses.asdict(b))
    return a == b


def test_round_trip_with_inf_and_nan():
    r = _result()
    line = r.to_json()
    assert "\n" not in line
    data = json.loads(line)  # strict JSON: no bare Infinity/NaN tokens
    assert data["record"] == "check" and data["schema"] == 1
    assert data["actual"] == "inf" and data["relative_discrepancy"] == "nan"
    back = CheckResult.from_json(line)
    assert isinstance(back.status, Status) and back.status is Status.FAILED
    assert isinstance(back.worst[0], WorstElement) and back.shapes == ((3, 4), (4,))
    for f in dataclasses.fields(CheckResult):
        assert _same(getattr(back, f.name), getattr(r, f.name)), f.name


def test_json_is_strict_even_without_the_encoder_helpers():
    line = _result().to_json()
    json.loads(line, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


def test_every_status_round_trips():
    for s in Status:
        assert CheckResult.from_json(_result(status=s).to_json()).status is s


def test_malformed_lines_are_rejected():
    with pytest.raises(ValueError):
        CheckResult.from_json('{"record": "something else"}')
    with pytest.raises(ValueError):
        CheckResult.from_json("[1, 2]")


def test_results_of_a_real_check_round_trip():
    f = gradcheck.NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]),),
                                lambda a, t: (np.cos(a[0]) * t[0],), name="sin")
    report = gradcheck.check(f, np.linspace(-1, 1, 4).astype(np.float32), backend="numpy")
    lines = report.to_jsonl().splitlines()
    assert len(lines) == len(report)
    for line, r in zip(lines, report, strict=True):
        assert _same(CheckResult.from_json(line), r)


@pytest.mark.parametrize("status,ok", [
    (Status.PASSED, True), (Status.INCONCLUSIVE, True), (Status.SKIPPED, True),
    (Status.FAILED, False), (Status.ERROR, False),
])
def test_report_passed_semantics(status, ok):
    report = Report([_result(status=Status.PASSED), _result(status=status)])
    assert report.passed is ok
    assert [r.status for r in report.failures] == ([] if ok else [status])
    assert bool(report) is True  # a failing report is still a (truthy) object


@pytest.mark.parametrize("statuses", [(), (Status.INCONCLUSIVE,), (Status.SKIPPED,),
                                      (Status.INCONCLUSIVE, Status.SKIPPED)])
def test_a_report_that_decided_nothing_is_not_passed(statuses):
    # one rule with assert_gradients' NothingDecided: nothing wrong shown is not a pass
    report = Report([_result(status=s) for s in statuses])
    assert report.passed is False and report.decided == [] and report.failures == []


def test_report_counts_and_summary():
    report = Report([_result(status=Status.PASSED), _result(status=Status.PASSED),
                     _result(status=Status.INCONCLUSIVE), _result(status=Status.ERROR)])
    assert report.counts()["passed"] == 2 and report.counts()["skipped"] == 0
    assert report.summary() == "4 checks: 2 passed, 1 inconclusive, 1 error (1 not decided)"
    assert Report().summary() == "0 checks: none"
    known = _result(status=Status.FAILED, known_as=KnownMark("the engine's kernel ..."))
    assert Report([_result(status=Status.PASSED), known]).summary() == (
        "2 checks: 1 passed, 1 failed (1 known)")


def test_subject_names_the_comparison():
    assert _result().subject == "VJP of output 0 w.r.t. input 1"
    second = _result(kind="vjp_of_vjp", input_index=0)
    assert second.subject == "VJP of VJP of output 0 w.r.t. input 0"
    assert _result(kind="call", input_index=None, output_index=None).subject == "call"


def test_results_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        _result().status = Status.PASSED  # type: ignore[misc]


# -- the taxonomy and the typed fields -----------------------------------------------------------


def test_kind_is_a_check_kind_that_compares_and_prints_as_its_string():
    r = _result(kind="vjp_of_vjp")
    assert r.kind is gradcheck.CheckKind.VJP_OF_VJP
    assert r.kind == "vjp_of_vjp" and f"{r.kind}" == "vjp_of_vjp" and str(r.kind) == "vjp_of_vjp"
    assert {"vjp_of_vjp": 1}[r.kind] == 1  # hashes as its string
    assert json.loads(r.to_json())["kind"] == "vjp_of_vjp"
    with pytest.raises(ValueError, match="'vjpp' is not a check kind; known: vjp, jvp"):
        _result(kind="vjpp")


def test_every_kind_has_its_info_and_the_suite_lists_come_from_it():
    from gradcheck.core import taxonomy
    from gradcheck.harness import plan

    assert set(taxonomy.INFO) == set(gradcheck.CheckKind)
    assert [k.value for k in plan.CHECKS] == [
        "vjp", "jvp", "fwd_rev", "eager_func", "rounding", "vjp_of_vjp", "jvp_of_vjp",
        "jvp_of_jvp", "reference", "cross_backend", "cross_device", "search"]
    assert {k for k in gradcheck.CheckKind if taxonomy.info(k).needs_jvp} == {
        "jvp", "fwd_rev", "jvp_of_vjp", "jvp_of_jvp"}
    assert taxonomy.SECOND_ORDER[("vjp", "jvp")] is gradcheck.CheckKind.JVP_OF_VJP


def test_typed_fields_are_read_from_details_of_older_streams_and_written_to_both():
    old = json.loads(_result(details={"order": 2, "output_path": "a.b", "bug_class": "x",
                                      "section": "vjp"}).to_json())
    for key in ("order", "path", "bug_class", "section"):
        old.pop(key)  # a line written before these were fields
    back = CheckResult.from_dict(old)
    assert (back.order, back.path, back.bug_class, back.section) == (2, "a.b", "x", "vjp")
    new = json.loads(_result(details={}, order=2, path="p", bug_class="b").to_json())
    assert (new["order"], new["path"], new["bug_class"]) == (2, "p", "b")
    assert new["details"] == {"order": 2, "output_path": "p", "bug_class": "b"}
    assert json.loads(_result(details={}).to_json())["details"] == {}  # defaults: not mirrored
    assert _result(details={}, output_index=1, path="logits").subject == (
        "VJP of output logits w.r.t. input 1")


@pytest.mark.parametrize("changes", [
    {"message": "again"}, {"duration_s": 0.25}, {"status": Status.FAILED, "allowed": 2.0},
    # not plain: rebuilt by dataclasses.replace (the typed field mirrored in details)
    {"rounding_level": 3.0}, {"details": {"screen": "passed"}}, {"kind": "jvp"},
])
def test_replaced_is_dataclasses_replace(changes):
    from gradcheck.core.results import replaced

    r = CheckResult(kind="vjp", status=Status.PASSED, backend="numpy", message="first",
                    probe=1, probes=3, details={"resolution": 1e-12})
    got, want = replaced(r, **changes), dataclasses.replace(r, **changes)
    assert type(got) is CheckResult and got is not r
    assert got == want and got.to_json() == want.to_json()
    assert r.message == "first" and r.status is Status.PASSED  # the original unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.message = "x"  # type: ignore[misc]
