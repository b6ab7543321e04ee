"""The failure message of assert_gradients, line by line."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gradcheck
from gradcheck import GradientMismatch, NumpyFunction, Status

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
    # by how much: the compared scalars' difference, always printed, absolute and relative, the
    # allowed error and where it came from, and the ratio
    m = re.fullmatch(r"  \|difference\| (\S+) \(relative (\S+)\), allowed \S+ from 10 x FD error "
                     r"\S+ \+ 16 x eps\(float64\) x \(sum of \|terms\| \S+\) = \S+; ratio \S+",
                     lines[4])
    assert m and float(m.group(2)) == pytest.approx(0.01, rel=1e-2), lines[4]
    # the localized full-Jacobian maximum
    m = re.fullmatch(r"  largest element difference \(full Jacobian 12x12\): (\S+), relative "
                     r"(\S+), 12 element\(s\) over the allowed error", lines[5])
    assert m and float(m.group(2)) == pytest.approx(0.01, rel=1e-3), lines[5]
    # the worst elements: index, AD value, oracle value, their difference, allowed, ratio
    assert lines[6] == ("  worst elements (reverse mode vs finite differences, |difference|, "
                        "allowed, ratio):")
    worst = lines[7:12]
    for line in worst:
        m = re.fullmatch(r"    d output 0\[(\d), (\d)\] / d input 1\[(\d), (\d)\]: (\S+) vs "
                         r"(\S+), \|difference\| (\S+), allowed \S+, ratio \S+", line)
        assert m, line
        i, j, k, el = (int(g) for g in m.groups()[:4])
        assert (i, j) == (k, el)  # elementwise op: the wrong elements sit on the diagonal
        ad, fd_value, diff = float(m.group(5)), float(m.group(6)), float(m.group(7))
        assert ad == pytest.approx(1.01 * fd_value, rel=1e-8)
        assert diff == pytest.approx(abs(ad - fd_value), rel=1e-2)
        # printed with 10 significant digits: 5e-10 relative at most
        assert fd_value == pytest.approx(np.sin(X[i, j]), rel=1e-9)
    # the reproducer: a script printed as it runs, to the end of the message
    assert lines[12] == "  reproduce (a script, runs as printed):"
    assert "\n".join(lines[13:]) == failure.report.failures[0].reproducer
    assert "    from tests.api.test_messages import SINMUL as fn" in lines[13:]
    assert ("report = gradcheck.check(fn, *inputs, backend='numpy', device='cpu', "
            "dtype='float64', modes=('rev', 'fwd'), order=1, seed=5)") in lines


def test_the_reproducer_reproduces(failure):
    """Run as printed, in a fresh interpreter: the same failure, from the same inputs."""
    script = failure.report.failures[0].reproducer
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**__import__("os").environ, "PYTHONPATH": _root()}, timeout=300)
    assert out.returncode == 1, out.stderr  # a failing check: the script fails
    again = out.stdout.splitlines()
    assert again[0] == str(failure).splitlines()[0]
    assert again[2:12] == str(failure).splitlines()[2:12]  # the same values, to every digit


def test_error_results_show_their_message():
    f = NumpyFunction(np.sin, lambda a, c: (c[0][:1],), name="short")
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(f, np.ones(3), backend="numpy", modes=("rev",))
    lines = str(info.value).splitlines()
    assert lines[2].startswith("* VJP of output 0 w.r.t. input 0 [error] (short, backend=numpy")
    assert lines[3] == ("  the backend's VJP raised: ValueError: the VJP returned shape (1,), "
                        "expected (3,)")
    assert lines[4] == "  reproduce (a script, runs as printed):"
    assert lines[5:] == info.value.report.failures[0].reproducer.splitlines()


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
    assert re.fullmatch(r"  \|difference\| \S+ \(relative 0.001\d*\), allowed \S+ from 16 x "
                        r"eps\(float32\) x \(\|\|VJP\|\| .*; ratio \S+", lines[4]), lines[4]
    assert re.fullmatch(r"  largest element difference: \S+", lines[5]), lines[5]
    assert lines[6] == ("  worst elements (in the dtype under test vs in float64, |difference|, "
                        "allowed, ratio):")
    assert re.fullmatch(r"    input 0\[\d\]: \S+ vs \S+, \|difference\| \S+, allowed \S+, "
                        r"ratio \S+", lines[7]), lines[7]


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


# -- reproducers run as printed, in a fresh interpreter ------------------------------------------

_USER_MODULE = '''
import numpy as np
import torch

import gradcheck


def half_square(x, power=2):
    """x ** power in value; its gradient is wrong (the detached factor is not differentiated)."""
    return x ** (power - 1) * x.detach()


class WrongCube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3.01 * x ** 2 * g


def tanh_forward(x):
    return np.tanh(x)


def tanh_wrong_vjp(args, cts):
    return (cts[0] * (1 - np.tanh(args[0]) ** 2) * 1.001,)


WRONG_TANH = gradcheck.NumpyFunction(tanh_forward, tanh_wrong_vjp, name="wrong_tanh")


def rebuilt():
    """A NumpyFunction with no module-level name: the reproducer rebuilds it from its parts."""
    return gradcheck.NumpyFunction(tanh_forward, tanh_wrong_vjp)
'''


@pytest.fixture()
def user_module(tmp_path, monkeypatch):
    import importlib

    pytest.importorskip("torch")
    (tmp_path / "gc_user_mod.py").write_text(_USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "gc_user_mod", raising=False)
    return importlib.import_module("gc_user_mod")


def _rerun(script: str, cwd, path: str = "") -> list[str]:
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (path, _root()) if p)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, cwd=cwd, timeout=300)
    assert out.returncode == 1, out.stderr  # the checks rerun here all fail: so does the script
    return out.stdout.splitlines()


def _evidence(message: str) -> list[str]:
    """The message up to the reproducer: what must come out again, to every digit."""
    lines = message.splitlines()
    return lines[:lines.index("  reproduce (a script, runs as printed):")]


@pytest.mark.parametrize("case", ["function with kwargs", "autograd.Function.apply",
                                  "NumpyFunction (module-level)", "NumpyFunction (rebuilt)"])
def test_reproducer_runs_as_printed_in_a_fresh_interpreter(case, user_module, tmp_path):
    m = user_module
    x = np.random.default_rng(3).standard_normal((2, 3))
    fn, kw = {
        "function with kwargs": (m.half_square, {"backend": "torch", "kwargs": {"power": 3}}),
        "autograd.Function.apply": (m.WrongCube.apply, {"backend": "torch"}),
        "NumpyFunction (module-level)": (m.WRONG_TANH, {"backend": "numpy"}),
        "NumpyFunction (rebuilt)": (m.rebuilt(), {"backend": "numpy"}),
    }[case]
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(fn, x, modes=("rev",), **kw)
    message = str(info.value)
    script = info.value.report.failures[0].reproducer
    assert message.endswith(script)  # printed last, unindented: copy it as it is
    assert "np.array([" in script and "dtype='float64')" in script  # the inputs are defined
    expected = {"function with kwargs": "kwargs={'power': 3}",
                "autograd.Function.apply": "fn = _fn.apply",
                "NumpyFunction (module-level)": "from gc_user_mod import WRONG_TANH as fn",
                "NumpyFunction (rebuilt)": "fn = gradcheck.NumpyFunction(forward, vjp, None"}[case]
    assert expected in script
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # with the module importable by name, and from a directory where it is not (its file)
    assert _rerun(script, elsewhere, path=str(tmp_path)) [:len(_evidence(message))] == \
        _evidence(message)
    assert _rerun(script, elsewhere)[:len(_evidence(message))] == _evidence(message)


def test_reproducer_of_a_lambda_rule_writes_its_source():
    report = gradcheck.check(NumpyFunction(lambda x: x, lambda a, c: (c[0] * 1.5,)), np.ones(2),
                             backend="numpy", modes=("rev",))
    script = report.failures[0].reproducer
    assert "forward = lambda x: x\nvjp = lambda a, c: (c[0] * 1.5,)\n" in script
    assert "NotImplementedError" not in script and not script.startswith("#")


def test_large_inputs_are_saved_exactly_beside_the_results(tmp_path):
    x = np.random.default_rng(0).standard_normal(500)
    with gradcheck.stream.using(tmp_path / "results.jsonl"):
        script = gradcheck.check(SINMUL, x, x[:3].copy(), backend="numpy", modes=("rev",),
                                 seed=2).results[0].reproducer
    saved = next(ln for ln in script.splitlines() if ln.startswith("_saved = np.load("))
    path = tmp_path / "reproducers" / saved.split("'")[1].rsplit("/", 1)[-1]
    assert repr(str(path)) in saved and path.is_file()
    assert np.array_equal(np.load(path)["input_0"], x)  # the checked values, every bit
    assert "    _saved['input_0'],  # inputs[0]: 500 elements, exact" in script
    assert "np.array([" in script  # the small one is inline


def test_a_passing_check_writes_no_inputs_file(tmp_path):
    x = np.random.default_rng(0).standard_normal(500)
    good = NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]),), name="sin")
    with gradcheck.stream.using(tmp_path / "results.jsonl"):
        report = gradcheck.check(good, x, backend="numpy")  # fwd: skipped (no forward mode)
    assert report.passed and "_saved = np.load(" in report.results[0].reproducer
    assert not (tmp_path / "reproducers").exists()


def test_reproducer_of_a_script_function_loads_the_script(tmp_path):
    script_file = tmp_path / "user_script.py"
    script_file.write_text(textwrap.dedent("""
        import numpy as np
        import gradcheck

        def wrong(args, cts):
            return (cts[0] * np.cos(args[0]) * 1.01,)

        SIN = gradcheck.NumpyFunction(np.sin, wrong, name="sin")

        if __name__ == "__main__":
            report = gradcheck.check(SIN, np.array([0.5, 1.0]), backend="numpy", modes=("rev",))
            print(report.failures[0].reproducer)
    """))
    import os

    out = subprocess.run([sys.executable, str(script_file)], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": _root()}, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"fn = runpy.run_path({str(script_file)!r})['SIN']" in out.stdout
    again = _rerun(out.stdout, tmp_path)
    assert again[0].startswith("gradient check failed: ")


# -- one way of writing values: the assert message, the result message and the HTML report ------


def test_html_detail_shows_the_strings_of_the_assert_message(failure):
    from gradcheck.core.results import shown
    from gradcheck.report import model

    r = failure.report.failures[0]
    data = model.table_data(failure.report.results)
    extra = data["extra"][str(failure.report.results.index(r))]
    s = shown(r)
    assert extra["shown"] == {"actual": s.actual, "expected": s.expected,
                              "difference": s.difference, "relative": s.relative,
                              "allowed": s.allowed, "ratio": s.ratio}
    text = str(failure)
    assert f": {s.actual} by reverse mode vs {s.expected} by finite differences" in text
    assert f"  |difference| {s.difference} (relative {s.relative}), allowed {s.allowed} " in text
    assert text.split("\n  reproduce")[0].splitlines()[4].endswith(f"; ratio {s.ratio}")
    assert f"actual {s.actual} vs expected {s.expected}; |diff| {s.difference}" in r.message
    # the worst-element table: AD, oracle, difference, allowed, ratio, as the message writes them
    assert len(extra["worst_shown"]) == len(r.worst) == 5
    for ad, oracle, diff, allowed, ratio in extra["worst_shown"]:
        assert f": {ad} vs {oracle}, |difference| {diff}, allowed {allowed}, ratio {ratio}" in text
    # and the page's script uses them (falls back to its own formatting only without them)
    from importlib import resources

    js = (resources.files("gradcheck.report") / "assets" / "report.js").read_text(encoding="utf-8")
    assert "x.shown ||" in js and "x.worst_shown[i]" in js


def test_close_values_print_differently_and_the_difference_is_printed():
    from gradcheck.core.results import CheckResult, distinct, shown

    assert distinct(1.0000001, 1.0000002) == ("1.0000001", "1.0000002")
    assert distinct(1.0 + 2 ** -52, 1.0) == ("1.0000000000000002", "1")
    assert distinct(0.5, 0.25) == ("0.5", "0.25")
    r = CheckResult("vjp", Status.FAILED, "numpy", actual=1.000000000001, expected=1.000000000002,
                    discrepancy=1e-12, relative_discrepancy=1e-12, allowed=1e-13,
                    discrepancy_ratio=10.0)
    s = shown(r)
    assert s.actual != s.expected and float(s.actual) == 1.000000000001
    assert s.difference == "1e-12" and s.ratio == "10"


def test_messages_are_cut_at_a_boundary_never_inside_a_bracket():
    from gradcheck.core.results import shorten

    text = "ValueError: shapes (3, 4) and (5, 6) differ for [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]"
    assert shorten(text, 200) == text
    assert shorten(text, 60) == "ValueError: shapes (3, 4) and (5, 6) differ for ..."
    assert shorten("f([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])", 20) == "f([1.0, 2.0, ...])"
    for n in range(8, len(text)):
        cut = shorten(text, n)
        assert len(cut) <= n and cut.endswith(("...", "...)", "...]", "...])"))
        assert cut.count("(") == cut.count(")") and cut.count("[") == cut.count("]")


def test_a_long_exception_message_is_cut_at_a_boundary():
    def boom(args, cts):
        raise ValueError("bad cotangent " + str([round(0.1 * k, 1) for k in range(400)]))

    report = gradcheck.check(NumpyFunction(np.sin, boom, name="boom"), np.ones(3),
                             backend="numpy", modes=("rev",))
    message = report.failures[0].message
    assert "..." in message and message.count("[") == message.count("]")
