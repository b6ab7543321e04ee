"""Gorgonia (Go) through the process protocol (the real Go child, adapters/gorgonia).

Skipped with the reason where the adapter binary is not built (``bash
adapters/gorgonia/install.sh`` builds it; it needs Go)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from adapter_checks import assert_training_probes

import gradcheck
from gradcheck import Status
from gradcheck.backends.gorgonia_backend import GorgoniaBackend, unavailable_reason
from gradcheck.backends.process_training import ParamRef
from gradcheck.backends.protocol_ops import PROTOCOL_OPS
from gradcheck.testing import format_conformance, run_conformance

_ADAPTER = Path(__file__).resolve().parents[2] / "adapters" / "gorgonia"
_REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"gorgonia backend: {_REASON}")


@pytest.fixture(scope="module")
def gorgonia():
    be = GorgoniaBackend()
    yield be
    be.close()


def _sample(name, seed=0, dtype=np.float64):
    return [a.astype(dtype) for a in PROTOCOL_OPS[name].sample(np.random.default_rng(seed))]


def test_conformance(gorgonia):
    report = run_conformance(gorgonia)
    assert report.passed, format_conformance(report)
    assert gorgonia.version() == "v0.9.18"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["tanh", "exp", "div", "matmul", "softmax", "sum"])
def test_first_order_rules_pass(gorgonia, name, dtype):
    report = gradcheck.check(gorgonia.op(name), *_sample(name, 1, dtype), backend=gorgonia,
                             modes=("rev",))
    assert report.passed, [r.message for r in report.failures]
    vjp = [r for r in report.results if r.kind == "vjp"]
    assert vjp and all(r.status is Status.PASSED for r in vjp)


def test_order2_where_gorgonia_gets_it_right_and_skipped_elsewhere(gorgonia):
    x = _sample("sin", 2)[0]
    report = gradcheck.check(gorgonia.op("sin"), x, backend=gorgonia, order=2)
    assert report.passed, [r.message for r in report.failures]
    assert any(r.kind == "vjp_of_vjp" and r.status is Status.PASSED for r in report.results)
    report = gradcheck.check(gorgonia.op("tanh"), x, backend=gorgonia, order=2)
    assert report.passed
    skipped = [r.message for r in report.results if r.status is Status.SKIPPED]
    assert any("previously differentiated" in m for m in skipped), skipped


def test_wrong_rule_inside_gorgonia_is_caught():
    """mutant_sin: sin with the symbolic derivative cos(x) * 1.001, a Gorgonia op of the child
    listed only under GRADCHECK_GORGONIA_MUTANT=1; the correct sin passes in the same child."""
    be = GorgoniaBackend(env={"GRADCHECK_GORGONIA_MUTANT": "1"})
    try:
        x = _sample("sin", 3)[0]
        bad = gradcheck.check(be.op("mutant_sin"), x, backend=be, modes=("rev",))
        assert not bad.passed
        assert any(r.kind == "vjp" and "DISAGREES" in r.message for r in bad.failures)
        good = gradcheck.check(be.op("sin"), x, backend=be, modes=("rev",))
        assert good.passed, [r.message for r in good.failures]
    finally:
        be.close()
    assert GorgoniaBackend().op("mutant_sin") is None  # not listed without the variable


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_training_probes(gorgonia, dtype):
    # Gorgonia accumulates: a second RunAll without solver.Step adds (factor 2)
    rel = 1e-12 if dtype == "float64" else 1e-6
    assert_training_probes(gorgonia.training("cpu", dtype), np.dtype(dtype),
                           accumulate_factor=2.0, rel=rel)


def test_runall_twice_adds_and_solver_step_clears(gorgonia):
    """The Gorgonia thread's question, measured: a second RunAll without solver.Step adds into
    the dual values; VanillaSolver.Step applies the sum and zeroes them."""
    t = gorgonia.training("cpu", "float64")
    w, x = np.array([1.0, -2.0, 3.0]), np.array([0.5, 0.25, 2.0])
    t.create({"w": w})
    for k in (1, 2, 3):
        t.backward("mul", [ParamRef("w"), x])
        np.testing.assert_allclose(t.grads()["w"], k * x, rtol=1e-15)
    t.step(0.1)
    np.testing.assert_allclose(t.params()["w"], w - 0.1 * 3 * x, rtol=1e-15)
    assert not np.any(t.grads()["w"])  # Step zeroed the dual value
    t.backward("mul", [ParamRef("w"), x])
    np.testing.assert_allclose(t.grads()["w"], x, rtol=1e-15)
    t.close()


def test_check_semantics_measures_the_declared_behaviour(gorgonia):
    report = gradcheck.check_semantics(gorgonia)
    assert report.passed, [r.message for r in report.failures]
    by_name = {r.name: r for r in report.results}
    assert by_name["accumulation.second_backward"].status is Status.PASSED
    # backward, then backward of the loss rescaled by s without reset: Gorgonia's dual values
    # hold g + s g, so the step is (1 + s) / s = 5x the intended clipped step
    rescale = by_name["accumulation.rescale_backward_again"]
    assert rescale.status is Status.PASSED
    assert rescale.details["effective_factor"] == pytest.approx(5.0, rel=1e-9)


@pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed")
def test_go_measurements_and_reproducers():
    """adapters/gorgonia/measured_test.go: the thread's questions (fan-out, RunAll twice, Step,
    Let) and the reproducers of docs/known-discrepancies.md, against Gorgonia's API."""
    proc = subprocess.run(["go", "test", "-count=1", "-v", "."], cwd=_ADAPTER,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "GOFLAGS": "-mod=mod"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in ("TestThreadFanOutAccumulateStep", "TestLetKeepsTheStaleGradient",
                 "TestReproLog2Derivative", "TestReproInverseSqrtDerivative",
                 "TestReproLogSumExp", "TestReproSoftmaxRowMax",
                 "TestReproSecondGradReusesTheFirst"):
        assert f"--- PASS: {name}" in proc.stdout, proc.stdout[-3000:]
