"""``gradcheck.stream.expected``: failed checks of a test pytest counted as expected are known;
those of a failed test, or of no test, stay failures."""

from __future__ import annotations

from gradcheck.core.results import CheckKind, CheckResult, Status
from gradcheck.stream import TestOutcome, read_streams
from gradcheck.stream.expected import DECLARED, EXPECTED, expected_by_tests


def _check(test_id: str, status: Status = Status.FAILED) -> CheckResult:
    return CheckResult(CheckKind.VJP, status, backend="numpy", device="cpu", dtype="float64",
                       name="f", test_id=test_id)


def test_failed_checks_take_the_outcome_of_their_test():
    tests = [TestOutcome("t::xfail", "xfailed"), TestOutcome("t::raises", "passed"),
             TestOutcome("t::failed", "failed"), TestOutcome("t::teardown", "passed"),
             TestOutcome("t::teardown", "error"),
             TestOutcome("t::declared", "xfailed", known="off by 1%", link="https://x/1")]
    ids = ["t::xfail", "t::raises", "t::failed", "t::teardown", "t::declared", "", "t::none"]
    out = expected_by_tests([_check(i) for i in ids] + [_check("t::raises", Status.PASSED)],
                            tests)
    known = {c.test_id: c.known_as for c in out if c.known}
    assert set(known) == {"t::xfail", "t::raises", "t::declared"}
    assert known["t::xfail"].nature == known["t::raises"].nature == EXPECTED
    assert (known["t::declared"].reason, known["t::declared"].nature,
            known["t::declared"].link) == ("off by 1%", DECLARED, "https://x/1")
    assert out[-1].status is Status.PASSED and not out[-1].known  # a pass stays a pass


def test_a_stream_read_back_counts_an_expected_failure_as_passed(tmp_path):
    from gradcheck import stream

    path = tmp_path / "results.jsonl"
    with stream.using(path):
        stream.set_test_id("t::raises")
        stream.record(_check("t::raises"))
        stream.set_test_id(None)
        stream.write_record({"record": "test", "test_id": "t::raises", "outcome": "passed",
                             "duration_s": 0.1, "message": ""})
    data = read_streams([path])
    assert data.passed and data.checks[0].known
    assert data.checks[0].details["known_nature"] == EXPECTED
