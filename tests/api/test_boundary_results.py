"""What crosses the adapter boundary (gradcheck/backends/guarded.py) into the probes, the audit
and the user-utility checks: a user's function or an adapter that raises becomes an ``error``
result (a ``NotImplementedError``, a declared missing capability, ``skipped``) whose message
says what raised and quotes the exception; the run goes on."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import InvalidArgument, Status
from gradcheck.backends.guarded import AdapterFailure, FailureKind, attempt
from gradcheck.engines.numpy.backend import NumpyBackend
from gradcheck.semantics import check as semantics
from gradcheck.semantics.context import QUOTE


def _by_name(report):
    return {r.name: r for r in report.results}


def _kaboom(*_):
    raise RuntimeError("kaboom\nsecond line")


def test_attempt_types_what_it_catches_and_lets_control_flow_through():
    ok = attempt("f", lambda a, b=0: a + b, 1, b=2)
    assert ok == 3
    f = attempt("clip", _kaboom)
    assert isinstance(f, AdapterFailure) and f.kind is FailureKind.RAISED and f.call == "clip"
    assert f.text == "RuntimeError: kaboom"  # the first line only
    skip = attempt("training", lambda: (_ for _ in ()).throw(NotImplementedError("no hooks")))
    assert isinstance(skip, AdapterFailure) and skip.unsupported and skip.reason == "no hooks"
    with pytest.raises(KeyboardInterrupt):
        attempt("f", lambda: (_ for _ in ()).throw(KeyboardInterrupt()))


def test_a_long_exception_is_quoted_within_the_limit_at_a_word_boundary():
    f = attempt("f", lambda: (_ for _ in ()).throw(ValueError("word " * 200)))
    assert isinstance(f, AdapterFailure)
    short = f.quoted(QUOTE)
    assert len(short) <= QUOTE and short.startswith("ValueError: word word")
    assert short.endswith("...") and len(f.text) <= 500 and len(f.text) > len(short)


def test_a_users_norm_function_that_raises_is_an_error_per_case():
    rep = gradcheck.check_grad_norm_function(_kaboom, backend="numpy")
    rs = [r for r in rep.results if r.name.startswith("grad_norm_fn[")]
    assert rs and all(r.status is Status.ERROR for r in rs)
    assert all(r.message == "norm function raised RuntimeError: kaboom" for r in rs)


def test_a_users_accumulate_that_raises_is_an_error():
    pytest.importorskip("torch")
    rep = gradcheck.check_accumulation_function(_kaboom, backend="torch")
    (r,) = rep.results
    assert r.name == "accumulation_fn" and r.status is Status.ERROR
    assert r.message == "accumulate raised RuntimeError: kaboom"


def test_a_users_clip_that_raises_fails_the_clip_probes_not_the_run():
    rep = gradcheck.check_clip_function(lambda grads, max_norm: 1 / 0, backend="numpy")
    r = _by_name(rep)["clip"]
    assert r.status is Status.ERROR
    assert r.message == "the clip probes raised ZeroDivisionError: division by zero"
    assert _by_name(rep)["clip.linearity[c=2]"].status is Status.PASSED  # before the clip


class _NoTraining(NumpyBackend):
    name = "no-training"

    def __init__(self, exc: Exception) -> None:
        super().__init__()
        self.exc = exc

    def training(self, device, dtype):
        raise self.exc


@pytest.mark.parametrize(("exc", "status", "message"), [
    (RuntimeError("hooks broke"), Status.ERROR, "training() failed: RuntimeError: hooks broke"),
    (NotImplementedError("no training hooks here"), Status.SKIPPED, "no training hooks here"),
])
def test_training_hooks_that_cannot_be_made(exc, status, message):
    (r,) = gradcheck.check_semantics(_NoTraining(exc), probes=["clip"]).results
    assert (r.name, r.status, r.message) == ("training", status, message)


@pytest.mark.parametrize(("exc", "status", "message"), [
    (RuntimeError("probe broke"), Status.ERROR, "clip probes raised RuntimeError: probe broke"),
    (NotImplementedError("nothing to clip"), Status.SKIPPED,
     "clip probes not applicable: nothing to clip"),
])
def test_a_family_that_raises_is_one_result_and_the_next_family_runs(monkeypatch, exc, status,
                                                                     message):
    def broken(ctx):
        raise exc

    monkeypatch.setitem(semantics.FAMILIES, "clip", broken)
    rep = gradcheck.check_semantics("numpy", probes=["clip", "accumulation"])
    r = _by_name(rep)["clip"]
    assert (r.status, r.message) == (status, message)
    assert any(n.startswith("accumulation") for n in _by_name(rep))


def _linear():
    """A float64 torch layer, a batch and a loss of both."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    def loss_fn(m, b):
        return (torch.tanh(m(b)) ** 2).sum()

    return torch.nn.Linear(3, 2).double(), torch.randn(4, 3, dtype=torch.float64), loss_fn


def test_an_audit_reports_what_the_users_code_raised():
    from gradcheck import TrainStep, audit

    model, batch, loss_fn = _linear()

    def step(m, b):
        raise RuntimeError("optimizer exploded")

    rep = audit(model, loss_fn, batch, backend="torch", grad_norm_monitor=_kaboom,
                train_step=TrainStep(step, lr=0.1))
    rs = _by_name(rep)
    assert (rs["grad_norm"].status, rs["grad_norm"].message) == (
        Status.ERROR, "grad_norm_monitor raised RuntimeError: kaboom")
    assert (rs["train_step"].status, rs["train_step"].message) == (
        Status.ERROR, "train_step raised RuntimeError: optimizer exploded")
    assert rs["train_step.effective_step"].status is Status.ERROR
    assert rs["weight"].status is Status.PASSED  # the gradient checks still ran

    def broken(m, b):
        raise RuntimeError("shape mismatch in my loss")

    (r,) = [r for r in audit(model, broken, batch, backend="torch").results
            if r.name == "backward"]
    assert r.status is Status.ERROR
    assert r.message == "the loss cannot be differentiated: RuntimeError: shape mismatch in my loss"


def test_a_declaration_the_step_model_cannot_pair_is_an_error_not_a_crash():
    from gradcheck import TargetUpdate, TrainStep, audit

    model, batch, loss_fn = _linear()  # skips without torch
    import torch

    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(m, b):
        opt.zero_grad()
        loss_fn(m, b).backward()
        opt.step()

    spec = TrainStep(step, lr=0.1, target_updates=(TargetUpdate("nope", "weight", 0.5),))
    rs = _by_name(audit(model, loss_fn, batch, backend="torch", train_step=spec))
    assert rs["train_step.repeatable"].status is Status.PASSED
    r = rs["train_step.effective_step"]
    assert r.status is Status.ERROR
    assert r.message == "train_step raised ValueError: TargetUpdate: no parameter under 'nope'"


class _BadVjp(NumpyBackend):
    """Mutant adapter: its VJP raises ``exc`` or returns ``out``."""

    name = "bad"

    def __init__(self, out=None, exc: Exception | None = None) -> None:
        super().__init__()
        self.out, self.exc = out, exc

    def vjp(self, fn, args, diff, cotangents, device):
        if self.exc is not None:
            raise self.exc
        return self.out


@pytest.mark.parametrize(("backend", "message"), [
    (_BadVjp(exc=RuntimeError("no rule")),
     "reference: RuntimeError: the VJP of bad/cpu raised RuntimeError: no rule"),
    (_BadVjp(out=[np.zeros(7)]),
     "reference: ValueError: the VJP of bad/cpu returned shape (7,) for input 0, expected (3,)"),
    (_BadVjp(out=[object()]), "reference: TypeError: float() argument must be a string or a "
                              "real number, not 'object'"),
])
def test_an_engine_that_fails_the_agreement_check_is_an_error_naming_it(backend, message):
    from gradcheck.numeric.agreement import Side, compare_vjps
    from gradcheck.reference.numpy import get_op

    sin = get_op("sin")
    (r,) = compare_vjps("reference", Side(backend, sin), Side(NumpyBackend(), sin),
                        [np.array([0.1, 0.5, 1.0])])
    assert (r.status, r.message) == (Status.ERROR, message)


# -- issue 32 class 3: raw crashes become results or InvalidArgument -----------------------


def _numpy_sin():
    return gradcheck.NumpyFunction(np.sin, lambda a, c: (np.cos(a[0]) * c[0],), name="sin")


def test_a_huge_broadcast_input_is_an_error_result_not_a_memory_error():
    # a 1e6 x 1e6 view of one number: 8 TB as an array; hashing it for the reproducer copied it
    huge = np.broadcast_to(np.float64(0.5), (10 ** 6, 10 ** 6))
    rep = gradcheck.check(_numpy_sin(), huge, backend="numpy")
    assert [r.status for r in rep.results] == [Status.ERROR]
    assert "MemoryError" in rep.results[0].message
    with pytest.raises(gradcheck.GradientMismatch, match="MemoryError"):
        gradcheck.assert_gradients(_numpy_sin(), huge, backend="numpy")
    # and the run goes on
    assert gradcheck.check(_numpy_sin(), np.linspace(0.1, 1, 4), backend="numpy").passed


class _NoDevices(NumpyBackend):
    def devices(self):  # type: ignore[override]
        return None


class _DevicesRaise(NumpyBackend):
    def devices(self):  # type: ignore[override]
        raise RuntimeError("driver gone")


class _Unbuildable(NumpyBackend):
    def __init__(self) -> None:
        raise RuntimeError("cannot start")


@pytest.mark.parametrize("adapter", [_NoDevices, _DevicesRaise, _Unbuildable])
@pytest.mark.parametrize("entry", ["check", "assert_gradients", "check_semantics", "audit"])
def test_a_broken_adapter_is_an_error_or_an_invalid_argument_at_every_entry_point(adapter,
                                                                                    entry):
    """Never a raw traceback.  An adapter that cannot be constructed, or one whose devices()
    is broken at an entry point that must plan its devices first (check_semantics, audit), is
    an InvalidArgument; check() reports a broken devices() as an error result (and
    assert_gradients raises it as a GradientMismatch)."""
    calls = {
        "check": lambda: gradcheck.check(_numpy_sin(), np.ones(3), backend=adapter),
        "assert_gradients": lambda: gradcheck.assert_gradients(_numpy_sin(), np.ones(3),
                                                               backend=adapter),
        "check_semantics": lambda: gradcheck.check_semantics(adapter),
        "audit": lambda: gradcheck.audit(object(), lambda m, b: 0.0, None, backend=adapter),
    }
    if adapter is _Unbuildable or entry in ("check_semantics", "audit"):
        with pytest.raises(InvalidArgument, match=r"devices\(\) r|cannot be constructed"):
            calls[entry]()
    elif entry == "check":
        (only,) = calls[entry]().results
        assert only.status is Status.ERROR and "devices()" in only.message
    else:
        with pytest.raises(gradcheck.GradientMismatch, match=r"devices\(\)"):
            calls[entry]()


def _hooks_exit(self, device, dtype):
    raise SystemExit(4)


def test_a_system_exit_in_the_training_hooks_is_an_error_result_and_the_probes_go_on():
    class ExitsInTraining(NumpyBackend):
        training = _hooks_exit  # type: ignore[assignment]

    rep = gradcheck.check_semantics(ExitsInTraining())
    assert [(r.name, r.status) for r in rep.results] == [("training", Status.ERROR)]
    assert "SystemExit: 4" in rep.results[0].message

    def family_exits(ctx, *_):
        raise SystemExit("bye")

    original = semantics.FAMILIES["clip"]
    semantics.FAMILIES["clip"] = family_exits
    try:
        rep = gradcheck.check_semantics("numpy", probes=("clip", "accumulation"))
    finally:
        semantics.FAMILIES["clip"] = original
    by = _by_name(rep)
    assert by["clip"].status is Status.ERROR and "SystemExit: bye" in by["clip"].message
    assert any(r.name != "clip" and r.status is Status.PASSED for r in rep.results)


def test_keyboard_interrupt_still_stops_the_semantic_probes():
    class Interrupted(NumpyBackend):
        def training(self, device, dtype):  # type: ignore[override]
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gradcheck.check_semantics(Interrupted())
