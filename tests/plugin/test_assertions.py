"""``assert_check`` (the suites' verdict): a case whose only failures carry a known mark from
the engine's own table (a low-precision kernel measured off the correctly rounded value,
:class:`gradcheck.backends.kernels.KnownKernel`) xfails with the reason; any other failure
beside it fails the test."""

from __future__ import annotations

import pytest

from gradcheck.core.results import CheckResult, KnownMark, Status
from gradcheck.core.taxonomy import CheckKind
from gradcheck.harness.plan import Planned
from gradcheck.harness.runner import Case
from gradcheck.plugin import assertions

PLANNED = Planned(Case("torch", "cpu", "bfloat16", "rsqrt"), CheckKind.ROUNDING)
KNOWN = CheckResult(kind=CheckKind.ROUNDING, status=Status.FAILED, backend="torch",
                    message="kernel off", known_as=KnownMark("the engine's bfloat16 kernel "
                                                             "aten.rsqrt.default ... T22"))
NEW = CheckResult(kind=CheckKind.ROUNDING, status=Status.FAILED, backend="torch",
                  message="a new failure")
PASSED = CheckResult(kind=CheckKind.ROUNDING, status=Status.PASSED, backend="torch")


@pytest.fixture
def results(monkeypatch):
    box: list[CheckResult] = []
    monkeypatch.setattr(assertions, "results_for", lambda planned: list(box))
    monkeypatch.setattr(assertions, "record", lambda planned, rs: rs)
    return box


def test_only_known_engine_defects_xfail_with_the_reason(results):
    results.extend([PASSED, KNOWN])
    with pytest.raises(pytest.xfail.Exception, match="known engine defect: .*T22"):
        assertions.assert_check(PLANNED)


def test_a_new_failure_beside_a_known_one_fails(results):
    results.extend([KNOWN, NEW])
    with pytest.raises(pytest.fail.Exception, match="a new failure"):
        assertions.assert_check(PLANNED)


def test_passing_results_pass(results):
    results.append(PASSED)
    assertions.assert_check(PLANNED)
