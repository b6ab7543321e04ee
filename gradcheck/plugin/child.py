"""Run a command in its own process group and stop the whole group on SIGINT, SIGTERM or SIGHUP.

``gradcheck run`` starts pytest this way: a signal to ``gradcheck`` (Ctrl-C, ``kill``, a CI
job's timeout or cancellation, a closed terminal) is passed on as SIGINT to pytest and its xdist
workers, which then stop the way they stop on Ctrl-C (the running tests are interrupted, the
streams get their ``end`` records).  Whatever has not exited after ``grace_s`` seconds is killed
(SIGKILL); a second signal kills at once.  Once a signal has stopped the run, the process is
shutting down: further stop signals are ignored (the caller writes the report and exits with
the first signal's status).  The command dies with this process, even when it is SIGKILLed
(:mod:`gradcheck.backends.children`).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from gradcheck.backends import children
from gradcheck.backends.children import group_alive as _group_alive
from gradcheck.backends.children import signal_group as _signal_group

#: seconds the child's process group gets to stop after SIGINT before it is killed
GRACE_S = 20.0


@dataclass(frozen=True)
class Outcome:
    returncode: int
    signal: int | None = None  # the signal that stopped the run, if one did
    killed: bool = False  # the group had to be killed (SIGKILL)


def run(cmd: Sequence[str], *, grace_s: float = GRACE_S) -> Outcome:
    """Run ``cmd`` (its own process group) to completion or until a signal stops it."""
    received: list[int] = []
    deadline = [float("inf")]
    group: list[int] = []  # the child's process group, once it exists

    def on_signal(signum: int, frame: object) -> None:
        if received:  # a second signal: stop waiting
            deadline[0] = 0.0
            return
        received.append(signum)
        deadline[0] = time.monotonic() + grace_s
        if group:
            _signal_group(group[0], signal.SIGINT)

    # handlers first: the child then starts with SIGINT at its default (a signal ignored here,
    # e.g. under nohup or some CI runners, would stay ignored in the child: no Ctrl-C for it)
    previous = {s: signal.signal(s, on_signal) for s in children.stop_signals()}
    try:  # its own group in this session (pytest keeps the terminal), dies with this process
        proc = children.popen(cmd, session=False)
    except BaseException:
        for s, handler in previous.items():
            signal.signal(s, handler)
        raise
    group.append(pgid := proc.pid)
    if received:  # it came while the child was starting
        _signal_group(pgid, signal.SIGINT)
    killed = False
    try:
        while True:
            try:
                code = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline[0]:
                    killed = _signal_group(pgid, signal.SIGKILL) or killed
        if received:  # xdist workers may outlive the controller: the group goes too
            while time.monotonic() < deadline[0] and _group_alive(pgid):
                time.sleep(0.1)
            if _group_alive(pgid):
                killed = _signal_group(pgid, signal.SIGKILL) or killed
    finally:  # stopped: shutting down, where a second Ctrl-C must not change the outcome
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_IGN if received else handler)
    return Outcome(code, received[0] if received else None, killed)
