"""The harness's checks of the *library* answering the model protocol, against the reference
peer (``tests/support/model_peer.py``): ``protocol.directions`` (every ``model.line``
projection recomputed from ``model.grads`` arrays and gradcheck's own directions) catches a
library whose direction generator or gradient extraction is off, which FD cannot see; the
partial-cut label needs evidence (an element range where AD is exactly zero); request timeouts
scale with the measured forward time."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gradcheck import Status
from gradcheck.backends.model_peer import FORWARD_FACTOR, ModelPeer, forwards_of
from gradcheck.backends.wire import ProtocolTimeout
from gradcheck.model_audit import remote
from gradcheck.model_audit.remote import audit_process

PEER = str(Path(__file__).resolve().parents[1] / "support" / "model_peer.py")


def peer(variant: str, *extra: str) -> list[str]:
    return [sys.executable, PEER, "--variant", variant, *extra]


def failed(report) -> set[str]:
    return {r.name for r in report.results if r.status in (Status.FAILED, Status.ERROR)}


def named(report, name: str) -> list:
    return [r for r in report.results if r.name == name]


# -- protocol.directions ------------------------------------------------------------------------

def test_correct_library_passes_the_cross_check_in_both_dtypes():
    r = audit_process(peer("correct"), step=False)
    hits = named(r, "protocol.directions")
    assert [h.dtype for h in hits] == ["float64", "float32"]
    for h in hits:
        assert h.status is Status.PASSED, h.message
        assert h.details["ran"] is True and h.details["lines"] > 0
        assert "2 (n + 1) eps(float64)" in h.message
    assert failed(r) == set()


@pytest.mark.parametrize("variant", ["dir_sign", "dir_scope", "grads_array_off", "terms_off"])
def test_a_library_with_its_generator_or_extraction_off_is_a_protocol_error(variant):
    r = audit_process(peer(variant), step=False)
    # FD follows the library's own (wrong) direction, so every model verdict agrees with it:
    # only the cross-check sees the library bug, and it fails the run
    assert failed(r) == {"protocol.directions"}
    assert not r.passed
    for h in named(r, "protocol.directions"):
        assert h.status is Status.FAILED
        assert h.message.startswith("[library protocol error]")
        assert "the library's projection" in h.message or "the library's abs_terms" in h.message
        assert "NumPy's" in h.message
        assert "allowed" in h.message
        assert h.actual != h.expected
        assert h.details["compared"] == ("abs_terms" if variant == "terms_off" else
                                         "projection")


def test_the_cross_check_is_skipped_with_its_reason_on_a_large_model(monkeypatch):
    monkeypatch.setattr(remote, "ARRAYS_UP_TO", 100)
    r = audit_process(peer("dir_sign"), step=False, dtypes=("float64",), directions=1)
    (h,) = named(r, "protocol.directions")
    assert h.status is Status.SKIPPED and h.details["ran"] is False
    assert "more than 100" in h.message and "parameters" in h.message
    assert failed(r) == set()  # what the check exists for: this bug is invisible to FD


def test_the_model_grads_request_asks_arrays_only_on_small_models(monkeypatch, tmp_path):
    r = audit_process(peer("correct"), step=False, dtypes=("float64",), directions=0)
    small = r.traffic.bytes_received
    monkeypatch.setattr(remote, "ARRAYS_UP_TO", 100)
    r = audit_process(peer("correct"), step=False, dtypes=("float64",), directions=0)
    assert r.traffic.bytes_received < small


# -- the partial-cut label ----------------------------------------------------------------------

def test_a_real_partial_cut_is_labelled_with_its_evidence():
    r = audit_process(peer("partial_cut"), step=False, dtypes=("float64",))
    (g,) = named(r, "grad[fc2.weight]")
    assert g.status is Status.FAILED
    assert g.details["bug_class"] == "partial stop or surrogate gradient not declared"
    assert g.details["cut"] == [0, 32]  # rows 0..3 of the 8 x 8 weight
    assert "AD is exactly zero on flat elements [0, 32)" in g.message


def test_a_dense_error_with_the_same_factor_is_not_called_a_cut():
    r = audit_process(peer("dense_half"), step=False, dtypes=("float64",))
    (g,) = named(r, "grad[fc2.weight]")
    assert g.status is Status.FAILED
    assert "0.5 x FD's" in g.message  # the factor a partial cut could also show
    assert g.details["bug_class"] == "gradient disagrees with finite differences"
    assert "cut" not in g.details and "not a partial cut" in g.message


# -- request timeouts scaled by the measured forward ----------------------------------------------

def test_forwards_per_request():
    assert forwards_of("model.loss", {}) == 1
    assert forwards_of("model.line", {"t": [0.1, -0.1]}) == 2 + 3
    assert forwards_of("model.step", {"experiment": "repeat", "steps": 2}) == 12
    assert forwards_of("model.step", {"experiment": "run", "steps": 4}) == 24
    assert forwards_of("model.describe", {}) == 0


def test_timeout_for_is_the_fixed_one_until_a_forward_is_measured():
    p = ModelPeer(["true"], request_timeout=5.0)
    line = {"t": [0.0] * 9}
    assert p.timeout_for("model.line", line) == 5.0
    p.forward_s = 1.0
    assert p.timeout_for("model.line", line) == FORWARD_FACTOR * 12
    assert p.timeout_for("model.describe", {}) == 5.0
    p.forward_s = 1e-6
    assert p.timeout_for("model.line", line) == 5.0


SLOW = 0.25  # seconds per forward: a line of 8 t values takes > 9 x SLOW > 2 s


def _line(p: ModelPeer) -> dict:
    p.request("model.describe", {"dtype": "float64"})
    u = {"seed": 1, "scope": [{"name": "fc3.bias", "start": 0, "scale": 0.0625}]}
    return p.request("model.line", {"dtype": "float64", "direction": u, "t": [0.0] * 8})


def test_a_slow_model_times_out_under_the_fixed_timeout():
    p = ModelPeer(peer("correct", "--sleep-forward", str(SLOW)), request_timeout=1.0)
    try:
        with pytest.raises(ProtocolTimeout, match="timeout"):
            _line(p)
    finally:
        p.close()


def test_the_same_request_passes_under_the_scaled_timeout():
    p = ModelPeer(peer("correct", "--sleep-forward", str(SLOW)), request_timeout=1.0)
    try:
        p.forward_s = SLOW
        assert len(_line(p)["losses"]) == 8
    finally:
        p.close()


def test_a_slow_model_passes_the_audit_with_the_fixed_timeout_below_one_line():
    r = audit_process(peer("correct", "--sleep-forward", str(SLOW)), step=False,
                      params=("fc3.bias",), directions=0, dtypes=("float64",),
                      request_timeout=1.0)
    assert failed(r) == set()
    assert r.forward_s >= SLOW
    assert "one forward" in r.summary()
    assert r.traffic.requests["model.line"] == 1  # one FD pass of many t values: > 1 s


def test_a_slow_training_step_gets_a_timeout_scaled_by_its_calls():
    # each model.step call costs 2 forwards' sleep here: 3 calls take > 1.5 s
    p = ModelPeer(peer("correct", "--sleep-forward", str(SLOW)), request_timeout=1.0)
    try:
        p.request("model.describe", {"dtype": "float64"})
        ask = {"dtype": "float64", "knobs": {}, "steps": 3, "experiment": "run", "sample": 8}
        with pytest.raises(ProtocolTimeout):
            p.request("model.step", ask)
    finally:
        p.close()
    r = audit_process(peer("correct", "--sleep-forward", str(SLOW), "--optimizer", "sgd"),
                      step=True, params=("fc3.bias",), directions=0, dtypes=("float64",),
                      request_timeout=1.0)
    assert failed(r) == set()
    assert any(x.name.startswith("step.") and x.status is Status.PASSED for x in r.results)
