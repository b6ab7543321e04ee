"""``@pytest.mark.gradcheck_known`` (gradcheck/plugin/known_marker.py): a declared known
discrepancy is a strict xfail(raises=GradientMismatch) whose reason and link reach the stream."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

HEAD = '''
import numpy as np
import pytest

import gradcheck
from gradcheck import NumpyFunction

WRONG = NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]) * 1.01,), name="wrong_sin")
X = np.linspace(0.1, 1.0, 3)
'''


@pytest.fixture
def user(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest('pytest_plugins = ["gradcheck.pytest_plugin"]')
    return pytester


def test_the_reason_and_link_reach_the_stream_and_other_errors_still_fail(user):
    user.makepyfile(test_user=HEAD + '''
@pytest.mark.gradcheck_known(reason="1% off", link="https://example.org/1")
def test_known():
    gradcheck.assert_gradients(WRONG, X, backend="numpy", modes=("rev",))


@pytest.mark.gradcheck_known(reason="1% off")
def test_another_error_is_no_known_discrepancy():
    raise ValueError("not a gradient mismatch")
''')
    result = user.runpytest_subprocess("-p", "no:cacheprovider", "--gradcheck-report-dir=out")
    result.assert_outcomes(xfailed=1, failed=1)
    records = [json.loads(line) for line in (user.path / "out" / "results.jsonl").open()]
    tests = {r["test_id"].split("::")[1]: r for r in records if r.get("record") == "test"}
    assert (tests["test_known"]["outcome"], tests["test_known"]["known"],
            tests["test_known"]["link"]) == ("xfailed", "1% off", "https://example.org/1")
    assert tests["test_another_error_is_no_known_discrepancy"]["outcome"] == "failed"


def test_a_marker_without_a_reason_is_a_usage_error(user):
    user.makepyfile(test_user=HEAD + '''
@pytest.mark.gradcheck_known(link="https://example.org/1")
def test_known():
    gradcheck.assert_gradients(WRONG, X, backend="numpy")
''')
    result = user.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*gradcheck_known needs reason='...'*"])
