"""The gradcheck pytest plugin, tested with ``pytester``: options and ini settings, readable
ids, skip reasons, strict xfails from known discrepancies, seeds from ids, the reproducer
printed on failure (and that it reproduces), and ``pytest-xdist -n 2``."""

from __future__ import annotations

import contextlib
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import scipy.special  # noqa: F401  (in-process pytester runs must not re-import extensions)

import gradcheck.plugin.assertions  # noqa: F401
import gradcheck.plugin.search  # noqa: F401
from gradcheck.ops import catalog
from gradcheck.reference.numpy import get_op

pytest_plugins = ["pytester"]
# pytester restores sys.modules after every in-process run: an engine first imported inside one
# run (backend discovery imports it) would be dropped and imported again later in the same
# process, which torch's C extension does not survive (SystemError / segfault).  Import the
# installed engines before any snapshot is taken.
for _engine in ("torch", "jax", "mlx.core", "tinygrad"):
    with contextlib.suppress(ImportError):
        importlib.import_module(_engine)
for _spec in catalog.all_specs():
    get_op(_spec.name)  # loads every reference family module before pytester snapshots
ROOT = Path(__file__).resolve().parents[2]

SUITE = '''
import pytest
from gradcheck.plugin.assertions import assert_check

@pytest.mark.gradcheck(check="vjp")
def test_vjp(gradcheck_case):
    assert_check(gradcheck_case)

@pytest.mark.gradcheck(check="reference")
def test_reference(gradcheck_case):
    assert_check(gradcheck_case)

def test_seed(gradcheck_seed):
    print("SEED", gradcheck_seed)
'''

# A backend whose sin VJP is off by 1e-6 (a mutant) and which lacks every other op.
MUTANT = '''
import numpy as np
from gradcheck import NumpyFunction
from gradcheck.engines.numpy.backend import NumpyBackend
from gradcheck.reference.numpy import get_op

class Mutant(NumpyBackend):
    name = "mutant"
    def op(self, name):
        if name != "sin":
            return None
        ref = get_op("sin")
        return NumpyFunction(ref.forward, lambda a, c: [c[0] * np.cos(a[0]) * (1 + 1e-6)],
                             ref.jvp, name="sin_mutant")
'''


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.syspathinsert(ROOT)
    pytester.syspathinsert()
    pytester.makepyfile(test_suite=SUITE, mutant=MUTANT)
    pytester.makeconftest('pytest_plugins = ["gradcheck.pytest_plugin"]')
    return pytester


def _ids(result: pytest.RunResult) -> list[str]:
    return [line.split("::")[1] for line in result.outlines if "::" in line]


def test_ids_are_backend_device_dtype_op_and_point(suite):
    result = suite.runpytest("--collect-only", "-q", "--gradcheck-backend", "numpy",
                             "--gradcheck-op", "maximum", "--gradcheck-dtype", "float64",
                             "--gradcheck-profile", "ci", "-k", "vjp")
    assert _ids(result) == ["test_vjp[numpy-cpu-float64-maximum]",
                            "test_vjp[numpy-cpu-float64-maximum@tie]",
                            "test_vjp[numpy-cpu-float64-maximum@tie_at_zero]"]


def test_suite_tests_run_op_by_op_and_case_by_case(suite):
    result = suite.runpytest("--collect-only", "-q", "--gradcheck-backend", "torch",
                             "--gradcheck-op", "sin", "--gradcheck-op", "tanh",
                             "--gradcheck-dtype", "float64", "--gradcheck-device", "cpu",
                             "--gradcheck-profile", "ci")
    ids = _ids(result)
    # other tests keep their place (test_seed is last in the file); all of sin before tanh
    # (catalog order), and within an op each case's check kinds together, in file order
    assert ids[-1] == "test_seed"
    cases = [i.split("[")[1].rstrip("]") for i in ids[:-1]]
    assert ids[:2] == ["test_vjp[torch-cpu-float64-sin]", "test_reference[torch-cpu-float64-sin]"]
    ops = [c.split("-", 3)[3].split("@")[0] for c in cases]
    assert ops == ["sin"] * ops.count("sin") + ["tanh"] * ops.count("tanh")
    assert ops.count("tanh") > 0
    for case in set(cases):  # one contiguous block per case
        first = cases.index(case)
        assert cases[first:first + cases.count(case)] == [case] * cases.count(case)


def test_settings_come_from_the_ini_and_the_command_line_wins(suite):
    suite.makeini("[pytest]\ngradcheck_profile = ci\ngradcheck_backend = numpy\n"
                  "gradcheck_op = atan2\ngradcheck_dtype = float32\n")
    result = suite.runpytest("--collect-only", "-q", "-k", "vjp")
    # ci: special points in float64 only, so float32 has the seeded sample alone
    assert _ids(result) == ["test_vjp[numpy-cpu-float32-atan2]"]
    result = suite.runpytest("--collect-only", "-q", "-k", "vjp", "--gradcheck-dtype",
                             "float64", "--gradcheck-op", "hypot")
    assert all("-float64-hypot" in i for i in _ids(result)) and _ids(result)
    header = suite.runpytest("--collect-only", "-q", "-k", "nothing", "-v")
    header.stdout.fnmatch_lines(["gradcheck: profile=ci backends=numpy*"])


def test_a_bad_profile_is_a_usage_error(suite):
    suite.makeini("[pytest]\ngradcheck_profile = huge\n")
    result = suite.runpytest("--collect-only", "-q", "--gradcheck-backend", "numpy")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*gradcheck_profile='huge' is not valid*"])


def test_absent_devices_and_missing_ops_skip_with_reasons(suite):
    options = ["--gradcheck-backend", "mutant:Mutant", "--gradcheck-op", "sinh", "--gradcheck-op",
               "cos", "--gradcheck-device", "cpu", "--gradcheck-device", "cuda",
               "--gradcheck-dtype", "float64", "-k", "test_vjp"]
    # sin (which the mutant has, wrongly) runs on cpu: 3 points fail there, skip on cuda
    result = suite.runpytest("-q", "-rs", *options, "--gradcheck-op", "sin")
    result.assert_outcomes(skipped=13, failed=3)  # (sinh: 3 + cos: 2 + sin: 3) x cuda + ...
    result.stdout.fnmatch_lines(["*backend 'mutant:Mutant' has no implementation of op 'cos'*"])
    result.stdout.fnmatch_lines(
        ["*device 'cuda' not available for backend 'mutant:Mutant' (discovered: cpu)*"])
    # without sin every case would be skipped: nothing checked is a usage error with reasons
    result = suite.runpytest("-q", *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*plans no numeric check: every planned case is skipped: "
                                 "device 'cuda' not available*has no implementation of op*"])


def test_a_mutant_fails_with_evidence_and_a_reproducer_that_reproduces(suite, tmp_path):
    result = suite.runpytest("-q", "--gradcheck-backend", "mutant:Mutant", "--gradcheck-op",
                             "sin", "--gradcheck-dtype", "float64", "-k", "test_vjp")
    result.assert_outcomes(failed=3)  # the seeded sample and the two special points
    text = result.stdout.str()
    assert "test_vjp[mutant:Mutant-cpu-float64-sin]" in text
    for needle in ("VJP of output 0 w.r.t. input 0 [failed]", "allowed", "ratio",
                   "reproduce: python -m gradcheck.harness.runner 'mutant:Mutant-cpu-float64-sin'",
                   "standalone reproducer:", "inputs = ("):
        assert needle in text, needle
    lines = text.split("standalone reproducer:\n", 1)[1].splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith(("___", "===")))
    script = "\n".join(lines[:end])
    path = tmp_path / "repro.py"
    path.write_text(script)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         cwd=str(suite.path), env={"PYTHONPATH": f"{ROOT}:{suite.path}"})
    assert "DISAGREES" in out.stdout or "VJP of output 0" in out.stdout, out.stderr[-2000:]


def test_the_seed_is_a_function_of_the_test_id(suite):
    first = suite.runpytest("-q", "-s", "-k", "test_seed", "--gradcheck-backend", "numpy")
    second = suite.runpytest("-q", "-s", "-k", "test_seed", "--gradcheck-backend", "numpy")
    seeds = [line for line in first.outlines + second.outlines if line.startswith("SEED")]
    from gradcheck.harness.runner import stable_seed

    assert seeds == [f"SEED {stable_seed('test_seed')}"] * 2


def test_known_discrepancies_are_strict_xfails():
    from gradcheck.harness.plan import Selection, plan

    planned = plan("reference", Selection(profile="ci", backends=("torch",), ops=("tanh",),
                                          devices=("cpu",)))
    (sat,) = [p for p in planned if p.case.point == "saturated"]
    assert sat.xfail and "1 - tanh" in sat.xfail
    assert all(not p.xfail for p in planned if p.case.point != "saturated")


def test_runs_under_xdist(suite, monkeypatch):
    pytest.importorskip("xdist")
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}:{suite.path}")
    result = suite.runpytest_subprocess("-n", "2", "-q", "-p", "xdist",
                                        "--gradcheck-backend", "numpy", "--gradcheck-op",
                                        "atan2", "--gradcheck-profile", "ci", "-k", "vjp",
                                        "--gradcheck-dtype", "float64")
    result.assert_outcomes(passed=3)


def test_the_report_hooks_module_is_registered_when_present(suite):
    import gradcheck

    path = Path(gradcheck.__file__).parent / "plugin" / "session_report.py"
    present = path.exists()
    result = suite.runpytest("--collect-only", "-q", "-k", "nothing", "--trace-config",
                             "--gradcheck-backend", "numpy")
    out = result.stdout.str()
    assert ("gradcheck-report" in out or "gradcheck.plugin.session_report" in out) is present


def test_only_machine_dependent_known_entries_are_non_strict_xfails():
    """A known discrepancy is a strict xfail (a fixed engine must say the entry goes), except
    where it shows on some machines only: jax det's nan second derivatives at the
    rank-deficient matrix, where LAPACK's LU gets an exact zero pivot or not."""
    from gradcheck.harness.plan import Selection, plan
    from gradcheck.pytest_plugin import _marks

    loose = [(s.name, k) for s in catalog.all_specs() for k in s.known if not k.strict]
    assert {(name, k.backend, k.points) for name, k in loose} == {("det", "jax",
                                                                  ("rank_deficient",))}
    assert all("machine" in k.reason and k.evidence for _, k in loose)
    planned = [p for p in plan("vjp_of_vjp", Selection(profile="thorough", backends=("jax",),
                                                       ops=("det",)))
               if p.case.point == "rank_deficient"]
    assert planned and not planned[0].strict
    xfail = next(m for m in _marks(planned[0]) if m.name == "xfail")
    assert xfail.kwargs["strict"] is False
