"""The reproducer script's building blocks (gradcheck/_reproducer.py); the scripts themselves,
as a failure message prints them, are tested in test_messages.py."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck._reproducer import array_literal


def test_float32_and_nonfinite_values_are_inlined_exactly():
    a = np.array([1.1, np.inf, -np.inf, np.nan, -0.0, 3e-39], dtype=np.float32)
    text, note = array_literal(a, 0, 0)
    back = eval(text, {"np": np})
    assert note == "" and back.dtype == np.float32
    assert np.array_equal(back, a, equal_nan=True) and np.signbit(back[4])


# -- the source of a function that cannot be imported (gradcheck/_function_source.py) -----------

def _recover(fn):
    from gradcheck._function_source import recover
    from gradcheck._reproducer import _import, _literal

    return recover(fn, "fn", _import, _literal)


def test_a_lambda_is_cut_out_of_its_line_and_its_neighbour_is_not_taken():
    pair = (lambda t: np.sin(t), lambda t: np.sin(t) * 1.01)  # two lambdas, one line
    found = _recover(pair[1])
    assert found.lines == ["import numpy as np", "fn = lambda t: np.sin(t) * 1.01"]
    assert found.missing == []
    assert _recover(pair[0]).lines[-1] == "fn = lambda t: np.sin(t)"


def test_a_lambda_over_two_lines_is_written_in_parentheses():
    fns = (lambda t: np.cos(t)
           + 1.5, None)
    found = _recover(fns[0])
    assert found.lines[-2:] == ["fn = (lambda t: np.cos(t)", "           + 1.5)"]
    space: dict = {}
    exec("\n".join(found.lines), space)
    assert space["fn"](0.0) == 2.5


def test_a_closure_brings_its_values_modules_and_helpers():
    def make(scale):
        offset = np.array([1.0, 2.0])

        def helper(t):
            return t + offset

        def inner(t):
            return np.tanh(helper(t)) * scale

        return inner

    found = _recover(make(3.0))
    text = "\n".join(found.lines)
    assert "offset = np.array([1.0, 2.0], dtype='float64')" in text
    assert "def helper(t):" in text and "scale = 3.0" in text and text.endswith("fn = inner")
    space: dict = {"np": np}  # the script imports numpy as np first
    exec(text, space)
    assert np.allclose(space["fn"](np.zeros(2)), make(3.0)(np.zeros(2)))


def test_what_cannot_be_written_is_named_for_the_user():
    lock = __import__("threading").Lock()
    found = _recover(lambda t: (lock, t)[1])
    assert found.lines == ["fn = lambda t: (lock, t)[1]"]
    assert found.missing == ["lock: the _thread.lock the function refers to"]


def test_large_arrays_a_closure_refers_to_go_to_the_inputs_file(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    import gradcheck

    torch = pytest.importorskip("torch")
    weights = np.linspace(-1.0, 1.0, 200)
    bias = torch.linspace(0.0, 1.0, 200, dtype=torch.float64)

    def make(off):
        # the value is sin(t) * weights + bias whatever off is; the gradient is off times right
        return lambda t: ((torch.sin(t) * off - torch.sin(t).detach() * (off - 1.0))
                          * torch.as_tensor(weights) + bias).sum()

    with gradcheck.stream.using(tmp_path / "results.jsonl"):
        report = gradcheck.check(make(1.01), np.linspace(0.1, 1.0, 200),
                                 backend="torch", modes=("rev",))
    script = report.failures[0].reproducer
    assert "weights = _saved['value_" in script and "bias = __import__('torch').as_tensor(" \
        in script and "off = 1.01" in script and not script.startswith("#")
    root = str(Path(gradcheck.__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=tmp_path, env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"},
                         timeout=300)
    assert out.returncode == 1, out.stderr
    assert out.stdout.startswith("gradient check failed")
