"""The conformance kit: the example adapter passes; each deliberately broken adapter fails with a
message that names the call, what was wrong and what was expected."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gradcheck import Status, get_backend, installed_backends
from gradcheck.backends import registry
from gradcheck.testing import conformance_test, format_conformance, main, run_conformance

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gradcheck-minigrad"
PATH = "gradcheck_minigrad.adapter:MinigradBackend"


@pytest.fixture(autouse=True)
def _example_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    registry._CACHE.clear()
    yield
    registry._CACHE.clear()


def _minigrad():
    from gradcheck_minigrad.adapter import MinigradBackend

    return MinigradBackend


def _problems(report, section):
    return [r for r in report.results if r.details.get("section") == section and not r.ok]


def test_example_adapter_conforms():
    report = run_conformance(PATH)
    assert report.passed, format_conformance(report)
    sections = {r.details["section"] for r in report.results if r.status is Status.PASSED}
    assert {"identity", "declarations", "evaluate", "batch", "vjp", "numeric"} <= sections
    # undeclared capabilities are skipped with the reason, not silently passed
    jvp = [r for r in report.results if r.details["section"] == "jvp"]
    assert jvp and all(r.status is Status.SKIPPED for r in jvp)
    assert "supports_jvp=False" in jvp[0].message


def test_entry_point_registration(monkeypatch):
    """What `pip install examples/gradcheck-minigrad` does: an entry point in group
    gradcheck.backends; simulated here so the test needs no install."""
    ep = importlib.metadata.EntryPoint(name="minigrad", value=PATH, group="gradcheck.backends")
    real = importlib.metadata.entry_points

    def fake(**kw):
        if kw.get("group") == "gradcheck.backends":
            return importlib.metadata.EntryPoints([ep])
        return real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    assert "minigrad" in installed_backends()
    assert get_backend("minigrad").name == "minigrad"
    assert run_conformance("minigrad", numeric=False).passed


def _broken(cls_name, **attrs):
    return type(cls_name, (_minigrad(),), attrs)()


def test_wrong_output_dtype_is_reported():
    def evaluate(self, fn, args, device):  # computes in float64 whatever was asked
        return [np.asarray(o, dtype=np.float64) for o in
                _minigrad().evaluate(self, fn, [a.astype(np.float64) for a in args], device)]

    report = run_conformance(_broken("WrongDtype", evaluate=evaluate), numeric=False)
    bad = _problems(report, "evaluate")
    assert bad and all(r.dtype == "float32" for r in bad)
    assert "dtype float64, expected float32" in bad[0].message
    assert "evaluate(sin)" in bad[0].message


def test_wrong_vjp_shape_is_reported():
    def vjp(self, fn, args, diff, cotangents, device):
        return [g.ravel() for g in _minigrad().vjp(self, fn, args, diff, cotangents, device)]

    report = run_conformance(_broken("FlatVjp", vjp=vjp), numeric=False)
    msg = _problems(report, "vjp")[0].message
    assert "vjp(sin): vjp array 0 has shape (12,), expected (3, 4)" in msg


def test_raising_adapter_becomes_error_results_and_the_run_goes_on():
    def vjp(self, fn, args, diff, cotangents, device):
        raise RuntimeError("boom in the adapter")

    report = run_conformance(_broken("Raises", vjp=vjp))
    errors = [r for r in report.results if r.status is Status.ERROR]
    assert any("vjp(sin) raised RuntimeError: boom in the adapter" in r.message for r in errors)
    # evaluate still ran and passed for every probe: one broken method fails only its checks
    assert not _problems(report, "evaluate")


def test_declared_but_missing_capabilities_fail():
    report = run_conformance(_broken("Liar", supports_jvp=True, supports_order2=True),
                             numeric=False)
    jvp = _problems(report, "jvp")[0].message
    order2 = _problems(report, "order2")[0].message
    assert "supports_jvp=True but jvp() raised NotImplementedError" in jvp
    assert "supports_order2=True but vjp_function() raised NotImplementedError" in order2


def test_listed_device_and_declared_dtype_must_work():
    def devices(self):
        return ["cpu", "cuda"]

    def evaluate(self, fn, args, device):
        if device != "cpu":
            raise RuntimeError(f"no such device {device!r}")
        if any(a.dtype == np.float16 for a in args):
            raise TypeError("float16 is not supported")
        return _minigrad().evaluate(self, fn, args, device)

    be = _broken("Overclaims", devices=devices, evaluate=evaluate,
                 dtypes=("float64", "float32", "float16"))
    bad = _problems(run_conformance(be, numeric=False), "evaluate")
    assert {(r.device, r.dtype) for r in bad} >= {("cuda", "float64"), ("cpu", "float16")}
    assert any("no such device 'cuda'" in r.message for r in bad)


def test_missing_declarations_fail():
    be = _broken("Undeclared", semantics=None, name="abstract", dtypes=("float64", "int8"))
    bad = {r.name: r.message for r in run_conformance(be, numeric=False).results if not r.ok}
    assert "declare gradcheck.Semantics" in bad["declarations: semantics"]
    assert "set the class attribute `name`" in bad["identity: name"]
    assert "expected a non-empty tuple" in bad["declarations: dtypes"]


def test_wrong_gradient_fails_numeric_and_correct_one_passes():
    from gradcheck_minigrad import engine

    def bad_sin(x):  # forward right, derivative off by 0.1 %
        return engine.Var(np.sin(x.value), ((x, lambda g: 1.001 * g * np.cos(x.value)),))

    def op(self, name):
        return bad_sin if name == "sin" else _minigrad().op(self, name)

    report = run_conformance(_broken("WrongRule", op=op))
    bad = _problems(report, "numeric")
    assert bad and all(": sin:" in r.name for r in bad)
    assert "VJP of output 0 w.r.t. input 0 DISAGREES" in bad[0].message
    assert run_conformance(PATH).passed


def test_wrong_op_mapping_fails_evaluate():
    def op(self, name):
        return _minigrad().op(self, "tanh" if name == "sin" else name)

    bad = _problems(run_conformance(_broken("WrongOp", op=op), numeric=False), "evaluate")
    assert "differs from the op's float64 NumPy meaning" in bad[0].message


def test_no_probe_ops_and_unloadable_backend():
    report = run_conformance(_broken("NoOps", op=lambda self, name: None))
    assert "no probe function" in _problems(report, "evaluate")[0].message
    report = run_conformance("no_such_pkg.adapter:Nope")
    assert report.results[0].status is Status.ERROR
    assert "cannot be loaded" in report.results[0].message


def test_cli_exit_codes(capsys):
    assert main([PATH, "--no-numeric"]) == 0
    assert main(["no_such_pkg.adapter:Nope"]) == 2
    out = capsys.readouterr().out
    assert "cannot be loaded" in out


def test_pytest_factory_passes_and_fails_by_section():
    good = conformance_test(PATH, numeric=False)
    good("vjp")
    with pytest.raises(pytest.skip.Exception, match="supports_jvp=False"):
        good("jvp")

    def vjp(self, fn, args, diff, cotangents, device):
        return [g[..., :1] for g in _minigrad().vjp(self, fn, args, diff, cotangents, device)]

    bad = conformance_test(_broken("Sliced", vjp=vjp), numeric=False)
    with pytest.raises(pytest.fail.Exception, match=r"\[vjp\]\n  FAILED .*shape"):
        bad("vjp")


def test_example_package_test_module_runs_under_pytest():
    """The one-line test module of the example package, run as its author would run it."""
    env_path = f"{EXAMPLE / 'src'}:{Path(__file__).resolve().parents[2]}"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
         str(EXAMPLE), str(EXAMPLE / "tests")], capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"}, cwd=str(EXAMPLE))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "passed" in proc.stdout and "failed" not in proc.stdout


# -- the built-in numpy backend: order 2 exactly where a function carries second-order rules ---


def _mul_with_order2(wrong_dx: bool = False):
    """``x * y`` whose VJP ``(x, y, g) -> (g y, g x)`` is itself a NumpyFunction with hand-derived
    rules; ``wrong_dx`` drops its ``d/dx`` (an error only order 2 sees)."""
    from gradcheck import NumpyFunction

    def vjp2(a, c):
        x, y, g = a
        return (np.zeros_like(x) if wrong_dx else c[1] * g), c[0] * g, c[0] * y + c[1] * x

    def jvp2(a, t):
        x, y, g = a
        return t[2] * y + g * t[1], t[2] * x + g * t[0]

    inner = NumpyFunction(lambda x, y, g: (g * y, g * x), vjp2, jvp2, name="mul_vjp")
    return NumpyFunction(np.multiply, inner, lambda a, t: (t[0] * a[1] + a[0] * t[1],),
                         name="mul2")


def test_numpy_backend_conforms_and_declares_order2_per_function():
    report = run_conformance("numpy")
    assert report.passed, format_conformance(report)
    order2 = [r for r in report.results if r.details["section"] == "order2"]
    # the catalog's reference rules are first order: each probe's order 2 is declared absent
    assert order2 and all(r.status is Status.SKIPPED for r in order2)
    assert "supports_order2_for(fn) is False" in order2[0].message


def test_numpy_order2_probe_runs_and_its_mutant_fails():
    from gradcheck.testing import Probe

    inputs = tuple(np.random.default_rng(4).standard_normal((2, 3, 4)))
    good = run_conformance("numpy", probes=[Probe("mul2", _mul_with_order2(), inputs,
                                                  np.multiply)])
    assert good.passed, format_conformance(good)
    assert any(r.details["section"] == "order2" and r.status is Status.PASSED
               for r in good.results)
    assert any(r.kind == "vjp_of_vjp" and r.status is Status.PASSED for r in good.results)
    bad = run_conformance("numpy", probes=[Probe("mul2", _mul_with_order2(True), inputs,
                                                 np.multiply)])
    assert {r.kind for r in _problems(bad, "numeric")} >= {"vjp_of_vjp"}


def test_order2_declared_for_a_function_without_rules_fails():
    from gradcheck.engines.numpy.backend import NumpyBackend

    liar = type("Order2Liar", (NumpyBackend,), {"supports_order2_for": lambda self, fn: True})()
    bad = _problems(run_conformance(liar, numeric=False), "order2")
    assert bad and "supports_order2=True but vjp_function() raised NotImplementedError" in \
        bad[0].message


# -- what an adapter returns, as the kit reports it (issue 32, class 5) -------------------------
def _one_too_many(self, fn, args, diff, cotangents, device):
    g = _minigrad().vjp(self, fn, args, diff, cotangents, device)
    return list(g) + [np.zeros_like(g[0])]


def _batch_one_too_many(self, fn, args, diff, cotangents, device, vectorize=False):
    g = _minigrad().vjp_batch(self, fn, args, diff, cotangents, device, vectorize=vectorize)
    return list(g) + [np.zeros_like(g[0])]


def _batch_wrong_dtype(self, fn, args, diff, cotangents, device, vectorize=False):
    return [np.asarray(g, dtype=np.float16) for g in
            _minigrad().vjp_batch(self, fn, args, diff, cotangents, device, vectorize=vectorize)]


def test_an_extra_cotangent_fails_the_vjp_section_and_errors_the_numeric_checks():
    """The mutant's plain ``vjp`` returns one gradient too many: the kit's vjp section fails
    and the numeric checks are errors (before: they passed, the extra cut off by the default
    ``vjp_batch``)."""
    report = run_conformance(_broken("ExtraVjp", vjp=_one_too_many))
    assert not report.passed
    assert any("returned 2 arrays, expected 1" in r.message for r in _problems(report, "vjp"))
    numeric = [r for r in report.results if r.details.get("section") == "numeric"]
    assert numeric and not any(r.status is Status.PASSED and r.kind == "vjp" for r in numeric)
    assert any(r.status is Status.ERROR and "returned 2 arrays, expected 1" in r.message
               for r in numeric)


@pytest.mark.parametrize(("vjp_batch", "said"), [
    (_batch_one_too_many, "the VJP returned 2 arrays, expected 1"),
    (_batch_wrong_dtype, "vjp_batch row 0 array 0 has dtype float16, expected float"),
], ids=["extra", "float16"])
def test_a_broken_vjp_batch_fails_the_batch_section(vjp_batch, said):
    """An adapter's own ``vjp_batch`` (what every check calls) is checked by the kit too; before,
    only ``vjp`` was."""
    report = run_conformance(_broken("BadBatch", vjp_batch=vjp_batch), numeric=False)
    bad = _problems(report, "batch")
    assert bad and any(f"vjp_batch(sin): {said}" in r.message for r in bad), \
        [r.message for r in bad]
    assert not _problems(report, "vjp")  # the plain vjp is fine


def test_devices_none_fails_identity_and_checks_nothing():
    report = run_conformance(_broken("NoDevices", devices=lambda self: None))
    bad = _problems(report, "identity")
    assert bad and "devices() returned None" in bad[0].message
    assert not report.passed
