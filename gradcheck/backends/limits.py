"""Containment of user code during a check: a time limit and exits that must not end the run.

* :func:`deadline` interrupts a check that runs past ``seconds``: it raises :class:`Timeout` (a
  ``BaseException``, so that a function's own ``except Exception`` cannot swallow it) at the
  next Python bytecode, through a ``SIGALRM`` timer on the main thread (which also interrupts
  a blocking system call) and a watchdog thread that raises it in the checked thread with
  ``PyThreadState_SetAsyncExc`` (which a function that ignores, replaces or cancels
  ``SIGALRM`` cannot disable, and which works off the main thread too).  C code that does not
  return to Python (a stuck BLAS call, a kernel that never returns) is interrupted only when
  it returns; process adapters have their own request timeout
  (:mod:`gradcheck.backends.process`).
* :func:`contained` tells which ``BaseException``\\ s are turned into ``error`` results: all but
  ``KeyboardInterrupt`` (Ctrl-C still stops the run); ``SystemExit`` raised by a function or
  an adapter is an error of that check, not the end of the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Timeout(BaseException):  # noqa: N818 - private; a BaseException on purpose (module doc)
    """Raised in the main thread when a check's time limit is reached."""


_UNSET = object()
_GRACE_S = 0.1  # the watchdog fires this long after the timer: the timer goes first where it can
_REPEAT_S = 0.1  # and again this often, for a function that swallowed the first Timeout


class _Flush(BaseException):  # noqa: N818 - private: replaces a pending Timeout, then caught
    """Raised in the checked thread by :meth:`_Watchdog.stop` in place of a Timeout that may be
    pending, and caught there at once."""


def _set_async(thread_id: int, exc: type[BaseException]) -> None:
    """Raise ``exc`` in thread ``thread_id`` at its next bytecode (replacing one that is
    pending).  CPython's ``PyThreadState_SetAsyncExc``: no signal, nothing user code can
    disable.  Never called with NULL to *drop* a pending exception: on CPython 3.10/3.11 that
    leaves the interpreter's eval-breaker flag set for good (it is reset only when an
    exception is delivered), and every later bytecode of the process then runs the pending-
    call check: the whole interpreter slowed some 100x (a Hypothesis search run after one
    check with ``timeout=`` no longer finished)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


def _flush() -> None:
    """Replace a Timeout pending on this thread by a :class:`_Flush` and take it here (it is
    delivered at the next bytecode check: a loop's backward jump at the latest)."""
    try:
        _set_async(threading.get_ident(), _Flush)
        for _ in range(1_000_000):
            pass
    except _Flush:
        return


class _Watchdog:
    """A daemon thread that raises :class:`Timeout` in the watched thread once ``seconds`` have
    passed (plus :data:`_GRACE_S`), and again every :data:`_REPEAT_S` until :meth:`stop`."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._target = threading.get_ident()
        self._lock = threading.Lock()
        self._armed = True
        self._done = threading.Event()
        threading.Thread(target=self._watch, name="gradcheck-deadline", daemon=True).start()

    def _watch(self) -> None:
        if self._done.wait(self._seconds + _GRACE_S):
            return
        while True:
            with self._lock:
                if not self._armed:
                    return
                _set_async(self._target, Timeout)
            if self._done.wait(_REPEAT_S):
                return

    def stop(self) -> None:
        """Disarm; a Timeout raised but not yet delivered is dropped (the body is over): it is
        replaced by a :class:`_Flush` that is delivered and caught here (called in the watched
        thread)."""
        while True:
            try:
                with self._lock:
                    self._armed = False
                    if threading.get_ident() == self._target:
                        _flush()
                break
            except Timeout:  # delivered on the way out, before the lock: meant for the body
                continue
        self._done.set()


def enforceable() -> bool:
    """Whether :func:`deadline` can interrupt here: CPython (the watchdog thread), in any
    thread; or ``SIGALRM`` on the main thread."""
    return hasattr(ctypes, "pythonapi") or (
        hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread())


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[bool]:
    """Raise :class:`Timeout` in the body after ``seconds`` (``None``: no limit); yields whether
    the limit is enforced.

    Two mechanisms, so that the limit does not depend on the body leaving the process's signal
    state alone: on the main thread a ``SIGALRM`` timer (it also interrupts a blocking system
    call such as ``time.sleep``), and in every thread a watchdog thread that raises
    :class:`Timeout` in the body's thread at its next bytecode, which a function that ignores,
    replaces or cancels ``SIGALRM`` (``signal.signal(SIGALRM, SIG_IGN)``, ``signal.alarm(0)``)
    cannot disable.  The previous handler and timer are restored on exit, whatever the body
    did to them."""
    if seconds is None or not enforceable():
        yield False
        return

    active = [False]  # the timer's signal raises only inside the body, not while it is set up

    def _alarm(signum, frame):  # noqa: ARG001 - the signal handler's signature
        if active[0]:  # once the body is over, a late signal is dropped, not raised
            raise Timeout(seconds)

    timer = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    watchdog = _Watchdog(seconds) if hasattr(ctypes, "pythonapi") else None
    previous: Any = _UNSET
    old_delay, old_interval = 0.0, 0.0
    try:
        if timer:
            previous = signal.signal(signal.SIGALRM, _alarm)
            old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
        active[0] = True
        yield True
    finally:
        while True:  # a Timeout due now was meant for the body: it must not skip the restoring
            try:
                active[0] = False
                if watchdog is not None:
                    watchdog.stop()
                break
            except Timeout:
                continue
        if previous is not _UNSET:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if old_delay:  # an outer timer (pytest-timeout's signal method): keep it running
                signal.setitimer(signal.ITIMER_REAL, old_delay, old_interval)


def contained(exc: BaseException) -> bool:
    """Whether ``exc`` becomes an ``error`` result: every exception but ``KeyboardInterrupt``."""
    return not isinstance(exc, KeyboardInterrupt)
