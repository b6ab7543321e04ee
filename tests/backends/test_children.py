"""gradcheck/backends/children.py on real processes: a child leads its own session, the thread
that starts it may end, and a forked process can still start children from a thread."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from gradcheck.backends import children
from tests.support import process_tree
from tests.support.child_env import child_env
from tests.support.process_tree import needs_proc

FORKED = '''
import os, sys, threading
from gradcheck.backends import children

def start(out):
    out.append(children.popen(["sh", "-c", "exit 7"]).wait())

first = []
t = threading.Thread(target=start, args=(first,)); t.start(); t.join()  # the spawner exists
pid = os.fork()
if pid == 0:  # no spawner thread here: one is started for this process
    got = []
    t = threading.Thread(target=start, args=(got,)); t.start(); t.join(60)
    os._exit(0 if got == [7] else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
'''


@needs_proc
def test_a_child_started_from_an_ended_thread_lives_on_in_its_own_session():
    started: list[subprocess.Popen] = []
    t = threading.Thread(target=lambda: started.append(children.popen(["sleep", "60"])))
    t.start()
    t.join()
    proc = started[0]
    try:
        assert os.getsid(proc.pid) == proc.pid  # its own session, so its own group
        assert not process_tree.wait_until(lambda: proc.poll() is not None, 1.0)
    finally:
        children.end_group(proc)
    assert proc.returncode == -9 and not process_tree.in_group(proc.pid)


def test_a_forked_process_starts_children_from_a_thread():
    """After a fork the spawner thread is gone: a new one serves the child process (before,
    the request waited for ever on the parent's queue)."""
    proc = subprocess.run([sys.executable, "-c", FORKED], env=child_env(), timeout=120)
    assert proc.returncode == 0
