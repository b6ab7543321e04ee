"""Day one at the user's edge (issue 29, items 7-10), through the public API, the pytest plugin
and the command line only: reproducers that run, expected failures that do not break CI,
Hypothesis strategies for the user's own ops, a fast ``gradcheck backends``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gradcheck
from gradcheck import GradientMismatch

ROOT = Path(__file__).resolve().parents[2]

# -- item 7: reproducers that run --------------------------------------------------------------


def _script_of(message: str) -> tuple[str, str]:
    """(heading, script) of the first result of a failure message: the script is printed
    last, unindented, after its heading line."""
    lines = message.splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.strip().startswith("reproduce ("))
    end = next((i for i in range(k + 1, len(lines)) if lines[i].startswith("* ")), len(lines))
    return lines[k].strip(), "\n".join(lines[k + 1:end]).rstrip()


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != gradcheck.stream.ENV_VAR}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)


def _closure(wrong: float):
    """A user's op built inside a function: a lambda closing over a value (no importable
    name); ``wrong`` != 0 scales the gradient by (1 + wrong), the value stays exact."""
    torch = pytest.importorskip("torch")
    k = 1.0 + wrong

    return lambda t: (torch.sin(t) * k - torch.sin(t).detach() * (k - 1.0)).sum()


@pytest.mark.parametrize("size", [5, 300], ids=["inline", "npz"])
def test_printed_reproducer_of_a_wrong_closure_fails_as_printed(size, tmp_path):
    x = np.linspace(0.1, 1.3, size)
    with gradcheck.stream.using(tmp_path / "results.jsonl"):  # a report directory
        with pytest.raises(GradientMismatch) as info:
            gradcheck.assert_gradients(_closure(0.01), x, backend="torch", modes=("rev",))
        good = gradcheck.check(_closure(0.0), x, backend="torch", modes=("rev",))
    assert good.passed  # the correct twin
    message = str(info.value)
    heading, script = _script_of(message)
    assert heading == "reproduce (a script, runs as printed):"
    assert "NotImplementedError" not in script and "random" not in script
    assert "fn = lambda t: (torch.sin(t) * k - torch.sin(t).detach() * (k - 1.0)).sum()" in script
    if size > 128:  # the exact inputs, in a file beside the results, its path in the message
        npz = next(tmp_path.glob("reproducers/inputs-*.npz"))
        assert repr(str(npz)) in message and np.array_equal(np.load(npz)["input_0"], x)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = _run(script, elsewhere)
    assert out.returncode == 1, out.stderr  # it fails, with the same mismatch
    first = message.splitlines()[:4]
    assert out.stdout.splitlines()[:4] == first and "gradient check failed" in first[0]


def test_a_reproducer_that_needs_the_users_object_says_so_and_does_not_claim_to_run(tmp_path):
    torch = pytest.importorskip("torch")
    layer = torch.nn.Linear(3, 2).double()
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(lambda t: layer(t) + t.detach()[:2] * 0.01 * t[:2],
                                   np.ones(3), backend="torch", modes=("rev",))
    heading, script = _script_of(str(info.value))
    assert heading == "reproduce (a script: define what it marks PASTE HERE, then run it):"
    assert script.startswith("# NOT RUNNABLE AS PRINTED")
    assert "# PASTE HERE: layer: the torch.nn.modules.linear.Linear the function refers to" \
        in script
    out = _run(script, tmp_path)  # as printed: it stops and says what to define
    assert out.returncode != 0 and "define layer where this script says PASTE HERE" in out.stderr


# -- item 8: expected failures do not break CI -------------------------------------------------

pytest_plugins = ["pytester"]

USER_TESTS = '''
import numpy as np
import pytest

import gradcheck
from gradcheck import GradientMismatch, NumpyFunction

WRONG = NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]) * 1.01,), name="wrong_sin")
RIGHT = NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]),), name="sin")
X = np.linspace(0.1, 1.0, 4)


@pytest.mark.xfail(raises=GradientMismatch, strict=True)
def test_xfail():
    gradcheck.assert_gradients(WRONG, X, backend="numpy")


def test_raises():
    with pytest.raises(GradientMismatch):
        gradcheck.assert_gradients(WRONG, X, backend="numpy")


@pytest.mark.gradcheck_known(reason="wrong_sin's rule is 1% off", link="https://example.org/i/1")
def test_declared():
    gradcheck.assert_gradients(WRONG, X, backend="numpy")


def test_right():
    gradcheck.assert_gradients(RIGHT, X, backend="numpy")
'''

# the mutants of the gate: a failure nothing expects, a declared discrepancy that is gone
UNEXPECTED = '''

def test_unexpected():
    gradcheck.assert_gradients(WRONG, X, backend="numpy")


@pytest.mark.gradcheck_known(reason="fixed upstream since")
def test_declared_but_fixed():
    gradcheck.assert_gradients(RIGHT, X, backend="numpy")
'''


def _gate(pytester: pytest.Pytester, source: str):
    """pytest with the plugin and a report directory, then ``gradcheck report`` on its stream:
    (pytest's exit code, gradcheck's junit root, the report's exit code, the page, stdout)."""
    import xml.etree.ElementTree as ET

    from gradcheck.cli import main

    pytester.makepyfile(test_user=source)
    pytester.makeconftest('pytest_plugins = ["gradcheck.pytest_plugin"]')
    out = pytester.path / "reports"
    env = {k: v for k, v in os.environ.items() if k != gradcheck.stream.ENV_VAR}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--gradcheck-report-dir={out}", "--junitxml=pytest-junit.xml"],
                          cwd=pytester.path, env=env, capture_output=True, text=True, timeout=600)
    junit = ET.parse(out / "junit.xml").getroot()
    code = main(["report", str(out / "results.jsonl"), "-o", str(pytester.path / "again")])
    page = (pytester.path / "again" / "index.html").read_text()
    return proc.returncode, junit, code, page, proc.stdout


def test_expected_failures_agree_with_pytest_in_junit_counts_and_exit_status(pytester):
    pytest_code, junit, report_code, page, stdout = _gate(pytester, USER_TESTS)
    assert pytest_code == 0, stdout
    assert (junit.get("failures"), junit.get("errors")) == ("0", "0")
    assert int(junit.get("skipped")) >= 3  # a known discrepancy is a skipped testcase
    assert report_code == 0  # gradcheck report agrees with pytest
    assert "checks:" in stdout and "known" in stdout and "failed" not in stdout.split(
        "checks:")[1].splitlines()[0]
    # the declared one is shown as known, with its reason and link
    assert "wrong_sin&#x27;s rule is 1% off" in page or "wrong_sin's rule is 1% off" in page
    assert "https://example.org/i/1" in page
    known = [c for c in junit.iter("testcase") if c.find("skipped") is not None
             and "known discrepancy" in c.find("skipped").get("message", "")]
    assert any("wrong_sin's rule is 1% off" in c.find("skipped").get("message") for c in known)


def test_unexpected_failures_still_fail_the_gate_and_name_their_test(pytester):
    pytest_code, junit, report_code, page, stdout = _gate(pytester, USER_TESTS + UNEXPECTED)
    assert pytest_code == 1
    assert int(junit.get("failures")) >= 1 and report_code == 1
    # the failures list names the pytest node id of each failing check
    assert "in test_user.py::test_unexpected" in stdout
    assert "<code>test_user.py::test_unexpected</code>" in page
    assert "XPASS(strict)" in stdout  # a declared discrepancy that is gone fails the test
    for expected in ("test_xfail", "test_raises", "test_declared"):  # still expected
        assert f"test_user.py::{expected}</code>" not in page.split('id="failures"')[1].split(
            "</section>")[0]


# -- item 9: Hypothesis strategies for the user's own ops --------------------------------------

def test_a_given_test_with_the_public_strategies_catches_a_mutant_and_passes_its_twin():
    from hypothesis import given, settings

    from gradcheck import NumpyFunction
    from gradcheck import strategies as gst

    def softsign(off: float) -> NumpyFunction:  # x / (1 + |x|): a kink of f'' at 0
        return NumpyFunction(lambda x: x / (1 + np.abs(x)),
                             lambda a, c: (c[0] / (1 + np.abs(a[0])) ** 2 * off,),
                             name="softsign")

    def given_test(op):
        @settings(max_examples=20, derandomize=True, deadline=None, database=None)
        @given(gst.arrays(gst.shapes(max_dims=2), "float64", avoid=[0.0]))
        def test(x):
            gradcheck.assert_gradients(op, x, backend="numpy", modes=("rev",), order=2)
        return test

    given_test(softsign(1.0))()
    with pytest.raises(GradientMismatch):
        given_test(softsign(1.001))()


# -- item 10: `gradcheck backends` imports no engine ----------------------------------------------

def test_gradcheck_backends_lists_versions_without_importing_an_engine(tmp_path):
    code = ("import sys, gradcheck.cli\n"
            "gradcheck.cli.main(['backends'])\n"
            "print('imported:', sorted(m for m in ('torch', 'jax', 'tensorflow', 'mlx', "
            "'tinygrad', 'autograd') if m in sys.modules))\n")
    out = _run(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "imported: []"
    torch = pytest.importorskip("torch")
    assert f"torch       {torch.__version__.split('+')[0]}" in out.stdout
