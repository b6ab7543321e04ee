"""Progress of ``gradcheck run`` (gradcheck/plugin/progress.py), on real pytest runs of a
tiny suite whose test ids name backends as the suites' do: per backend tests done of the
total and failures, a line rewritten in place where a terminal is forced (pytest's own letters
then only for failures), one plain line in a CI log, the totals from xdist's collection too."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from gradcheck.plugin.progress import backend_of
from tests.support.child_env import child_env

SUITE = '''
import pytest

@pytest.mark.parametrize("case", ["torch-cpu-float64-sin", "torch-cpu-float32-exp",
                                  "jax-cpu-float64-sin"])
def test_vjp(case):
    assert case != "torch-cpu-float32-exp"

def test_plain():
    pass
'''


def _run(tmp_path, *args, **env):
    (tmp_path / "test_tiny.py").write_text(SUITE)
    env.setdefault("COLUMNS", "200")  # the width the terminal line is cut to
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path), "-q", "-p", "no:cacheprovider", "-p",
         "gradcheck.pytest_plugin", *args], cwd=tmp_path, env=child_env(**env),
        capture_output=True, timeout=300)
    # bytes decoded by hand: text mode would turn the line's carriage returns into newlines
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(),
                                       proc.stderr.decode())


def test_a_terminal_gets_one_line_per_backend_rewritten_in_place(tmp_path):
    proc = _run(tmp_path, "--gradcheck-progress=line", GRADCHECK_PROGRESS="")
    assert proc.returncode == 1
    assert proc.stderr.endswith("\rgradcheck run: torch 2/2 tests, 1 failed, done | jax 1/1 "
                                "tests, 0 failed, done | other 1/1 tests, 0 failed, done"
                                "\x1b[K\n")
    assert proc.stderr.count("\n") == 1
    letters = proc.stdout.splitlines()[0]
    assert "F" in letters and "." not in letters  # the line counts the passes


def test_a_ci_log_gets_one_plain_line(tmp_path):
    proc = _run(tmp_path, "--gradcheck-progress=auto", CI="true", GRADCHECK_PROGRESS="")
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "gradcheck run: torch 2/2 tests, 1 failed, done | jax 1/1 tests, 0 failed, done | "
        "other 1/1 tests, 0 failed, done"]
    assert "\r" not in proc.stderr and "..F" in proc.stdout.replace(".F.", "..F")


def test_off_by_default_for_a_plain_pytest_run(tmp_path):
    proc = _run(tmp_path, GRADCHECK_PROGRESS="")
    assert "gradcheck run:" not in proc.stderr


def test_the_totals_come_from_xdist_collection(tmp_path):
    pytest.importorskip("xdist")
    proc = _run(tmp_path, "--gradcheck-progress=plain", "-n", "2", "-p", "xdist")
    assert proc.stderr.strip().splitlines()[-1] == (
        "gradcheck run: torch 2/2 tests, 1 failed, done | jax 1/1 tests, 0 failed, done | "
        "other 1/1 tests, 0 failed, done")


def test_gradcheck_run_asks_for_it():
    from gradcheck.cli import pytest_args

    args = argparse.Namespace(report_dir="r", profile=None, backend=None, device=None,
                              dtype=None, op=None, shard=None, jobs=None, pytest_args=[])
    assert "--gradcheck-progress=auto" in pytest_args(args, __import__("pathlib").Path("s"))


def test_the_backend_is_the_first_field_of_the_case_id():
    assert backend_of("suites/test_numeric.py::test_vjp[torch-cpu-float64-sin]") == "torch"
    assert backend_of("x.py::test_cross[torch+jax-cpu-float64-sin]") == "torch+jax"
    assert backend_of("x.py::test_plain") == "other"
    assert backend_of("x.py::test_cross[NOTSET]") == "other"  # an empty parametrization
