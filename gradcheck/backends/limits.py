"""Containment of user code during a check: a time limit and exits that must not end the run.

* :func:`deadline` interrupts a check that runs past ``seconds``: on the main thread, with
  ``signal.setitimer``/``SIGALRM`` where the platform has them, it raises :class:`Timeout` (a
  ``BaseException``, so that a function's own ``except Exception`` cannot swallow it) at the
  next Python bytecode.  C code that does not return to Python (a stuck BLAS call, a kernel
  that never returns) cannot be interrupted that way; process adapters have their own
  request timeout (:mod:`gradcheck.backends.process`).  Off the main thread, or without
  ``SIGALRM``, no limit is enforced, and :func:`deadline` says so.
* :func:`contained` tells which ``BaseException``\\ s are turned into ``error`` results: all but
  ``KeyboardInterrupt`` (Ctrl-C still stops the run); ``SystemExit`` raised by a function or
  an adapter is an error of that check, not the end of the run.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Timeout(BaseException):  # noqa: N818 - private; a BaseException on purpose (module doc)
    """Raised in the main thread when a check's time limit is reached."""


def enforceable() -> bool:
    """Whether :func:`deadline` can interrupt here (main thread, ``SIGALRM`` available)."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[bool]:
    """Raise :class:`Timeout` in the body after ``seconds`` (``None``: no limit); yields whether
    the limit is enforced.  The previous handler and timer are restored on exit."""
    if seconds is None or not enforceable():
        yield False
        return

    def _alarm(signum, frame):  # noqa: ARG001 - the signal handler's signature
        raise Timeout(seconds)

    previous = signal.signal(signal.SIGALRM, _alarm)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if old_delay:  # an outer timer (pytest-timeout's signal method): keep it running
            signal.setitimer(signal.ITIMER_REAL, old_delay, old_interval)


def contained(exc: BaseException) -> bool:
    """Whether ``exc`` becomes an ``error`` result: every exception but ``KeyboardInterrupt``."""
    return not isinstance(exc, KeyboardInterrupt)
