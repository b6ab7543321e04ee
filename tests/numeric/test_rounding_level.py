"""Failures at the rounding level stay failures but are labelled so (docs/error-model.md
section 5b): torch's ``native_layer_norm`` of one element returns ~1e-14 for an exact 0; a
wrong rule's failure is never labelled so."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.oracle import error_model as tolerance
from gradcheck.report.model import table_data

torch = pytest.importorskip("torch")

X = np.array([-4.8270])  # the OpInfo sample native_layer_norm[10]


def _layer_norm(x, w):
    return torch.native_layer_norm(x, (1,), w, None, 1e-5)[0]


def test_the_rounding_level_comes_from_the_error_model():
    assert tolerance.ROUNDING_LEVEL == tolerance.ROUNDING_GAMMA / tolerance.RESOLUTION
    level = tolerance.rounding_level(1e-14, 0.0, 1.0, "float64")
    assert level == pytest.approx(tolerance.ROUNDING_LEVEL * tolerance.eps("float64"))
    assert tolerance.rounding_level(1e-12, 0.0, 1.0, "float64") is None
    assert tolerance.rounding_level(1e-12, 1e4, 1.0, "float64") is not None  # terms scale it
    assert tolerance.rounding_level(0.0, 0.0, 1.0, "float64") is None  # nothing to label


def test_layer_norm_of_one_element_is_reported_and_labelled_rounding_level():
    report = gradcheck.check(_layer_norm, X, X.copy(), backend="torch", modes=("rev",))
    failed = report.failures
    assert failed and not report.passed  # still reported
    for r in failed:
        assert r.details["rounding_level"] >= r.discrepancy > 0
        assert "at the rounding level" in r.message
    assert "at the rounding level" in gradcheck.api.format_failure(report)
    data = table_data(list(report.results))
    assert any("at the rounding level" in s for s in data["strings"])


@pytest.mark.parametrize("delta", [1e-7, -2.0])
def test_a_wrong_rule_is_never_labelled_rounding_level(delta):
    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.sin(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * torch.cos(x) * (1 + delta)

    x = np.random.default_rng(0).standard_normal(50)
    report = gradcheck.check(Scaled.apply, x, backend="torch", modes=("rev",))
    (vjp,) = [r for r in report.results if r.kind == "vjp"]
    assert vjp.status is gradcheck.Status.FAILED
    assert "rounding_level" not in vjp.details and "rounding level" not in vjp.message
