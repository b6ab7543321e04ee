"""Gorgonia (Go) through the process protocol (the real Go child, adapters/gorgonia).

Skipped with the reason where the adapter binary is not built (``bash
adapters/gorgonia/install.sh`` builds it; it needs Go)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import gradcheck
from gradcheck import Status
from gradcheck.backends.process_training import ParamRef
from gradcheck.backends.protocol_ops import PROTOCOL_OPS
from gradcheck.engines.gorgonia import GorgoniaBackend, unavailable_reason
from gradcheck.testing import format_conformance, run_conformance
from tests.support.adapter_checks import assert_training_probes

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


# ---- the flow map on a model written in Gorgonia (gorgonia_backend.check_model_flow) ----------
def test_model_gradients_by_learnable_name_match_fd(gorgonia):
    from gradcheck.engines.gorgonia import MODEL_NAMES
    from gradcheck.model_audit.model_flow import check_model_flow

    report = check_model_flow(gorgonia)
    assert report.passed, [r.message for r in report.failures]
    by = {r.name: r for r in report.results}
    assert by["model.names"].details["extracted"] == sorted(MODEL_NAMES)
    ratios = [by[f"model.grad.{n}"].discrepancy_ratio for n in MODEL_NAMES]
    assert max(ratios) < 0.1, ratios
    assert {by[f"flow.{n}"].details["flow"] for n in MODEL_NAMES} == {"flows"}
    assert by["grad_norm"].status is Status.PASSED and by["grad_norm"].details["grad_norm"] > 0


@pytest.mark.parametrize("mutant, failing, bug", [
    ("model_swap", {"model.grad.fc1.weight", "model.grad.fc2.weight"},
     "gradient disagrees with finite differences"),
    ("model_norm_proxy", {"grad_norm"}, None),
])
def test_model_mutants_are_caught(mutant, failing, bug):
    from gradcheck.model_audit.model_flow import check_model_flow

    with _child({"GRADCHECK_GORGONIA_MUTANT": mutant}) as be:
        failures = check_model_flow(be).failures
    assert {r.name for r in failures} == failing
    if bug:
        assert all(r.details.get("bug_class") == bug for r in failures)
    else:
        assert "the monitor reports |loss|" in failures[0].message


@contextlib.contextmanager
def _child(env):
    be = GorgoniaBackend(env=env)
    try:
        yield be
    finally:
        be.close()


@pytest.mark.parametrize("via", ["constant", "input"])
def test_model_host_round_trip_is_a_blocked_flow_finding_naming_the_stage(gorgonia, via):
    from gradcheck.model_audit.model_flow import check_model_flow

    report = check_model_flow(gorgonia, roundtrip=("hidden", via))
    assert {r.name for r in report.failures} == {"flow.fc1.weight", "flow.fc1.bias"}
    for r in report.failures:
        assert r.details["bug_class"] == "host round trip blocks gradients"
        assert r.details["cut_points"] == ["hidden"]
        assert "host round trip at stage 'hidden'" in r.message
        assert "gorgonia.Grad refused fc1.bias, fc1.weight" in r.message
    assert {r.name: r for r in report.results}["model.grad.fc2.weight"].ok  # still flows
    late = check_model_flow(gorgonia, roundtrip=("logits", via))
    assert {r.name for r in late.failures} == {f"flow.{n}" for n in
                                               ("fc1.bias", "fc1.weight", "fc2.bias",
                                                "fc2.weight")}
    assert all("stage 'logits'" in r.message for r in late.failures)
    declared = check_model_flow(gorgonia, roundtrip=("hidden", via), declared=("hidden",))
    assert declared.passed, [r.message for r in declared.failures]
    assert any("blocked as declared" in r.message for r in declared.results)
    with pytest.raises(ValueError, match="declared stage"):
        check_model_flow(gorgonia, declared=("nowhere",))
