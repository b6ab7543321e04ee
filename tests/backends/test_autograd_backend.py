"""HIPS autograd adapter: conformance, every mapped op through the numeric checks (order 2,
forward and reverse mode), and the training probes.  Skipped where autograd is not installed."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import Status
from gradcheck.backends.process_training import ParamRef
from gradcheck.backends.protocol_ops import PROTOCOL_OPS
from gradcheck.testing import format_conformance, run_conformance

pytest.importorskip("autograd", reason="autograd is not installed (pip install autograd)")


@pytest.fixture(scope="module")
def ag():
    return gradcheck.get_backend("autograd")


def test_conformance(ag):
    report = run_conformance(ag)
    assert report.passed, format_conformance(report)


@pytest.mark.parametrize("name", sorted(PROTOCOL_OPS))
def test_every_mapped_op_passes_order2(ag, name):
    args = PROTOCOL_OPS[name].sample(np.random.default_rng(3))
    report = gradcheck.check(ag.op(name), *args, backend=ag, order=2)
    assert report.passed, [r.message for r in report.failures]
    kinds = {r.kind for r in report.results if r.status is Status.PASSED}
    assert {"vjp", "jvp", "fwd_rev", "vjp_of_vjp", "jvp_of_vjp", "jvp_of_jvp"} <= kinds


def test_training_is_functional_and_sums_fan_out(ag):
    t = ag.training("cpu", "float64")
    w = np.array([1.0, -2.0, 3.0])
    x = np.array([0.5, 0.25, 2.0])
    t.create({"w": w})
    t.backward("mul", [ParamRef("w"), x])
    t.backward("mul", [ParamRef("w"), x])
    assert t.grads()["w"] == pytest.approx(x)
    t.backward("mul", [ParamRef("w"), ParamRef("w")])
    assert t.grads()["w"] == pytest.approx(2 * w)
    t.backward("mul", [ParamRef("w"), ParamRef("w", stop=True)])
    assert t.grads()["w"] == pytest.approx(w)
    assert t.clip_grad_norm(1.0) == pytest.approx(np.linalg.norm(w))
