"""Run a command in its own process group and stop the whole group on SIGINT or SIGTERM.

``gradcheck run`` starts pytest this way: a signal to ``gradcheck`` (Ctrl-C, ``kill``, a CI
job's timeout) is passed on as SIGINT to pytest and its xdist workers, which then stop the way
they stop on Ctrl-C (the running tests are interrupted, the streams get their ``end`` records).
Whatever has not exited after ``grace_s`` seconds is killed (SIGKILL); a second signal kills at
once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

#: seconds the child's process group gets to stop after SIGINT before it is killed
GRACE_S = 20.0
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True)
class Outcome:
    returncode: int
    signal: int | None = None  # the signal that stopped the run, if one did
    killed: bool = False  # the group had to be killed (SIGKILL)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed its credentials: it is not ours to signal
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (zombies, which only wait for their parent
    to reap them, do not count; /proc where there is one)."""
    proc = "/proc"
    if not os.path.isdir(os.path.join(proc, "self")):
        return _signal_group(pgid, 0)
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, "stat"), "rb") as f:
                stat = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(stat) > 2 and stat[2] == str(pgid).encode() and stat[0] != b"Z":
            return True
    return False


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
    previous = {s: signal.signal(s, on_signal) for s in _SIGNALS}
    try:
        if sys.version_info >= (3, 11):
            proc = subprocess.Popen(list(cmd), process_group=0)
        else:  # pragma: no cover - Python 3.10 has no process_group
            proc = subprocess.Popen(list(cmd), preexec_fn=os.setpgrp)
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
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return Outcome(code, received[0] if received else None, killed)
