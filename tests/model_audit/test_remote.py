"""``gradcheck.audit_process``: a user's own model over the model protocol, against the Python
reference peer (``tests/support/model_peer.py``): the correct model passes every check in both
dtypes; each mutant (a real user bug) fails its check, with its correct twin passing; a program
that crashes, hangs, writes garbage or refuses a dtype gives a clear result and keeps the
results before it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gradcheck import Status
from gradcheck.core.errors import InvalidArgument
from gradcheck.core.results import FlowStatus
from gradcheck.model_audit.remote import audit_process
from gradcheck.model_audit.remote_report import localize

PEER = str(Path(__file__).resolve().parents[1] / "support" / "model_peer.py")


def peer(variant: str, *extra: str) -> list[str]:
    return [sys.executable, PEER, "--variant", variant, *extra]


def audit(variant: str, **kw):
    kw.setdefault("step", False)
    return audit_process(peer(variant), **kw)


def failed(report) -> set[str]:
    return {r.name for r in report.results if r.status in (Status.FAILED, Status.ERROR)}


def by_name(report, name: str, dtype: str | None = None):
    hits = [r for r in report.results if r.name == name and (dtype is None or r.dtype == dtype)]
    assert len(hits) == 1, (name, [r.name for r in report.results])
    return hits[0]


GLOBAL = {f"grad.global[{i}]" for i in range(4)}
TENSORS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]


@pytest.fixture(scope="module")
def correct():
    return audit("correct")


def test_correct_model_passes_every_check_in_both_dtypes(correct):
    assert failed(correct) == set()
    names = {r.name for r in correct.results}
    assert {"rng.determinism", "names", *GLOBAL} <= names
    for t in TENSORS:
        assert {f"flow[{t}]", f"grad[{t}]", f"rounding[float32][{t}]"} <= names
        assert correct[t].status is FlowStatus.FLOWS
    assert correct.fd_dtype == "float64" and correct.dtypes == ("float64", "float32")
    assert correct.passed
    assert correct.backend == "numpy-reference"
    assert all(r.backend == "numpy-reference" for r in correct.results)
    assert "reproduce: gradcheck model --command" in correct.summary()


def test_cost_is_seeds_and_steps_only(correct):
    t = correct.traffic
    # hello, 2 describe, 2 loss, 2 grads, one line per direction (6 tensors + 4 global), one
    # float32 projection per tensor, done
    assert t.requests["model.line"] == 6 + 4 + 6
    assert t.total_requests == 1 + 2 + 2 + 2 + 16 + 1
    assert t.bytes_sent < 20_000
    assert correct.forwards > 0


@pytest.mark.parametrize("variant", ["absent_grad", "zero_grad"])
def test_blocked_first_layer_is_caught_and_localized(variant):
    r = audit(variant)
    assert failed(r) == {"flow[fc1.weight]", "flow[fc1.bias]"} | GLOBAL
    assert r["fc1.weight"].status is FlowStatus.BLOCKED_UNINTENTIONALLY
    assert r["fc2.weight"].status is FlowStatus.FLOWS
    msg = by_name(r, "flow[fc1.weight]").message
    where = "absent from the gradient store" if variant == "absent_grad" else "present in the " \
        "gradient store but zero"
    assert where in msg and "the loss depends on it" in msg
    assert "every fc1.*" in msg and "none of fc2.*, fc3.*" in msg
    bug = by_name(r, "flow[fc1.weight]").details["bug_class"]
    assert bug == ("host round trip blocks gradients" if variant == "absent_grad"
                   else "detach in the input path")
    assert "the blocked tensors (fc1.weight, fc1.bias) are in its scope" in by_name(
        r, "grad.global[0]").message


def test_blocked_as_declared_is_the_correct_twin():
    r = audit("absent_grad", stop_gradient=("fc1.*",))
    assert failed(r) == set()
    assert r["fc1.weight"].status is FlowStatus.BLOCKED_AS_INTENDED
    assert "fc1.weight" not in by_name(r, "grad.global[0]").message.split("tensor not declared")[1]


def test_declared_stop_that_flows_is_a_leak():
    r = audit("correct", stop_gradient=("fc3.bias",), dtypes=("float64",))
    assert failed(r) == {"flow[fc3.bias]"}
    assert r["fc3.bias"].status is FlowStatus.LEAK


def test_wrong_gradient_fails_its_tensor_only():
    r = audit("wrong_grad")
    assert failed(r) == {"grad[fc2.weight]"} | GLOBAL
    res = by_name(r, "grad[fc2.weight]")
    assert "-1 x FD's" in res.message and "DISAGREES" in res.message and "allowed" in res.message
    assert res.details["bug_class"] == "gradient disagrees with finite differences"


def test_unregistered_variable_fails_names():
    r = audit("unregistered")
    assert failed(r) == {"names"}
    res = by_name(r, "names")
    assert "not in the registry" in res.message and "shape [8]" in res.message


def test_nondeterministic_loss_fails_determinism_and_makes_fd_inconclusive():
    r = audit("nondeterministic")
    assert failed(r) == {"rng.determinism"}
    assert by_name(r, "grad[fc1.weight]").status is Status.INCONCLUSIVE
    assert by_name(r, "rounding[float32][fc1.weight]").status is Status.INCONCLUSIVE
    assert r.stochastic


def test_refused_float64_runs_fd_in_float32():
    r = audit("f32_only")
    assert failed(r) == set()
    assert r.fd_dtype == "float32" and "float64" in r.refused
    assert by_name(r, "build[float64]").status is Status.SKIPPED
    assert by_name(r, "grad[fc1.weight]", "float32").status is Status.PASSED
    assert any("FD runs in float32" in n for n in r.notes)
    assert not any(x.name.startswith("rounding[") for x in r.results)


def test_float32_only_catches_a_wrong_gradient():
    r = audit("wrong_grad", dtypes=("float32",))
    assert "grad[fc2.weight]" in failed(r)


def test_params_and_exclude_select_tensors():
    r = audit("correct", params=("fc2.*", "fc3.*"), exclude=("fc3.bias",), directions=1,
              dtypes=("float64",))
    assert [p.name for p in r.parameters] == ["fc2.weight", "fc2.bias", "fc3.weight"]
    with pytest.raises(InvalidArgument, match="names no tensor"):
        audit("correct", params=("conv*",))


def test_crash_keeps_earlier_results_and_reports_stderr():
    r = audit("crash_on_line")
    assert by_name(r, "rng.determinism").status is Status.PASSED
    err = by_name(r, "flow[fc1.weight]")
    assert err.status is Status.ERROR
    assert "exit code 101" in err.message and "panicked" in err.message
    assert "restarted" not in err.message


def test_hang_is_a_timeout_error():
    r = audit("hang_on_grads", request_timeout=2)
    assert by_name(r, "rng.determinism").status is Status.PASSED
    assert "within 2 s (timeout)" in by_name(r, "grads[float64]").message


def test_garbage_line_is_an_error():
    r = audit("garbage_on_loss")
    assert "not JSON" in by_name(r, "rng.determinism").message


def test_not_a_model_program():
    r = audit("not_model")
    assert [x.status for x in r.results] == [Status.ERROR]
    assert "kind 'ops', not 'model'" in r.results[0].message


def test_missing_program():
    r = audit_process(["/nonexistent/program"], step=False)
    assert r.results[0].status is Status.ERROR and "cannot start" in r.results[0].message


def test_prints_on_stdout_do_not_corrupt_the_stream():
    assert failed(audit("prints", dtypes=("float64",))) == set()


def test_invalid_arguments():
    with pytest.raises(InvalidArgument):
        audit_process("true", dtypes=("float16",))
    with pytest.raises(InvalidArgument):
        audit_process("true", per_tensor=0)


def test_localize_by_prefix():
    from gradcheck.core.results import ParameterFlow

    def rec(name: str, status: FlowStatus) -> ParameterFlow:
        return ParameterFlow(name, (2,), status, False, True, 0.0, 0.0, 0.0, Status.SKIPPED)

    b, f = FlowStatus.BLOCKED_UNINTENTIONALLY, FlowStatus.FLOWS
    got = localize([rec("fc1.weight", b), rec("fc1.bias", b), rec("norm.weight", b),
                     rec("fc2.weight", f), rec("fc2.bias", f)])
    assert got == "blocked: every fc1.*, norm.*; none of fc2.*"
    assert localize([rec("a", f)]) == ""


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_correct_training_step_passes(optimizer):
    r = audit_process(peer("correct", "--optimizer", optimizer), step=True,
                      dtypes=("float64",), directions=1)
    assert failed(r) == set()
    assert any(x.name == "step" or x.name.startswith(("step.", "grad_norm"))
               for x in r.results)


def test_one_wrong_element_is_localized_by_bisection():
    r = audit_process(
        peer("big", "--size", "4000", "--wrong-element", "321", "--wrong-delta", "5"),
        step=False, dtypes=("float64",), directions=1)
    res = by_name(r, "grad[layer.0.weight]")
    assert res.status is Status.FAILED
    lo, hi = res.details["bisected"]
    assert lo <= 321 < hi and hi - lo <= 1000 // 2**5
    assert "bisection" in res.message


def test_a_dense_error_is_not_pinned_on_one_element():
    r = audit_process(peer("big", "--size", "4000", "--factor", "2"), step=False,
                      dtypes=("float64",), directions=1)
    res = by_name(r, "grad[layer.1.weight]")
    assert "spread (dense)" in res.message and "2 x FD's" in res.message
    assert "bisected" not in res.details


def test_done_carries_the_verdicts_to_the_program(tmp_path):
    import json

    out = tmp_path / "done.json"
    r = audit_process(peer("wrong_grad", "--done-file", str(out)), step=False)
    done = json.loads(out.read_text())
    assert done["passed"] is False
    checks = {c["name"]: c for c in done["checks"]}
    assert checks["grad[fc2.weight]"]["status"] == "failed"
    assert checks["flow[fc1.weight]"]["status"] == "passed"
    assert len(done["checks"]) == len(r.results)
    assert len(checks) == len(done["checks"])  # one name per check


def test_a_library_refusing_an_empty_t_gets_t_zero():
    r = audit("refuses_empty_t")
    assert failed(r) == set()
    assert by_name(r, "rounding[float32][fc1.weight]").status is Status.PASSED


def test_more_directions_per_tensor_and_no_global():
    r = audit("wrong_grad", per_tensor=2, directions=0, dtypes=("float64",))
    assert failed(r) == {"grad[fc2.weight]"}
    assert "along 2 seeded direction(s)" in by_name(r, "grad[fc2.weight]").message
    # + one bisection level (2 halves): both halves fail, a sign flip is dense
    assert r.traffic.requests["model.line"] == 12 + 2
    assert "spread (dense)" in by_name(r, "grad[fc2.weight]").message
