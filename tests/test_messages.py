"""The failure message of assert_gradients, line by line."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import gradcheck
from gradcheck import GradientMismatch, NumpyFunction

X = np.random.default_rng(0).standard_normal((3, 4))
Y = np.random.default_rng(1).standard_normal((3, 4))


def _forward(x, y):
    return np.sin(x) * y


SINMUL = NumpyFunction(_forward, lambda a, c: (c[0] * np.cos(a[0]) * a[1],
                                               1.01 * c[0] * np.sin(a[0])), name="sinmul")


@pytest.fixture(scope="module")
def failure() -> GradientMismatch:
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(SINMUL, X, Y, backend="numpy", seed=5)
    return info.value


def test_is_an_assertion_error_carrying_the_report(failure):
    assert isinstance(failure, AssertionError)
    assert failure.report is not None and not failure.report.passed
    assert [r.input_index for r in failure.results] == [1]


def test_message_line_by_line(failure):
    lines = str(failure).splitlines()
    assert lines[0] == ("gradient check failed: 4 checks: 1 passed, 1 failed, 2 skipped "
                        "(2 not decided)")
    assert lines[1] == ""
    # what was checked, and where: check, status, function, backend, device, dtype, seed
    assert lines[2] == ("* VJP of output 0 w.r.t. input 1 [failed] (sinmul, backend=numpy, "
                        "device=cpu, dtype=float64, seed=5)")
    # what was compared and both values
    assert re.fullmatch(r"  compared <J\^T v, u> \(probe \d of 3\): \S+ by reverse mode vs "
                        r"\S+ by finite differences", lines[3]), lines[3]
    # by how much: the localized full-Jacobian maximum, absolute and relative
    m = re.fullmatch(r"  max abs discrepancy (\S+), relative (\S+)", lines[4])
    assert m and float(m.group(2)) == pytest.approx(0.01, rel=1e-3)
    # the allowed error and where it came from
    assert re.fullmatch(r"  allowed \S+ from 10 x FD error \S+ \+ 16 x eps\(float64\) x "
                        r"\(sum of \|terms\| \S+\) = \S+; ratio \S+", lines[5]), lines[5]
    # the worst elements: index, AD value, oracle value, allowed
    assert lines[6] == "  worst elements (reverse mode vs finite differences, allowed):"
    worst = lines[7:12]
    for line in worst:
        m = re.fullmatch(r"    d output 0\[(\d), (\d)\] / d input 1\[(\d), (\d)\]: (\S+) vs "
                         r"(\S+) \(allowed \S+\)", line)
        assert m, line
        i, j, k, el = (int(g) for g in m.groups()[:4])
        assert (i, j) == (k, el)  # elementwise op: the wrong elements sit on the diagonal
        ad, fd_value = float(m.group(5)), float(m.group(6))
        assert ad == pytest.approx(1.01 * fd_value, rel=1e-8)
        # printed with 10 significant digits: 5e-10 relative at most
        assert fd_value == pytest.approx(np.sin(X[i, j]), rel=1e-9)
    # the one-line reproducer: seed, dtype, device, modes, order and the inputs' shapes
    assert lines[12] == (
        "  reproduce: gradcheck.check(test_messages.sinmul, *inputs, backend='numpy', "
        "device='cpu', dtype='float64', modes=('rev', 'fwd'), order=1, seed=5)"
        "  # inputs: float64[3, 4], float64[3, 4]")
    assert len(lines) == 13


def test_the_reproducer_reproduces(failure):
    line = failure.report.failures[0].reproducer
    namespace = {"gradcheck": gradcheck, "inputs": (X, Y),
                 "test_messages": types.SimpleNamespace(sinmul=SINMUL)}
    again = eval(line.split("  #")[0], namespace)
    assert [(r.kind, r.input_index, r.status, r.actual) for r in again.failures] == [
        (r.kind, r.input_index, r.status, r.actual) for r in failure.report.failures]


def test_error_results_show_their_message():
    f = NumpyFunction(np.sin, lambda a, c: (c[0][:1],), name="short")
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(f, np.ones(3), backend="numpy", modes=("rev",))
    lines = str(info.value).splitlines()
    assert lines[2].startswith("* VJP of output 0 w.r.t. input 0 [error] (short, backend=numpy")
    assert lines[3] == ("  the backend's VJP raised: ValueError: the VJP returned shape (1,), "
                        "expected (3,)")
    assert lines[4].startswith("  reproduce: gradcheck.check(")


def test_low_precision_failure_names_the_dtype_and_the_rounding_check():
    f = NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]) * (
        a[0].dtype.type(1.001) if a[0].dtype == np.float32 else 1.0),), name="sin32")
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(f, np.linspace(-1, 1, 8).astype(np.float32),
                                   backend="numpy", modes=("rev",))
    lines = str(info.value).splitlines()
    assert lines[2].startswith("* low-precision rounding of the VJP of output 0 w.r.t. input 0 "
                               "[failed] (sin32, backend=numpy, device=cpu, dtype=float32")
    assert lines[3].startswith("  compared ||J^T v||: ") and "in the dtype under test vs" in \
        lines[3] and lines[3].endswith("in float64")
    assert re.fullmatch(r"  max abs discrepancy \S+, relative 0.001\d*", lines[4]), lines[4]
    assert "16 x eps(float32) x (||VJP||" in lines[5]
    assert lines[6] == "  worst elements (in the dtype under test vs in float64, allowed):"
    assert re.fullmatch(r"    input 0\[\d\]: \S+ vs \S+ \(allowed \S+\)", lines[7]), lines[7]


def test_rule_check_of_a_low_precision_dtype_says_it_ran_in_float64():
    f = NumpyFunction(np.sin, lambda a, c: (-c[0] * np.cos(a[0]),), name="neg")
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(f, np.ones(3, np.float32), backend="numpy", modes=("rev",))
    assert "dtype=float32 (checked in float64)" in str(info.value)


def test_pytest_hides_the_harness_frames(tmp_path):
    test = tmp_path / "test_fail.py"
    test.write_text(textwrap.dedent("""
        import numpy as np
        import gradcheck

        def test_it():
            f = gradcheck.NumpyFunction(np.sin, lambda a, c: (-c[0] * np.cos(a[0]),))
            gradcheck.assert_gradients(f, np.ones(2), backend="numpy", modes=("rev",))
    """))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:gradcheck.pytest_plugin", str(test)],
                         capture_output=True, text=True, cwd=tmp_path,
                         env={**__import__("os").environ, "PYTHONPATH": _root()})
    assert out.returncode == 1, out.stdout + out.stderr
    assert "GradientMismatch" in out.stdout and "VJP of output 0 w.r.t. input 0" in out.stdout
    assert "gradcheck/api.py" not in out.stdout  # __tracebackhide__


def _root() -> str:
    from pathlib import Path

    return str(Path(gradcheck.__file__).resolve().parents[1])
