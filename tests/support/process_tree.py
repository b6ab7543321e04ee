"""Real process trees in the tests: who is alive, by pid, session or parent, read from /proc
(zombies, which only wait to be reaped, count as gone), and bounded waits for them to go."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterable

import pytest

needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self") or sys.platform != "linux",
                                reason="reads process trees from Linux's /proc")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return [x.decode() for x in fields]


def alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _select(index: int, value: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None and st[0] not in ("Z", "X") and int(st[index]) == value:
                out.append(int(entry))
    return out


def in_session(sid: int) -> list[int]:
    """The live processes of session ``sid``."""
    return _select(3, sid)


def in_group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    return _select(2, pgid)


def children_of(pid: int) -> list[int]:
    return _select(1, pid)


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for c in children_of(todo.pop()):
            found.append(c)
            todo.append(c)
    return found


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds pass (a bound, not a timing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def kill_all(pids: Iterable[int]) -> None:
    """Clean up after a failed test: SIGKILL what is left."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def assert_gone(pids: Iterable[int], what: str, timeout: float = 30.0) -> None:
    """Every process of ``pids`` ends within ``timeout`` seconds; the survivors are killed and
    named otherwise."""
    pids = list(pids)
    if not wait_until(lambda: not any(alive(p) for p in pids), timeout):
        left = [p for p in pids if alive(p)]
        kill_all(left)
        pytest.fail(f"{what}: processes {left} survived")


def assert_session_empty(sid: int, what: str, timeout: float = 30.0) -> None:
    """No process of session ``sid`` is left within ``timeout`` seconds (survivors are killed
    and named otherwise)."""
    if not wait_until(lambda: not in_session(sid), timeout):
        left = in_session(sid)
        kill_all(left)
        pytest.fail(f"{what}: processes {left} of session {sid} survived")
