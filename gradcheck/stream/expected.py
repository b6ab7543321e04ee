"""Checks a test expected to fail: what pytest counted as expected, the report counts so too.

A check that failed (or errored) inside a test pytest counted as ``xfailed`` (an
``xfail(raises=GradientMismatch)``, or the plugin's ``gradcheck_known`` marker) or as
``passed`` (``pytest.raises(GradientMismatch)`` around ``assert_gradients``, an assertion that
the report did not pass) was expected by that test: it becomes a known discrepancy
(:attr:`CheckResult.known_as <gradcheck.core.results.CheckResult.known_as>`), so the JUnit
file, the report's counts and ``gradcheck report``'s exit status agree with pytest.  A test
with any failed or errored phase expects nothing.  The reason and link a ``gradcheck_known``
marker declares are the known discrepancy's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from gradcheck.core.results import CheckResult, KnownMark

if TYPE_CHECKING:  # the reader imports this module
    from gradcheck.stream.reader import TestOutcome

#: natures of the known discrepancies this module records
DECLARED, EXPECTED = "declared", "expected"
_EXPECTING = ("xfailed", "passed")


def _marks(tests: Iterable[TestOutcome]) -> dict[str, KnownMark]:
    """test id -> the mark its failed checks get (tests that expect nothing left out)."""
    phases: dict[str, list[TestOutcome]] = {}
    for t in tests:
        phases.setdefault(t.test_id, []).append(t)
    out = {}
    for test_id, records in phases.items():
        if not all(t.ok for t in records):
            continue
        declared = next((t for t in records if t.known), None)
        outcome = next((t.outcome for t in records if t.outcome in _EXPECTING), None)
        if declared is not None and outcome is not None:
            out[test_id] = KnownMark(declared.known, DECLARED, declared.link or None)
        elif outcome == "xfailed":
            out[test_id] = KnownMark(f"expected failure: the test {test_id} is marked xfail "
                                     "and failed as expected", EXPECTED)
        elif outcome == "passed":
            out[test_id] = KnownMark(f"expected by the test {test_id}, which passed (it "
                                     "expected this failure: pytest.raises, or an assertion "
                                     "on the report)", EXPECTED)
    return out


def expected_by_tests(checks: list[CheckResult], tests: Iterable[TestOutcome]
                      ) -> list[CheckResult]:
    """``checks`` with each failed or errored check of an expecting test marked known (a
    check already marked keeps its own mark)."""
    marks = _marks(tests)
    if not marks:
        return checks
    return [dataclasses.replace(c, known_as=marks[c.test_id])
            if not c.ok and c.known_as is None and c.test_id in marks else c for c in checks]
