"""The check's time limit (gradcheck/backends/limits.py) holds whatever the body does to the
process's signal state: it ignores ``SIGALRM``, installs its own handler, cancels the timer, or
runs off the main thread (issue 32, class 4).  Every wait is bounded by a generous watchdog of
the test itself; nothing asserts a duration."""

from __future__ import annotations

import contextlib
import signal
import threading
import time

import pytest

from gradcheck.backends import limits

pytestmark = pytest.mark.skipif(not limits.enforceable(), reason="no way to interrupt here")

GENEROUS_S = 60.0


def _spin_until(stop: threading.Event) -> None:
    """Pure Python that never returns by itself (the test's own event bounds it)."""
    while not stop.is_set():
        pass


def _hostile_body(defeat) -> tuple[bool, bool]:
    """``(enforced, interrupted)`` of a 0.2 s deadline around a body that first runs ``defeat``
    and then spins; a helper thread ends the spin after ``GENEROUS_S`` if nothing else does."""
    stop = threading.Event()
    guard = threading.Timer(GENEROUS_S, stop.set)
    guard.start()
    interrupted = False
    try:
        with limits.deadline(0.2) as enforced:
            defeat()
            _spin_until(stop)
    except limits.Timeout:
        interrupted = True
    finally:
        guard.cancel()
    return enforced, interrupted and not stop.is_set()


@pytest.mark.parametrize("defeat", [
    lambda: signal.signal(signal.SIGALRM, signal.SIG_IGN),
    lambda: signal.signal(signal.SIGALRM, lambda *_: None),
    lambda: signal.alarm(0),
    lambda: signal.setitimer(signal.ITIMER_REAL, 0),
], ids=["SIG_IGN", "own-handler", "alarm0", "setitimer0"])
def test_a_body_that_disables_sigalrm_is_still_interrupted(defeat):
    before = signal.getsignal(signal.SIGALRM)
    enforced, interrupted = _hostile_body(defeat)
    assert enforced and interrupted
    assert signal.getsignal(signal.SIGALRM) == before  # the caller's handler comes back
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_body_that_swallows_the_timeout_gets_it_again():
    stop = threading.Event()
    guard = threading.Timer(GENEROUS_S, stop.set)
    guard.start()
    swallowed = []
    try:
        with pytest.raises(limits.Timeout):
            with limits.deadline(0.2):
                signal.signal(signal.SIGALRM, signal.SIG_IGN)
                try:
                    _spin_until(stop)
                except limits.Timeout:
                    swallowed.append(1)
                _spin_until(stop)
    finally:
        guard.cancel()
    assert swallowed and not stop.is_set()


def test_the_limit_holds_off_the_main_thread():
    out: list = []

    def body():
        out.append(_hostile_body(lambda: None))

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(GENEROUS_S * 2)
    assert out == [(True, True)]


def test_no_timeout_escapes_a_body_that_finished_in_time():
    finished_late = 0
    for _ in range(200):  # a body that ends as the limit is reached leaves nothing pending
        ended = False
        try:
            with limits.deadline(0.001):
                sum(range(2000))
                ended = True
        except limits.Timeout:
            # on a loaded machine the body itself can outlast 1 ms: a timeout raised while it
            # still ran is the limit working; one raised after it ended is the bug tested here
            assert not ended, "a Timeout escaped a body that had finished"
            finished_late += 1
    assert finished_late < 200, "no body ever finished within 1 ms: nothing was tested"
    with limits.deadline(60):
        pass
    done = threading.Event()
    done.wait(0.5)  # a stray Timeout would be raised here, at the next bytecodes
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_pending_timeout_is_never_dropped_with_null(monkeypatch):
    """``PyThreadState_SetAsyncExc(id, NULL)`` leaves CPython 3.10/3.11's eval-breaker flag set
    for good: every later bytecode of the process ran the pending-call check (a Hypothesis search
    after one check with ``timeout=`` never finished).  The deadline replaces a pending Timeout
    by an exception it catches instead, so every call passes an exception."""
    import ctypes

    real = ctypes.pythonapi.PyThreadState_SetAsyncExc
    calls = []

    class Recording:
        def PyThreadState_SetAsyncExc(self, tid, exc):  # noqa: N802 - the C API's name
            calls.append(exc)
            return real(tid, exc)

    monkeypatch.setattr(limits.ctypes, "pythonapi", Recording())
    for seconds in (0.001, 5.0):
        with contextlib.suppress(limits.Timeout):
            with limits.deadline(seconds):
                time.sleep(0.05)
    assert calls and all(c is not None and c.value in (limits.Timeout, limits._Flush)
                         for c in calls)
