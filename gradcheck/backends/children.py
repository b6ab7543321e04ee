"""Child processes that do not outlive gradcheck, and the signals that stop a run.

Every process gradcheck starts (a protocol child, ``gradcheck run``'s pytest and its xdist
workers, a sweep worker) is tied to the process that started it:

* :func:`popen` starts a command in **its own session** (so its own process group: a shell
  wrapper or ``cargo run`` and everything they start) and, on Linux, with
  ``PR_SET_PDEATHSIG``: the child is killed (SIGKILL) when its parent dies, even by SIGKILL;
  :func:`end_group` then ends the whole group, grandchildren included;
* :func:`die_with_parent` ties a process that is already running (an xdist worker, a
  ``multiprocessing`` worker) to its parent the same way.

The death signal is sent when the *thread* that started the child ends, so :func:`popen`
starts children from a thread that lives as long as the process whenever it is called from
another thread than the main one.

:data:`STOP_SIGNALS` are the signals that stop ``gradcheck run`` and ``gradcheck sweep`` the way
Ctrl-C does (the report of what finished is written); :func:`exit_status` is the conventional
exit status of a run one of them stopped (128 + the signal number).
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

#: the signals that stop a run and have its report written: Ctrl-C, ``kill``, a closed
#: terminal or a CI runner cancelling the job (SIGHUP, where the platform has it)
STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

_PR_SET_PDEATHSIG = 1


def stop_signals() -> tuple[signal.Signals, ...]:
    """The :data:`STOP_SIGNALS` to handle now: SIGHUP stays ignored where it is (``nohup``)."""
    return tuple(s for s in STOP_SIGNALS
                 if not (s.name == "SIGHUP" and signal.getsignal(s) == signal.SIG_IGN))


def exit_status(signum: int) -> int:
    """128 + the signal number: the status a shell reports for a process that signal ended."""
    return 128 + int(signum)


def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, resolved in the parent (never between fork and exec); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return None
    return fn


_PRCTL = _prctl()


def die_with_parent(parent: int | None = None) -> None:
    """Have this process killed (SIGKILL) when its parent dies; if ``parent`` (its pid) is
    already gone, exit at once.  Linux only (elsewhere nothing happens)."""
    if _PRCTL is None:
        return
    _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if parent is not None and os.getppid() != parent:  # it died before the watch was set
        os._exit(1)


def _preexec(parent: int, own_group: bool) -> Callable[[], None] | None:
    prctl = _PRCTL
    if prctl is None and not own_group:
        return None

    def tie() -> None:  # between fork and exec: no import, no lock, plain system calls
        if own_group:
            os.setpgid(0, 0)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)  # 9: SIGKILL
            if os.getppid() != parent:  # the parent died before the watch was set
                os._exit(1)

    return tie


_spawner: queue.Queue[tuple[Callable[[], Any], queue.Queue[tuple[bool, Any]]]] | None = None
_spawner_lock = threading.Lock()
_spawner_pid = 0  # the process the spawner thread runs in (a forked child has no such thread)


def _forget_spawner() -> None:  # in a forked child: no spawner thread, maybe a held lock
    global _spawner, _spawner_lock
    _spawner, _spawner_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_spawner)


def _serve(requests: queue.Queue[tuple[Callable[[], Any], queue.Queue[tuple[bool, Any]]]]
           ) -> None:
    while True:
        start, answer = requests.get()
        try:
            answer.put((True, start()))
        except BaseException as exc:  # handed to the caller, raised there
            answer.put((False, exc))


def _on_lasting_thread(start: Callable[[], Any]) -> Any:
    """``start()`` run on the main thread or on a daemon thread that lives as long as the
    process (a child's death signal fires when the thread that started it ends)."""
    global _spawner, _spawner_pid
    if threading.current_thread() is threading.main_thread():
        return start()
    with _spawner_lock:
        if _spawner is None or _spawner_pid != os.getpid():
            _spawner, _spawner_pid = queue.Queue(), os.getpid()
            threading.Thread(target=_serve, args=(_spawner,), daemon=True,
                             name="gradcheck-spawner").start()
        requests = _spawner
    answer: queue.Queue[tuple[bool, Any]] = queue.Queue()
    requests.put((start, answer))
    ok, value = answer.get()
    if not ok:
        raise value
    return value


def popen(argv: Sequence[str], *, session: bool = True, **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **kwargs)`` in a new session (``session=False``: in a new
    process group of this session, so that it still reads the terminal), killed when this
    process dies (see the module doc)."""
    own_group = not session and sys.version_info < (3, 11)
    if session:
        kwargs["start_new_session"] = True
    elif not own_group:
        kwargs["process_group"] = 0
    tie = _preexec(os.getpid(), own_group)
    if tie is not None:
        kwargs["preexec_fn"] = tie
    return _on_lasting_thread(lambda: subprocess.Popen(list(argv), **kwargs))


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed its credentials: it is not ours to signal
        return False
    return True


def group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (zombies, which only wait for their parent
    to reap them, do not count; /proc where there is one)."""
    proc = "/proc"
    if not os.path.isdir(os.path.join(proc, "self")):
        return signal_group(pgid, 0)
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


def end_group(proc: subprocess.Popen[Any], wait_s: float = 5.0) -> None:
    """Kill ``proc``'s whole process group (it leads it: :func:`popen`), reap ``proc``, and
    wait up to ``wait_s`` seconds for the rest of the group to be gone."""
    pgid = proc.pid
    signal_group(pgid, signal.SIGKILL)
    if proc.poll() is None:
        proc.kill()  # not a group leader after all (started some other way)
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail on Linux
        pass
    deadline = time.monotonic() + wait_s
    while group_alive(pgid) and time.monotonic() < deadline:
        signal_group(pgid, signal.SIGKILL)
        time.sleep(0.02)
