"""The adapter boundary (gradcheck/backends/guarded.py) and the numeric pipeline's shape: every
adapter call a value or a typed AdapterFailure, validated once; the pipeline's modules small,
without private cross-module imports or blind ``except Exception``; a profile of the error
model reaching the pipeline's verdicts."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import gradcheck
from gradcheck import ErrorModel, NumpyFunction, Status
from gradcheck.backends.guarded import AdapterFailure, FailureKind, GuardedBackend
from gradcheck.backends.wire import ProtocolTimeout
from gradcheck.engines.numpy.backend import NumpyBackend

ROOT = Path(__file__).resolve().parents[2] / "gradcheck"
# check()'s pipeline (numeric/): the stages and the screen / second estimate they call
PIPELINE = [ROOT / "numeric" / f"{m}.py" for m in (
    "__init__", "compare", "context", "first_order", "judge", "localize", "order2", "prepare",
    "probes", "run", "scalars", "stages", "screen", "second_estimate")]
# modules whose adapter and user-code calls go through the boundary (guarded.attempt /
# GuardedBackend): no blind except of their own
BEHIND_THE_BOUNDARY = [ROOT / f"{m}.py" for m in (
    "semantics/utilities", "numeric/agreement", "semantics/clip", "model_audit/flow",
    "semantics/fanout", "model_audit/steps", "semantics/check", "model_audit/step_diagnosis",
    "numeric/path_noise", "semantics/context", "engines/jax/training", "harness/conformance")]


def _sin() -> NumpyFunction:
    return NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]),), name="sin")


@pytest.mark.parametrize(("exc", "kind"), [
    (NotImplementedError("no jvp"), FailureKind.UNSUPPORTED),
    (RuntimeError("kaboom"), FailureKind.RAISED),
    (TimeoutError("slow"), FailureKind.TIMEOUT),
    (ProtocolTimeout("the child did not answer 'vjp' within 1 s"), FailureKind.TIMEOUT),
])
def test_an_exception_becomes_a_typed_failure(exc, kind):
    f = AdapterFailure.of("vjp", exc)
    assert f.kind is kind and f.call == "vjp" and f.exception is exc
    assert f.text.startswith(type(exc).__name__ + ": ") and f.reason == str(exc)


class _Wrong(NumpyBackend):
    name = "wrong"

    def __init__(self, out):
        self.out = out

    def vjp(self, fn, args, diff, cotangents, device):
        return self.out


def test_derivatives_are_validated_once_at_the_boundary():
    g = GuardedBackend(_Wrong([np.zeros(7)]))
    x = [np.ones(3)]
    shape = g.vjp_rows(_sin(), x, [0], [np.ones((2, 3))], "cpu", rows=2, dtype=np.float64)
    assert isinstance(shape, AdapterFailure) and shape.kind is FailureKind.BAD_SHAPE
    assert "the VJP returned shape (7,), expected (3,)" in shape.text  # per row, stacked
    count = g.checked_vjp(_sin(), x, [0], [np.ones(3)], "cpu", what="the VJP", dtype=np.float64)
    assert isinstance(count, AdapterFailure) and "shape (7,), expected (3,)" in count.text
    g = GuardedBackend(_Wrong([np.zeros(3), np.zeros(3)]))
    count = g.checked_vjp(_sin(), x, [0], [np.ones(3)], "cpu", what="the VJP", dtype=np.float64)
    assert isinstance(count, AdapterFailure) and "returned 2 arrays, expected 1" in count.text
    g = GuardedBackend(_Wrong([np.zeros(3, dtype=np.float64)]))
    low = [np.ones(3, dtype=np.float32)]
    dtype = g.checked_vjp(_sin(), low, [0], [np.ones(3, np.float32)], "cpu", what="the VJP",
                          dtype=np.float32)
    assert isinstance(dtype, AdapterFailure) and dtype.kind is FailureKind.BAD_DTYPE
    good = GuardedBackend(_Wrong([np.full(3, 2.0)])).checked_vjp(
        _sin(), x, [0], [np.ones(3)], "cpu", what="the VJP", dtype=np.float64)
    assert not isinstance(good, AdapterFailure) and good[0].dtype == np.float64


def test_control_flow_exceptions_pass_through_the_boundary():
    def exits():
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        GuardedBackend(NumpyBackend()).call("evaluate", exits)


def _path(p: Path) -> str:
    return str(p.relative_to(ROOT.parent))


def _is_module(module: Path, node: ast.ImportFrom, name: str) -> bool:
    """Whether ``from <node.module> import name`` in ``module`` imports a module file."""
    base = module.parent
    for _ in range(node.level - 1):
        base = base.parent
    if node.level == 0:
        base = ROOT.parent
    for part in (node.module or "").split("."):
        base = base / part if part else base
    return (base / f"{name}.py").exists() or (base / name / "__init__.py").exists()


@pytest.mark.parametrize("module", PIPELINE, ids=_path)
def test_the_pipeline_modules_are_small_and_import_no_private_names(module):
    text = module.read_text()
    assert len(text.splitlines()) <= 500
    tree = ast.parse(text)
    private = [f"{node.module}.{a.name}" for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) for a in node.names
               if a.name.startswith("_") and not _is_module(module, node, a.name)]
    assert private == []  # (a module, even a package-private one, is not a private name)
    blind = _blind_excepts(tree)
    # run.py contains what passes the boundary (SystemExit, the deadline): one site
    assert blind == [] or (module.name == "run.py" and len(blind) == 1)


def _blind_excepts(tree: ast.AST) -> list[int]:
    """Lines of ``except:``, ``except Exception`` / ``BaseException`` (alone or in a tuple)."""
    def blind(t: ast.expr | None) -> bool:
        if t is None:
            return True
        if isinstance(t, ast.Tuple):
            return any(blind(e) for e in t.elts)
        return isinstance(t, ast.Name) and t.id in ("Exception", "BaseException")

    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.ExceptHandler) and blind(node.type)]


@pytest.mark.parametrize("module", BEHIND_THE_BOUNDARY, ids=_path)
def test_the_checks_call_adapters_and_user_code_through_the_boundary(module):
    assert _blind_excepts(ast.parse(module.read_text())) == []


def test_the_boundary_holds_the_one_broad_except():
    guarded = ROOT / "backends" / "guarded.py"
    assert len(_blind_excepts(ast.parse(guarded.read_text()))) == 1  # in attempt()
    assert _blind_excepts(ast.parse("try:\n    f()\nexcept (ValueError, Exception):\n"
                                    "    pass\n")) == [3]  # the detector detects


def test_a_profile_of_the_error_model_reaches_the_verdicts():
    x = np.linspace(0.1, 1.0, 5)

    def vjp(**kw):
        (r,) = [r for r in gradcheck.check(_sin(), x, backend="numpy", modes=("rev",), **kw)
                if r.kind == "vjp"]
        return r

    d, w = vjp(), vjp(error_model=ErrorModel(rounding_gamma=64.0))
    assert d.status is w.status is Status.PASSED
    assert "16 x eps(float64)" in d.allowed_source and "64 x eps(float64)" in w.allowed_source
    assert w.allowed > d.allowed
    # the screen judges resolution with the profile: a finer one hands over to the full check,
    # whose oracle error is within the rounding floor (resolved as well as float64 can)
    fine = vjp(error_model=ErrorModel(resolution=1e-16))
    assert d.details["screen"] == "passed"
    assert fine.details["screen"].startswith("escalated:") and "not resolved" in \
        fine.details["screen"]
    strict = vjp(error_model=ErrorModel(fd_safety=3.0, resolution=1e-16))
    assert strict.status is Status.PASSED and "3 x FD error" in strict.allowed_source


# -- mutant adapters: what an adapter returns is validated at the boundary (issue 32, class 5) --
def _mul() -> NumpyFunction:
    return NumpyFunction(lambda a, b: a * b, lambda a, c: (c[0] * a[1], c[0] * a[0]),
                         jvp=lambda a, t: (t[0] * a[1] + a[0] * t[1],), name="mul")


class _Mutant(NumpyBackend):
    """The NumPy backend with one answer bent by ``bend(method, answer)``; only ``vjp`` and
    ``jvp`` are overridden, so the batched calls go through the base class's default
    (``Backend.vjp_batch`` stacking rows of ``vjp``), as an adapter's own would."""

    name = "mutant"

    def __init__(self, bend):
        self.bend = bend

    def vjp(self, fn, args, diff, cotangents, device):
        return self.bend("vjp", list(super().vjp(fn, args, diff, cotangents, device)))

    def jvp(self, fn, args, diff, tangents, device):
        return self.bend("jvp", list(super().jvp(fn, args, diff, tangents, device)))


def _extra(method, g):
    return g + [np.zeros_like(g[0])] if method == "vjp" else g


def _missing(method, g):
    return g[:-1] if method == "vjp" else g


def _flat(method, g):
    return [a.ravel() for a in g] if method == "vjp" else g


def _half(method, g):
    return [a.astype(np.float16) for a in g] if method == "vjp" else g


def _ints(method, g):
    return [np.round(a).astype(np.int64) for a in g] if method == "vjp" else g


def _text(method, g):
    return [a.astype(str) for a in g] if method == "vjp" else g


def _jvp_extra(method, t):
    return t + [np.zeros_like(t[0])] if method == "jvp" else t


@pytest.mark.parametrize(("bend", "said"), [
    (_extra, "returned 3 arrays, expected 2"),
    (_missing, "returned 1 arrays, expected 2"),
    (_flat, "returned shape (12,), expected (3, 4)"),
    (_half, "returned dtype float16, expected float64"),
    (_ints, "returned dtype int64"),
    (_text, "expected a floating dtype"),
    (_jvp_extra, "the JVP returned 2 outputs, expected 1"),
], ids=["extra", "missing", "flat", "float16", "int64", "str", "jvp-extra"])
def test_a_mutant_adapters_answer_is_an_error_result_never_a_pass(bend, said):
    """Before: an extra cotangent was cut off by the default ``vjp_batch`` and the check passed;
    a float16 or integer gradient at float64 was compared as if it were one (a verdict on a
    broken adapter); a missing one was an IndexError; a str array a raw conversion error."""
    x = np.random.default_rng(0).standard_normal((3, 4))
    for fast in (False, True):
        report = gradcheck.check(_mul(), x, x + 1, backend=_Mutant(bend), fast=fast)
        broken = [r for r in report.results if r.status is Status.ERROR]
        assert broken and not any(r.status is Status.PASSED and r.kind == (
            "jvp" if bend is _jvp_extra else "vjp") for r in report.results), report.summary()
        assert any(said in r.message for r in broken), [r.message for r in broken]
        assert all(r.backend == "mutant" for r in broken)
    good = gradcheck.check(_mul(), x, x + 1, backend=_Mutant(lambda method, g: g))
    assert good.passed, good.summary()  # the same adapter, unbent, passes


@pytest.mark.parametrize("devices", [None, [], "cpu", ["cpu", 3], [""]])
def test_devices_that_are_not_a_list_of_names_are_an_error_result(devices):
    """Before: ``device not in None`` raised a bare TypeError out of check()."""
    class BadDevices(NumpyBackend):
        name = "bad-devices"

        def devices(self):
            return devices

    guard = GuardedBackend(BadDevices()).devices()
    assert isinstance(guard, AdapterFailure) and guard.call == "devices"
    assert "expected a non-empty list of device names" in guard.text
    report = gradcheck.check(np.sin, np.ones(3), backend=BadDevices())
    (only,) = report.results
    assert only.status is Status.ERROR and only.backend == "bad-devices"
    assert "devices()" in only.message and repr(devices)[:10] in only.message


def test_the_default_batch_keeps_every_array_a_row_returned():
    """``Backend.vjp_batch``'s default stacked only the first ``len(diff)`` arrays of each row,
    hiding an extra cotangent from the boundary."""
    x = np.ones((3, 4))
    g = GuardedBackend(_Mutant(_extra)).vjp_batch(_mul(), [x, x], [0, 1], [np.ones((2, 3, 4))],
                                                  "cpu")
    assert isinstance(g, AdapterFailure) and g.kind is FailureKind.BAD_SHAPE
    assert "returned 3 arrays, expected 2" in g.text


def test_batched_answers_must_carry_the_batch_axis():
    class Unbatched(NumpyBackend):
        name = "unbatched"

        def evaluate_batch(self, fn, args, batched, device):
            return [o[:1] for o in super().evaluate_batch(fn, args, batched, device)]

        def jvp_batch(self, fn, args, diff, tangents, device, vectorize=False):
            return [t[0] for t in super().jvp_batch(fn, args, diff, tangents, device)]

    g = GuardedBackend(Unbatched())
    x = np.ones((4, 3))
    outs = g.evaluate_batch(_sin(), [x], [True], "cpu")
    assert isinstance(outs, AdapterFailure) and "expected 4 stacked rows" in outs.text
    tans = g.jvp_batch(_mul(), [x, x], [0, 1], [np.ones((2, 4, 3))] * 2, "cpu")
    assert isinstance(tans, AdapterFailure) and "expected 2 stacked rows" in tans.text


@pytest.mark.parametrize("answer", [None, 5, "out"])
def test_an_evaluate_that_is_not_a_list_is_an_adapter_failure(answer):
    """Before: None or an int ended the check as an 'unexpected failure' (a TypeError); a str
    was read as a sequence of characters."""
    class NotAList(NumpyBackend):
        name = "not-a-list"

        def evaluate(self, fn, args, device):
            return answer

    failure = GuardedBackend(NotAList()).evaluate(_sin(), [np.ones(3)], "cpu")
    assert isinstance(failure, AdapterFailure) and failure.call == "evaluate"
    assert f"evaluate returned {type(answer).__name__}, expected a list of arrays" in failure.text
    (only,) = gradcheck.check(np.sin, np.ones(3), backend=NotAList()).results
    assert only.status is Status.ERROR and "expected a list of arrays" in only.message
