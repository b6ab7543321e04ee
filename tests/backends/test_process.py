"""The process protocol with a Python child (tests/support/numpy_child.py): numeric checks,
mutants, and every failure mode (crash, kill, malformed line, timeout, version mismatch,
declaration mismatch), each failing only the affected checks with a clear message."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import gradcheck
from gradcheck import Accumulation, Semantics, Status
from gradcheck.backends.process import ProcessBackend, ProtocolError, RemoteOp
from gradcheck.backends.wire import decode_array, decode_scalar, encode_array, encode_scalar
from gradcheck.semantics.check import check_semantics
from gradcheck.testing import format_conformance, run_conformance
from tests.support import process_tree
from tests.support.adapter_checks import assert_training_probes
from tests.support.process_tree import needs_proc

CHILD = str(Path(__file__).resolve().parents[1] / "support" / "numpy_child.py")
X = np.random.default_rng(0).standard_normal((3, 4))


class ChildBackend(ProcessBackend):
    name = "numpy-child"
    dtypes = ("float64", "float32")
    supports_jvp = True
    supports_order2 = False
    semantics = Semantics(Accumulation.FUNCTIONAL, "stop")


class Float32Child(ChildBackend):
    name = "numpy-child-f32"
    dtypes = ("float32",)


def _backend(*flags, cls=ChildBackend, **kw):
    dtypes = ("--declare-dtypes", ",".join(cls.dtypes))
    return cls([sys.executable, CHILD, *dtypes, *flags], **kw)


@pytest.fixture
def make():
    made = []

    def factory(*flags, **kw):
        be = _backend(*flags, **kw)
        made.append(be)
        return be

    yield factory
    for be in made:
        be.close()


def _statuses(report):
    return {(r.kind, r.status.value) for r in report.results}


def test_child_passes_numeric_checks_and_conformance(make):
    be = make()
    for op, args in (("sin", (X,)), ("mul", (X, X + 1)), ("matmul", (X, X.T)), ("sum", (X,))):
        report = gradcheck.check(be.op(op), *args, backend=be)
        assert report.passed, report.summary()
        assert ("jvp", "passed") in _statuses(report) and ("vjp", "passed") in _statuses(report)
    conf = run_conformance(be)
    assert conf.passed, format_conformance(conf)


@pytest.mark.parametrize("cls", [ChildBackend, Float32Child])
def test_wrong_vjp_through_the_protocol_is_caught(make, cls):
    """A child whose VJP is off by 0.1 % fails; the float32-only declaration checks the rule
    against FD of the float64 NumPy meaning with a float32 rounding bound."""
    x = X.astype(np.float32)
    good = gradcheck.check(make(cls=cls).op("tanh"), x, backend=make(cls=cls), modes=("rev",))
    assert good.passed, [r.message for r in good.failures]
    bad_be = make("--wrong-vjp", "1.001", cls=cls)
    bad = gradcheck.check(bad_be.op("tanh"), x, backend=bad_be, modes=("rev",))
    vjp = [r for r in bad.results if r.kind == "vjp"][0]
    assert vjp.status is Status.FAILED and vjp.discrepancy_ratio > 10
    if cls is Float32Child:
        assert "eps(float32)" in vjp.allowed_source


def test_crashing_child_fails_the_check_then_restarts(make):
    be = make("--crash-on", "vjp")
    report = gradcheck.check(be.op("sin"), X, backend=be, modes=("rev",))
    err = [r for r in report.results if r.status is Status.ERROR]
    assert err, report.summary()
    assert "crashed while answering 'vjp' (exit code 3)" in err[0].message
    assert "crashing on purpose" in err[0].message  # the child's stderr tail
    # the child was restarted: forward evaluation (no vjp) still works
    assert be.evaluate(be.op("sin"), [X], "cpu")[0] == pytest.approx(np.sin(X))


def test_killed_child_mid_run_is_restarted(make):
    be = make()
    assert gradcheck.check(be.op("sin"), X, backend=be).passed
    pid = be.child_pid
    os.kill(pid, signal.SIGKILL)
    report = gradcheck.check(be.op("sin"), X, backend=be)
    assert not report.passed
    assert "crashed" in report.failures[0].message and "-9" in report.failures[0].message
    after = gradcheck.check(be.op("sin"), X, backend=be)
    assert after.passed and be.child_pid != pid


def test_malformed_line_from_child(make):
    be = make("--malformed-on", "vjp")
    report = gradcheck.check(be.op("sin"), X, backend=be)
    msgs = [r.message for r in report.results if r.status is Status.ERROR]
    assert any("malformed line from the child in answer to 'vjp'" in m and
               "this is not json" in m for m in msgs)
    jvp = [r for r in report.results if r.kind == "jvp"]
    assert jvp[0].status is Status.PASSED  # only the affected checks failed


def test_malformed_line_to_child_gets_an_error_answer(make):
    be = make()
    be.hello()
    child = be._child
    answer = child.exchange("{not json", "raw", 5.0)
    assert '"invalid_request"' in answer and '"id": null' in answer
    assert be.evaluate(be.op("exp"), [X], "cpu")[0] == pytest.approx(np.exp(X))


def test_hanging_child_times_out(make):
    be = make("--hang-on", "vjp", request_timeout=1.0)
    start = time.monotonic()
    report = gradcheck.check(be.op("sin"), X, backend=be, modes=("rev",), probes=1)
    assert time.monotonic() - start < 30
    err = [r for r in report.results if r.status is Status.ERROR][0]
    assert "did not answer 'vjp' within 1 s (timeout)" in err.message


@pytest.mark.parametrize("flags", [("--protocol", "2"), ("--refuse-version",)])
def test_version_mismatch_is_permanent_and_clear(make, flags):
    be = make(*flags)
    for _ in range(2):
        report = gradcheck.check(RemoteOp("sin"), X, backend=be)
        assert len(report.failures) == 1
        assert "version mismatch" in report.failures[0].message
    assert be.child_pid is None  # no child left running, none restarted in a loop


def test_declaration_mismatch_is_reported(make):
    class Undeclared(ChildBackend):
        supports_jvp = False

    be = make(cls=Undeclared)
    with pytest.raises(ProtocolError, match="capability jvp=True but the adapter declares False"):
        be.hello()


def test_non_remote_function_is_a_clear_error(make):
    be = make()
    report = gradcheck.check(np.sin, X, backend=be)
    assert "runs ops by name: pass backend.op(name)" in report.failures[0].message


@pytest.mark.parametrize("accumulation,factor", [("functional", 1.0), ("accumulate", 2.0)])
def test_training_messages(make, accumulation, factor):
    class Acc(ChildBackend):
        semantics = Semantics(Accumulation(accumulation), "stop")

    be = make("--accumulation", accumulation, cls=Acc)
    assert_training_probes(be.training("cpu", "float64"), np.float64, accumulate_factor=factor)


def test_wire_arrays_round_trip_and_reject_garbage():
    a = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(decode_array(encode_array(a)), a)
    assert decode_array(encode_array(np.float64(2.5))).shape == ()
    bad = encode_array(a)
    with pytest.raises(ProtocolError, match="40 bytes of data for shape \\[2, 3\\]"):
        decode_array({**bad, "data": encode_array(np.arange(5.0))["data"]})
    with pytest.raises(ProtocolError, match="not valid base64"):
        decode_array({**bad, "data": "***"})
    with pytest.raises(ProtocolError, match="invalid shape"):
        decode_array({**bad, "shape": [2, -3]})


def test_wire_scalars_carry_non_finite_values():
    for x in (1.5, 0.0, np.inf, -np.inf):
        assert decode_scalar(encode_scalar(x)) == x
    assert np.isnan(decode_scalar(encode_scalar(np.nan)))
    assert json.loads(json.dumps(encode_scalar(np.inf))) == "Infinity"  # JSON has no bare inf
    for bad in (None, "inf", True, [1.0]):
        with pytest.raises(ProtocolError, match="must be a number or one of"):
            decode_scalar(bad)


@pytest.mark.parametrize("flags,expected", [((), Status.PASSED),
                                            (("--unchecked-clip",), Status.FAILED)])
def test_clip_probes_through_the_protocol(make, flags, expected):
    """The clip probes reach the child: a child that applies a negative threshold (the mutant)
    is caught; one that refuses it passes; an infinite gradient's norm comes back as inf."""
    report = check_semantics(make(*flags), probes=["clip"])
    by_name = {r.name: r for r in report.results}
    assert by_name["clip.threshold_validation"].status is expected, \
        by_name["clip.threshold_validation"].message
    nonfinite = by_name["clip.nonfinite"]
    assert nonfinite.status is Status.PASSED and "returned norm inf" in nonfinite.message, \
        nonfinite.message


def test_a_child_that_stops_reading_cannot_block_a_large_request(make):
    be = make("--stop-reading-after", "hello", request_timeout=2.0)
    be.hello()
    big = np.zeros(2 ** 20)  # ~11 MB on the wire, far beyond a pipe's buffer
    start = time.monotonic()
    with pytest.raises(ProtocolError, match="did not read the 'evaluate' request within 2 s"):
        be._call("evaluate", RemoteOp("sin"), [big], "cpu", {}, "outputs", None)
    assert time.monotonic() - start < 20 and be.child_pid is None  # killed, not blocked


def test_a_child_that_dies_on_every_request_is_not_restarted_forever(make):
    be = make("--crash-on", "evaluate")
    for _ in range(be.max_restarts + 1):
        with pytest.raises(ProtocolError, match="crashed"):
            be.evaluate(RemoteOp("sin"), [X], "cpu")
    start = time.monotonic()
    for _ in range(3):
        with pytest.raises(ProtocolError, match="not restarting it again.*crashed"):
            be.evaluate(RemoteOp("sin"), [X], "cpu")
    assert time.monotonic() - start < 1.0 and be.child_pid is None


@pytest.mark.parametrize("wrong", [1.0, -1.0])
def test_a_child_with_a_noisy_evaluate_is_never_passed(make, wrong):
    noisy = make("--noisy-evaluate", "1e-3", "--wrong-vjp", str(wrong))
    report = gradcheck.check(noisy.op("sin"), X, backend=noisy, modes=("rev",))
    assert not any(r.status is Status.PASSED for r in report.results)
    assert any("nondeterministic" in r.message for r in report.results)
    if wrong == 1.0:  # the same child without the noise passes
        clean = make()
        gradcheck.assert_gradients(clean.op("sin"), X, backend=clean, modes=("rev",))


def test_the_process_engines_carry_the_named_model_they_build():
    """model_audit.model_flow names no engine: the spec comes from the backend (model_spec)."""
    from gradcheck.backends.process_model import ModelSpec, model_spec_of
    from gradcheck.engines.candle import CANDLE_STAGES, CANDLE_VIAS, VARMAP_NAMES, CandleBackend
    from gradcheck.engines.gorgonia import (
        MODEL_NAMES,
        MODEL_STAGES,
        MODEL_VIAS,
        GorgoniaBackend,
    )

    assert model_spec_of(CandleBackend()) == ModelSpec(
        "candle.varmap_model", VARMAP_NAMES, CANDLE_STAGES, "varmap", "VarMap name",
        "the GradStore", CANDLE_VIAS)
    assert model_spec_of(GorgoniaBackend()) == ModelSpec(
        "gorgonia.model", MODEL_NAMES, MODEL_STAGES, "model", "learnable node name",
        "the learnables' dual-value store", MODEL_VIAS)
    assert ChildBackend.model_spec is None
    for plain in (ChildBackend(command=[sys.executable, CHILD]), gradcheck.get_backend("numpy")):
        with pytest.raises(ValueError, match="declares no named model"):
            model_spec_of(plain)


# -- bytes that are not UTF-8 on a child's pipes (issue 32, class 6) ---------------------------
# A wrapper around the NumPy child writes invalid UTF-8 (b"\xff\xfe") to its stderr: more than a
# pipe holds before the handshake, and more on every request; with ``--garbage-stdout`` it
# answers a 'vjp' request with a line of such bytes on stdout instead of JSON.
_NOISY = r'''
import os, runpy, sys
CHILD, ARGS = sys.argv[1], sys.argv[2:]
GARBAGE_STDOUT = "--garbage-stdout" in ARGS

def noise(tag):
    os.write(2, (b"\xff\xfe " + tag + b" \x80\xc3( noise\n") * 6000)  # > a pipe's 64 KiB

class Noisy:
    def __init__(self, f):
        self.f = f

    def __iter__(self):
        for line in self.f:
            noise(b"during")
            if GARBAGE_STDOUT and '"vjp"' in line:
                os.write(1, b"\xff\xfe not utf-8\n")
                continue
            yield line

noise(b"before")
sys.stdin = Noisy(sys.stdin)
sys.argv = [CHILD] + [a for a in ARGS if a != "--garbage-stdout"]
runpy.run_path(CHILD, run_name="__main__")
'''


@pytest.fixture
def noisy(tmp_path):
    script = tmp_path / "noisy_child.py"
    script.write_text(_NOISY)
    made = []

    def factory(*flags, **kw):
        be = ChildBackend([sys.executable, str(script), CHILD, "--declare-dtypes",
                           ",".join(ChildBackend.dtypes), *flags], **kw)
        made.append(be)
        return be

    yield factory
    for be in made:
        be.close()


def test_invalid_utf8_on_stderr_neither_kills_the_reader_nor_the_handshake(noisy):
    """Before: the stderr reader died on the first byte that is not UTF-8, the pipe filled and
    the child blocked in its write, so the handshake timed out."""
    be = noisy(request_timeout=60.0)
    assert isinstance(be.hello(), dict)  # the handshake completes
    report = gradcheck.check(be.op("sin"), X, backend=be)
    assert report.passed, report.summary()


def test_a_crash_shows_the_stderr_tail_with_replacement_characters(noisy):
    be = noisy("--crash-on", "vjp", request_timeout=60.0)
    report = gradcheck.check(be.op("sin"), X, backend=be, modes=("rev",))
    err = [r for r in report.results if r.status is Status.ERROR]
    assert err, report.summary()
    msg = err[0].message
    assert "crashed while answering 'vjp' (exit code 3)" in msg, msg
    assert "crashing on purpose" in msg
    assert "\ufffd\ufffd during" in msg  # the invalid bytes, each shown as U+FFFD


def test_invalid_utf8_on_stdout_is_a_malformed_answer_not_a_timeout(noisy):
    """Before: the stdout reader died on the bytes, and the request waited its whole timeout."""
    be = noisy("--garbage-stdout", request_timeout=120.0)
    report = gradcheck.check(be.op("sin"), X, backend=be, modes=("rev",), probes=1)
    msgs = [r.message for r in report.results if r.status is Status.ERROR]
    assert any("malformed line from the child in answer to 'vjp'" in m for m in msgs), msgs
    assert not any("timeout" in m for m in msgs), msgs


# -- orphans: a child's whole process tree ends with it, and with us ---------------------------


def _wrapped(*flags: str) -> list[str]:
    """The child behind a shell wrapper (as ``cargo run`` or a script would start it): ``sh``
    is the direct child, the protocol child its child (``; :`` keeps sh from exec'ing it)."""
    argv = " ".join(shlex.quote(a) for a in (sys.executable, CHILD, "--declare-dtypes",
                                             "float64,float32", *flags))
    return ["sh", "-c", f"{argv}; :"]


@needs_proc
@pytest.mark.parametrize("how", ["close", "restart"])
def test_a_wrapped_childs_grandchildren_end_with_it(how):
    """Closing the backend, or restarting its child after a timeout, ends the child's whole
    process group: the protocol child behind the wrapper too, even one stuck in a computation
    that never reads its stdin again (before, only ``sh`` was killed and the grandchild ran on,
    orphaned)."""
    # the grandchild stops reading its stdin: it cannot see the pipe close, only a signal ends it
    flags = ("--hang-on", "vjp") if how == "restart" else ("--stop-reading-after", "evaluate")
    be = ChildBackend(_wrapped(*flags), request_timeout=2.0)
    tree: list[int] = []
    try:
        be.evaluate(be.op("exp"), [X], "cpu")
        wrapper = be._child.pid
        grandchildren = process_tree.children_of(wrapper)
        tree += [wrapper, *grandchildren]
        assert grandchildren, "the wrapper started no child"
        if how == "restart":
            with pytest.raises(ProtocolError, match="timeout"):  # the grandchild hangs
                be.vjp(be.op("exp"), [X], (0,), [np.ones_like(X)], "cpu")
        else:
            be.close()
        process_tree.assert_gone([wrapper, *grandchildren], f"after {how}")
    finally:
        be.close()
        process_tree.kill_all(tree)


_KILLED_PARENT = '''
import sys, threading, time
import numpy as np
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from tests.backends.test_process import CHILD, ChildBackend
out = Path(sys.argv[1])
be = ChildBackend([sys.executable, CHILD, "--stop-reading-after", "evaluate"])
x = np.ones(3)
if sys.argv[2] == "thread":  # started from a thread that ends at once
    t = threading.Thread(target=be.evaluate, args=(be.op("exp"), [x], "cpu"))
    t.start(); t.join()
else:
    be.evaluate(be.op("exp"), [x], "cpu")
out.write_text(str(be._child.pid))
time.sleep(3600)  # the child reads no stdin any more: it cannot see the pipe close
'''


@needs_proc
@pytest.mark.parametrize("started_on", ["main", "thread"])
def test_a_sigkilled_parent_leaves_no_protocol_child(tmp_path, started_on):
    """The parent is SIGKILLed while its child is busy (it reads no stdin, so it never sees
    the pipe close): the child is killed with its parent (before, it ran on, orphaned).  A child
    started from a thread that has ended since is tied to the process, not to that thread."""
    import subprocess

    script = tmp_path / "parent.py"
    script.write_text(_KILLED_PARENT)
    pid_file = tmp_path / "child.pid"
    root = str(Path(__file__).resolve().parents[2])
    parent = subprocess.Popen([sys.executable, str(script), str(pid_file), started_on, root],
                              start_new_session=True)
    child = None
    try:
        assert process_tree.wait_until(lambda: pid_file.exists() and pid_file.read_text(), 120)
        child = int(pid_file.read_text())
        assert parent.poll() is None and process_tree.alive(child)
        parent.kill()
        parent.wait(timeout=60)
        process_tree.assert_gone([child], "the protocol child after its parent's SIGKILL")
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None:
            process_tree.kill_all([child])
