"""The minimal adapter of docs/adapters.md, run as written: the contract is enough for the
harness to pass right derivatives and catch wrong ones through a third-party engine."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import gradcheck
from gradcheck import Status

DOC = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"

autograd = pytest.importorskip("autograd")
anp = pytest.importorskip("autograd.numpy")


@pytest.fixture(scope="module")
def adapter_module():
    text = DOC.read_text().split("## A minimal adapter", 1)[1]
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    module = types.ModuleType("docs_autograd_adapter")
    exec(compile(code, str(DOC), "exec"), module.__dict__)  # noqa: S102
    sys.modules[module.__name__] = module
    yield module
    sys.modules.pop(module.__name__, None)


X = np.random.default_rng(0).standard_normal((3, 4))


def test_correct_functions_pass(adapter_module):
    be = adapter_module.AutogradBackend()
    for dtype in ("float64", "float32"):
        report = gradcheck.check(lambda x: anp.tanh(x) ** 2 * anp.sin(x), X.astype(dtype),
                                 backend=be)
        assert report.passed, gradcheck.format_failure(report)
        kinds = {r.kind for r in report if r.status is Status.PASSED}
        assert "vjp" in kinds and (dtype == "float64" or "rounding" in kinds)
    assert {r.kind for r in report if r.status is Status.SKIPPED} == {"jvp"}  # declared absent


def test_several_outputs_and_an_integer_input(adapter_module):
    def f(x, y, n):
        return anp.sin(x) * y * n, anp.exp(x) + y

    report = gradcheck.check(f, X, X[::-1].copy(), np.array(3), modes=("rev",),
                             backend=adapter_module.AutogradBackend())
    assert report.passed, gradcheck.format_failure(report)
    assert {(r.output_index, r.input_index) for r in report if r.kind == "vjp"} == {
        (0, 0), (0, 1), (1, 0), (1, 1)}


def test_a_wrong_rule_is_caught_through_the_adapter(adapter_module):
    @autograd.extend.primitive
    def bad_sin(x):
        return np.sin(x)

    autograd.extend.defvjp(bad_sin, lambda ans, x: lambda g: -g * np.cos(x))
    report = gradcheck.check(bad_sin, X, backend=adapter_module.AutogradBackend())
    assert {r.kind for r in report.failures} == {"vjp"}


def test_registered_by_module_attr_path(adapter_module):
    be = gradcheck.get_backend("docs_autograd_adapter:AutogradBackend")
    assert be.name == "autograd" and be.version()
    assert gradcheck.check(lambda x: anp.cos(x), X, backend=be).passed
