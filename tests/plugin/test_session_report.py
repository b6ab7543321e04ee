"""The report hooks' process side (gradcheck/plugin/session_report.py): an xdist worker dies
with its controller, even a SIGKILLed one, checked on a real pytest run's real process tree."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.support import process_tree
from tests.support.child_env import child_env
from tests.support.process_tree import needs_proc

#: each test is stuck in C code that holds the GIL (a regular expression's exponential
#: backtracking): like a hang in an engine's native code, the worker runs no Python thread
STUCK = '''
import re
import pytest

@pytest.mark.parametrize("k", range(4))
def test_stuck(k):
    re.match(r"(a+)+$", "a" * 60 + "b")
'''


@needs_proc
def test_a_sigkilled_xdist_controller_leaves_no_worker(tmp_path):
    """pytest -n 2 with the plugin, its controller SIGKILLed while both workers are stuck in
    native code: the workers go too (before, execnet's reader thread, which ends a worker
    whose controller has gone, could not run: they ran on, orphaned, for ever)."""
    pytest.importorskip("xdist")
    (tmp_path / "test_stuck.py").write_text(STUCK)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(tmp_path), "-q", "-p", "no:cacheprovider", "-p",
         "gradcheck.pytest_plugin", f"--gradcheck-report-dir={out}", "-n", "2"],
        cwd=tmp_path, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        def workers_in_tests() -> bool:  # each worker has streamed its first test's start
            return len(list(out.glob("results.gw*.jsonl"))) >= 2 and len(
                process_tree.children_of(proc.pid)) >= 2

        assert process_tree.wait_until(workers_in_tests, 120), "the workers did not start"
        time.sleep(2)  # not a timing: lets the workers get stuck (either way they must go)
        workers = process_tree.children_of(proc.pid)
        proc.kill()
        proc.wait(timeout=60)
        process_tree.assert_gone(workers, "the xdist workers after their controller's SIGKILL")
    finally:
        if proc.poll() is None:
            proc.kill()
        process_tree.kill_all(process_tree.in_session(proc.pid))

