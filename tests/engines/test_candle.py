"""Hugging Face Candle (Rust) through the process protocol (the real binary of adapters/candle).

Skipped with the reason where the binary is not built (``bash adapters/candle/install.sh``
builds it; it needs cargo)."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import Status
from gradcheck.backends.process_training import ParamRef
from gradcheck.backends.protocol_ops import PROTOCOL_OPS
from gradcheck.engines.candle import CandleBackend, unavailable_reason
from gradcheck.testing import format_conformance, run_conformance
from tests.support.adapter_checks import assert_training_probes

_REASON = unavailable_reason()
needs_binary = pytest.mark.skipif(_REASON is not None, reason=f"candle backend: {_REASON}")


@pytest.fixture(scope="module")
def candle():
    if _REASON is not None:
        pytest.skip(f"candle backend: {_REASON}")
    be = CandleBackend()
    yield be
    be.close()


def _sample(name, dtype, seed=1):
    return [a.astype(dtype) for a in PROTOCOL_OPS[name].sample(np.random.default_rng(seed))]


def test_hello_reports_candles_own_version(candle):
    hello = candle.hello()
    assert hello["engine"] == "candle"
    assert candle.version().startswith("0.11.")  # the candle-core version in Cargo.lock
    assert hello["capabilities"] == {"vjp": True, "jvp": False, "order2": False,
                                     "training": True}


def test_conformance(candle):
    report = run_conformance(candle)
    assert report.passed, format_conformance(report)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", ["tanh", "exp", "div", "matmul", "softmax", "sum"])
def test_ops_pass_the_numeric_checks(candle, name, dtype):
    report = gradcheck.check(candle.op(name), *_sample(name, dtype), backend=candle)
    assert report.passed, [r.message for r in report.failures]
    vjp = [r for r in report.results if r.kind == "vjp"]
    assert vjp and all(r.status is Status.PASSED for r in vjp)
    # Candle has float64: the rule is checked there, float32 inputs add a rounding check
    assert "eps(float64)" in vjp[0].allowed_source
    if dtype == "float32":
        rounding = [r for r in report.results if r.kind == "rounding"]
        assert rounding and all(r.status is Status.PASSED for r in rounding)
        assert "eps(float32)" in rounding[0].allowed_source
    skipped = {r.message for r in report.results if r.status is Status.SKIPPED}
    assert any("declares no forward mode" in m for m in skipped)


def test_a_missing_binary_says_how_to_build_it(monkeypatch, tmp_path):
    from gradcheck.engines import candle as candle_backend

    monkeypatch.setattr(candle_backend, "_DEFAULT_BIN", tmp_path / "gradcheck-candle")
    monkeypatch.delenv("GRADCHECK_CANDLE_BIN", raising=False)
    assert "build it with bash adapters/candle/install.sh" in unavailable_reason()
    monkeypatch.setenv("GRADCHECK_CANDLE_BIN", str(tmp_path / "elsewhere"))
    assert "check GRADCHECK_CANDLE_BIN" in unavailable_reason()
    with pytest.raises(NotImplementedError, match="not available"):
        CandleBackend().command()


@needs_binary
def test_a_wrong_rule_in_the_child_is_caught():
    """GRADCHECK_CANDLE_MUTANT=tanh: forward tanh(x), gradient 1 (straight-through)."""
    mutant = CandleBackend(env={"GRADCHECK_CANDLE_MUTANT": "tanh"})
    try:
        assert "MUTANT tanh" in mutant.hello()["semantics"]["notes"]
        x = _sample("tanh", "float64")[0]
        out = mutant.evaluate(mutant.op("tanh"), [x], "cpu")[0]
        np.testing.assert_allclose(out, np.tanh(x), rtol=1e-15)  # the forward is right
        report = gradcheck.check(mutant.op("tanh"), x, backend=mutant)
        assert not report.passed
        assert any(r.kind == "vjp" and r.status is Status.FAILED for r in report.results)
    finally:
        mutant.close()


def test_order2_is_refused_with_the_reason(candle):
    with pytest.raises(NotImplementedError, match="order-2"):
        candle.vjp_function(candle.op("tanh"), (0,), 1)
    report = gradcheck.check(candle.op("tanh"), _sample("tanh", "float64")[0], backend=candle,
                             order=2)
    assert report.passed, [r.message for r in report.failures]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_training_probes_measured(candle, dtype):
    rel = 1e-12 if dtype == np.float64 else 1e-6
    assert_training_probes(candle.training("cpu", np.dtype(dtype).name), dtype, rel=rel)


def test_check_semantics_passes_with_the_measured_behaviour(candle):
    report = gradcheck.check_semantics(candle)
    assert report.passed, [r.message for r in report.failures]
    passed = " | ".join(r.message for r in report.results if r.status is Status.PASSED)
    assert "second backward without reset (declared functional: 1x the first)" in passed
    # the seed report's two-pass clip: backward(loss * max_norm / norm) without reset
    assert "rescaled by s = max_norm / norm" in passed and "effective step = 1 x" in passed
    assert "(w read twice) vs FD" in passed  # fan-out sums
    assert "w * detach(w)" in passed  # detach stops the flow


@needs_binary
def test_an_accumulating_child_fails_the_functional_declaration():
    """GRADCHECK_CANDLE_MUTANT=accumulate: train.backward adds into the stored GradStore."""
    mutant = CandleBackend(env={"GRADCHECK_CANDLE_MUTANT": "accumulate"})
    try:
        report = gradcheck.check_semantics(mutant, probes=["accumulation"])
        assert not report.passed
        assert any("declared functional" in r.message for r in report.failures)
    finally:
        mutant.close()


def test_two_pass_clip_equals_clip_by_norm(candle):
    """The seed's pattern: measure the GradStore norm, then backward(loss * max_norm / norm)
    gives the same gradients as clipping the first store (Candle's backward is linear)."""
    w = np.array([1.0, -2.0, 3.0])
    x = np.array([0.5, 4.0, 2.0])
    t = candle.training("cpu", "float64")
    t.create({"w": w})
    t.backward("mul", [ParamRef("w"), x])
    norm = t.clip_grad_norm(1.0)
    clipped = t.grads()["w"]
    t.backward("mul", [ParamRef("w"), x], weights=np.full(3, 1.0 / norm))
    assert norm == pytest.approx(np.linalg.norm(x), rel=1e-15)
    np.testing.assert_allclose(t.grads()["w"], clipped, rtol=1e-15)
    np.testing.assert_allclose(clipped, x / np.linalg.norm(x), rtol=1e-15)
    t.close()


# ---- the seeds' VarMap / norm / round-trip questions (candle_backend.check_varmap_model) -----
def _by_name(report):
    return {r.name: r for r in report.results}


def test_varmap_gradients_extracted_by_name_match_fd(candle):
    from gradcheck.engines.candle import VARMAP_NAMES
    from gradcheck.model_audit.model_flow import check_varmap_model

    report = check_varmap_model(candle)
    assert report.passed, [r.message for r in report.failures]
    got = _by_name(report)
    assert "one to one" in got["varmap.names"].message
    for name in VARMAP_NAMES:
        r = got[f"varmap.grad.{name}"]
        assert r.status is Status.PASSED and r.discrepancy_ratio < 0.1, r.message
        assert got[f"flow.{name}"].details["flow"] == "flows"
    assert got["grad_norm"].status is Status.PASSED
    assert got["grad_norm"].relative_discrepancy < 1e-15


@needs_binary
@pytest.mark.parametrize("mutant, failing, bug", [
    ("varmap_swap", {"varmap.grad.fc1.weight", "varmap.grad.fc2.weight"},
     "gradient disagrees with finite differences"),
    ("varmap_index", {"varmap.names", "grad_norm"} | {f"varmap.grad.{n}" for n in
                                                       ("fc1.bias", "fc1.weight", "fc2.bias",
                                                        "fc2.weight")},
     "gradient extracted under a name other than the registered one"),
    ("norm_proxy", {"grad_norm"}, "loss-proxy gradient norm"),
])
def test_varmap_and_norm_mutants_are_caught(mutant, failing, bug):
    from gradcheck.model_audit.model_flow import check_varmap_model

    be = CandleBackend(env={"GRADCHECK_CANDLE_MUTANT": mutant})
    try:
        report = check_varmap_model(be)
    finally:
        be.close()
    assert {r.name for r in report.failures} == failing
    assert any(r.details.get("bug_class") == bug for r in report.failures)
    if mutant == "norm_proxy":
        assert "the monitor reports |loss|" in report.failures[0].message


@pytest.mark.parametrize("via", ["to_vec1", "to_vec2", "to_scalar"])
def test_host_round_trip_is_a_blocked_flow_finding_that_says_where(candle, via):
    from gradcheck.model_audit.model_flow import check_varmap_model

    report = check_varmap_model(candle, roundtrip=("hidden", via))
    assert {r.name for r in report.failures} == {"flow.fc1.weight", "flow.fc1.bias"}
    for r in report.failures:
        assert r.details["bug_class"] == "host round trip blocks gradients"
        assert f"host round trip at stage 'hidden' ({via} then Tensor::new)" in r.message
        assert "but the GradStore holds no gradient" in r.message  # absent, not zeros
    got = _by_name(report)
    assert got["varmap.grad.fc2.weight"].status is Status.PASSED  # downstream still flows
    # at the logits every parameter is upstream
    late = check_varmap_model(candle, roundtrip=("logits", via))
    assert len(late.failures) == 4
    # declared, the same round trip passes
    assert check_varmap_model(candle, roundtrip=("hidden", via), declared=("hidden",)).passed


def test_detach_declared_passes_undeclared_is_flagged(candle):
    from gradcheck.model_audit.model_flow import check_varmap_model

    flagged = check_varmap_model(candle, detach="hidden")
    assert {r.name for r in flagged.failures} == {"flow.fc1.weight", "flow.fc1.bias"}
    assert all(r.details["bug_class"] == "detach in the input path" and
               "detach at stage 'hidden' (Tensor::detach)" in r.message
               for r in flagged.failures)
    declared = check_varmap_model(candle, detach="hidden", declared=("hidden",))
    assert declared.passed, [r.message for r in declared.failures]
    assert "blocked as declared" in _by_name(declared)["flow.fc1.weight"].message
    with pytest.raises(ValueError, match="declared stage"):
        check_varmap_model(candle, declared=("nowhere",))
