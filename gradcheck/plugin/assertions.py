"""What a suite test asserts for one planned case, and the failure it prints.

``assert_check(planned)`` runs (or reads from the memoized run) the checks of the case, keeps
the results of the planned check kind, and requires each to have the expected verdict:
``passed``, or ``inconclusive`` at a special point that is a kink.  A capability the backend
declares missing (e.g. no forward-mode rule for this op) is a skip with the backend's reason.
On failure the message carries the evidence (compared values, discrepancy, allowed error and
its source, worst elements), the one-line and the standalone reproducer.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gradcheck import stream
from gradcheck.api import format_failure
from gradcheck.core.results import CheckKind, CheckResult, Report, Status
from gradcheck.core.taxonomy import INFO
from gradcheck.harness import runner
from gradcheck.harness.plan import Planned


def results_for(planned: Planned) -> list[CheckResult]:
    """Every result of the run ``planned`` reads its verdict from."""
    case = planned.case
    agreement = runner.AGREEMENT_RUNS.get(planned.check)
    if agreement is not None:
        return list(agreement(case))
    return list(runner.numeric_report(case, planned.order).results)


def relevant(planned: Planned, results: list[CheckResult]) -> list[CheckResult]:
    """The results of the planned kind (and any failure to call the op at all)."""
    order = INFO[planned.check].order
    return [r for r in results
            if r.kind in (planned.check, CheckKind.CALL) and r.order == order]


def assert_check(planned: Planned) -> None:
    """Fail (with evidence and reproducers) unless every result has the expected verdict."""
    __tracebackhide__ = True
    mine = record(planned, relevant(planned, results_for(planned)))
    expected = runner.expected_verdict(planned.case, INFO[planned.check].order)
    skipped = [r for r in mine if r.status is Status.SKIPPED]
    judged = [r for r in mine if r.status is not Status.SKIPPED]
    if skipped and not judged:
        pytest.skip(skipped[0].message)
    if not judged:
        prerequisite = [r for r in results_for(planned) if r.status is Status.SKIPPED]
        if prerequisite:  # e.g. fwd_rev when the backend has no forward rule for this op
            pytest.skip(prerequisite[0].message)
    wrong = [r for r in judged if r.status.value != expected] or (
        [] if judged else record(planned, [_missing(planned)]))
    if wrong and not planned.xfail and all(r.known for r in wrong):
        # failed as a defect the engine's own table records (a low-precision kernel measured
        # off the correctly rounded value): the report shows it as known, the test says which
        pytest.xfail("known engine defect: " + "; ".join(
            r.known_as.reason for r in wrong if r.known_as is not None))
    if wrong:
        pytest.fail(failure_message(planned, wrong, expected), pytrace=False)


def record(planned: Planned, results: list[CheckResult]) -> list[CheckResult]:
    """Append the results this test reads its verdict from to the active result stream (the
    report of ``gradcheck run``), stamped with the pytest test id (the case id is in the
    reproducer); a known discrepancy of the case
    (a strict xfail) is carried on each result (its ``known_as``), so the report can tell
    an expected failure from a new one."""
    known = {"known": planned.xfail} if planned.xfail else {}
    test_id = stream.current_test_id() or planned.case.id  # the pytest node id under pytest
    return stream.record_many([replace(r, test_id=test_id, details={**r.details, **known})
                               for r in results])


def _missing(planned: Planned) -> CheckResult:
    return CheckResult(kind=planned.check, status=Status.ERROR, backend=planned.case.backend,
                       message=f"the run produced no {planned.check.value!r} result")


def failure_message(planned: Planned, wrong: list[CheckResult], expected: str) -> str:
    """The multi-line failure text: evidence first, then how to reproduce."""
    case = planned.case
    lines = [f"{planned.check} check of {case.id} (seed {case.seed}): expected every result "
             f"to be {expected!r}, got "
             + ", ".join(f"{r.status.value} ({r.subject})" for r in wrong)]
    report = Report([r for r in wrong if not r.ok])
    if report.results:
        lines.append(format_failure(report))
    for r in wrong:
        if r.ok:
            lines.append(f"* {r.subject} [{r.status.value}]: {r.message}")
    order = f" --order {planned.order}" if planned.order != 1 else ""
    lines += ["", f"reproduce: python -m gradcheck.harness.runner{order} {case.id!r}",
              "standalone reproducer:", runner.reproducer(case, planned.check, planned.order)]
    return "\n".join(lines)
