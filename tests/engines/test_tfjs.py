"""TensorFlow.js through the process protocol (a real Node.js child).

Skipped with the reason where Node.js or the npm packages are missing
(``adapters/tfjs/install.sh`` installs them)."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import gradcheck
from gradcheck import Status
from gradcheck.backends import process as process_module
from gradcheck.backends.protocol_ops import PROTOCOL_OPS
from gradcheck.engines.tfjs import TfjsBackend, unavailable_reason
from gradcheck.testing import format_conformance, run_conformance
from tests.support.adapter_checks import assert_training_probes

_REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"tfjs backend: {_REASON}")


@pytest.fixture(scope="module")
def tfjs():
    be = TfjsBackend()
    yield be
    be.close()


def _sample(name, seed=0):
    return [a.astype(np.float32) for a in PROTOCOL_OPS[name].sample(np.random.default_rng(seed))]


def test_conformance(tfjs):
    report = run_conformance(tfjs)
    assert report.passed, format_conformance(report)
    assert tfjs.version().startswith("4.")


@pytest.mark.parametrize("name", sorted(PROTOCOL_OPS))
def test_every_mapped_op_passes_the_numeric_checks(tfjs, name):
    assert tfjs.op(name) is not None, f"tfjs adapter lacks {name}"
    report = gradcheck.check(tfjs.op(name), *_sample(name, seed=1), backend=tfjs, order=2)
    assert report.passed, [r.message for r in report.failures]
    vjp = [r for r in report.results if r.kind == "vjp"]
    assert vjp and all(r.status is Status.PASSED for r in vjp)
    assert "eps(float32)" in vjp[0].allowed_source  # checked at tfjs's own precision
    skipped = {r.message for r in report.results if r.status is Status.SKIPPED}
    assert any("declares no forward mode" in m for m in skipped)


def test_killing_the_child_mid_run(tfjs):
    x = _sample("tanh")[0]
    assert gradcheck.check(tfjs.op("tanh"), x, backend=tfjs, modes=("rev",)).passed
    pid = tfjs.child_pid
    os.kill(pid, signal.SIGKILL)
    report = gradcheck.check(tfjs.op("tanh"), x, backend=tfjs, modes=("rev",))
    assert not report.passed and "crashed" in report.failures[0].message
    again = gradcheck.check(tfjs.op("tanh"), x, backend=tfjs, modes=("rev",))
    assert again.passed and tfjs.child_pid not in (None, pid)


def test_malformed_line_sent_to_the_child(tfjs):
    tfjs.hello()
    answer = tfjs._child.exchange("{\"id\": 5, \"method\": ", "raw", 10.0)
    assert '"invalid_request"' in answer and "not JSON" in answer
    out = tfjs.evaluate(tfjs.op("exp"), [np.zeros(3, np.float32)], "cpu")[0]
    assert out.tolist() == [1.0, 1.0, 1.0]  # the child carried on


def test_version_mismatch(monkeypatch):
    monkeypatch.setattr(process_module, "PROTOCOL_VERSION", 2)
    be = TfjsBackend()
    try:
        report = gradcheck.check(be.op("sin"), _sample("sin")[0], backend=be)
        assert len(report.failures) == 1
        msg = report.failures[0].message
        assert "version mismatch" in msg and "speaks protocol 1, not 2" in msg
    finally:
        be.close()


def test_timeout_kills_and_restarts():
    be = TfjsBackend(request_timeout=0.001)
    try:
        big = np.ones((300, 300), np.float32)
        report = gradcheck.check(be.op("matmul"), big, big, backend=be, modes=("rev",))
        assert any("timeout" in r.message for r in report.failures)
        be.request_timeout = 60.0
        out = be.evaluate(be.op("neg"), [np.ones(2, np.float32)], "cpu")[0]
        assert out.tolist() == [-1.0, -1.0]
    finally:
        be.close()


def test_training_semantics_measured(tfjs):
    assert_training_probes(tfjs.training("cpu", "float32"), np.float32, rel=1e-6)
