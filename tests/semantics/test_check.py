"""Every semantic bug class is caught by check_semantics with a message naming it, and the
real adapters pass the same probes (families run one at a time to keep this file fast)."""

from __future__ import annotations

import pytest

from gradcheck.backends.base import Accumulation, Semantics
from gradcheck.core.results import Status
from gradcheck.semantics.check import check_semantics
from tests.support.semantic_mutants import (
    DoublingNumpy,
    ElementwiseClip,
    PostClipReport,
    ScaleIgnoringBackward,
    SilentNonFinite,
    UnitNormClip,
    UnvalidatedClip,
    backend_with,
    jax_mutants,
    numpy_backend,
    torch_mutants,
)


def _result(report, name):
    found = [r for r in report.results if r.name == name]
    assert found, f"no result {name!r}; got {[r.name for r in report.results]}"
    return found[0]


def _failed_with(report, name: str, bug: str):
    r = _result(report, name)
    assert r.status is Status.FAILED, f"{name} should fail: {r.message}"
    assert r.message.startswith(f"[{bug}]"), r.message
    assert r.details["bug_class"] == bug
    return r


@pytest.fixture(scope="module")
def numpy_clip_ok():
    return check_semantics("numpy", probes=("clip",))


# -- accumulation ---------------------------------------------------------------------------

def test_doubling_on_second_backward_is_caught():
    rep = check_semantics(numpy_backend(DoublingNumpy), probes=("accumulation",))
    r = _failed_with(rep, "accumulation.second_backward", "doubling on the second backward")
    assert r.details["factor"] == pytest.approx(2.0)
    assert "declared functional: 1x" in r.message
    # the same engine turns the measure-rescale-backward-again clip into a (1 + s)/s step
    r = _failed_with(rep, "accumulation.rescale_backward_again",
                     "double-backward clipping that doubles the step")
    assert r.details["effective_factor"] == pytest.approx(5.0)


def test_accumulating_engine_declared_functional_is_caught():
    pytest.importorskip("torch")
    from gradcheck.engines.torch.backend import TorchBackend
    from gradcheck.engines.torch.training import TorchTraining

    lying = backend_with(TorchBackend, TorchTraining,
                         Semantics(Accumulation.FUNCTIONAL, "detach", False))
    rep = check_semantics(lying, probes=("accumulation",))
    _failed_with(rep, "accumulation.second_backward", "doubling on the second backward")
    _failed_with(rep, "accumulation.retained_graph", "doubling on the second backward")


def test_reset_that_does_not_reset_is_caught():
    pytest.importorskip("torch")
    from gradcheck.engines.torch.backend import TorchBackend

    rep = check_semantics(backend_with(TorchBackend, torch_mutants()["no_reset"]),
                          probes=("accumulation",))
    r = _failed_with(rep, "accumulation.reset", "reset that does not reset")
    assert "still have norm" in r.message


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
def test_real_adapters_pass_accumulation(backend):
    pytest.importorskip(backend)
    rep = check_semantics(backend, probes=("accumulation",))
    assert rep.passed, [r.message for r in rep.failures]
    step = _result(rep, "accumulation.rescale_backward_again")
    expected = 5.0 if backend == "torch" else 1.0  # (1 + s) / s with s = 1/4 when accumulating
    assert step.details["effective_factor"] == pytest.approx(expected)


# -- clip -----------------------------------------------------------------------------------

def test_real_numpy_clip_passes(numpy_clip_ok):
    assert numpy_clip_ok.passed, [r.message for r in numpy_clip_ok.failures]


@pytest.mark.parametrize("mutant, probe, bug", [
    (ElementwiseClip, "clip.direction", "clip that changes direction"),
    (UnitNormClip, "clip.bound", "clip that ignores the threshold"),
    (UnitNormClip, "clip.below_threshold", "clip that ignores the threshold"),
    (PostClipReport, "clip.pre_post", "pre/post-clip norm mix-up"),
    (UnvalidatedClip, "clip.threshold_validation",
     "invalid clip threshold applied instead of rejected"),
    (SilentNonFinite, "clip.nonfinite", "non-finite gradients not flagged"),
    (ScaleIgnoringBackward, "clip.linearity[c=-1]", "gradient not linear in the loss scale"),
])
def test_clip_mutants_are_caught(mutant, probe, bug, numpy_clip_ok):
    rep = check_semantics(numpy_backend(mutant), probes=("clip",))
    _failed_with(rep, probe, bug)
    assert _result(numpy_clip_ok, probe).status is Status.PASSED


def test_reversing_threshold_message_says_reversed():
    rep = check_semantics(numpy_backend(UnvalidatedClip), probes=("clip",))
    assert "gradients reversed" in _result(rep, "clip.threshold_validation").message


def test_low_precision_norm_in_float16_is_caught():
    pytest.importorskip("jax")
    from gradcheck.engines.jax.backend import JaxBackend

    rep = check_semantics(backend_with(JaxBackend, jax_mutants()["naive_norm"]),
                          probes=("clip",))
    r = _failed_with(rep, "clip.low_precision_norm[float16:large]",
                     "low-precision gradient norm accumulated in too little precision")
    assert r.actual == float("inf") and r.expected == pytest.approx(19200.0)


# -- fan-out and runners --------------------------------------------------------------------

def test_set_instead_of_add_is_caught():
    pytest.importorskip("torch")
    from gradcheck.engines.torch.backend import TorchBackend

    rep = check_semantics(backend_with(TorchBackend, torch_mutants()["set_not_add"]),
                          probes=("fanout",), examples=10)
    bug = "set-instead-of-add on fan-out"
    r = _failed_with(rep, "fanout.shared_operand", bug)
    assert r.details["worst_element"].startswith("b[")  # b is read twice in a*b + b*c
    _failed_with(rep, "fanout.branches", bug)
    r = _failed_with(rep, "fanout.random_dags", bug)
    assert "minimal failing DAG" in r.message and "fan-out:" in r.message


def test_stale_cache_on_rebinding_is_caught():
    pytest.importorskip("jax")
    from gradcheck.engines.jax.backend import JaxBackend

    rep = check_semantics(backend_with(JaxBackend, jax_mutants()["stale_jit"]),
                          probes=("fanout",), examples=3)
    assert _result(rep, "fanout.compiled_rerun").status is Status.PASSED
    _failed_with(rep, "fanout.rebinding", "stale cache on rebinding")


# -- detach ---------------------------------------------------------------------------------

def test_stop_gradient_that_leaks_is_caught():
    pytest.importorskip("torch")
    from gradcheck.engines.torch.backend import TorchBackend

    rep = check_semantics(backend_with(TorchBackend, torch_mutants()["leaky_stop"]),
                          probes=("detach",))
    for name in ("detach.reverse", "detach.forward", "detach.order2_rev",
                 "detach.order2_fwd_over_rev", "detach.order2_fwd_over_fwd",
                 "detach.no_grad_region"):
        _failed_with(rep, name, "stop-gradient that leaks")


def test_numpy_declares_no_stop_gradient_and_is_skipped():
    rep = check_semantics("numpy", probes=("detach", "fanout"))
    assert {r.status for r in rep.results} == {Status.SKIPPED}
    assert not rep.passed and not rep.decided  # nothing decided is not a pass


def test_invalid_arguments_are_rejected():
    from gradcheck.core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="probes"):
        check_semantics("numpy", probes=("nope",))
    with pytest.raises(InvalidArgument, match="dtype"):
        check_semantics("numpy", dtype="int8")
    with pytest.raises(InvalidArgument, match="device"):
        check_semantics("numpy", device="tpu")


def test_results_serialise_and_tabulate(numpy_clip_ok):
    from gradcheck.core.results import CheckResult
    from gradcheck.semantics.check import semantics_table

    for r in numpy_clip_ok.results:
        back = CheckResult.from_json(r.to_json())
        assert back.name == r.name and back.status is r.status and back.kind == "semantic"
    table = semantics_table({"numpy": numpy_clip_ok})
    assert "| `clip.direction` | passed |" in table
