"""``gradcheck sweep``'s signal handling (gradcheck/sweep/cli.py), with real signals sent to
this process: the first stop signal stops the sweep, the ones after it cannot change how it
ends, and ``nohup``'s ignored SIGHUP stays ignored."""

from __future__ import annotations

import os
import signal

import pytest

from gradcheck.sweep import cli as sweep_cli

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")


@pytest.fixture
def saved_handlers():
    """The test process's own handlers are put back whatever the block left."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    saved = {s: signal.getsignal(s) for s in sigs}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


@pytest.mark.parametrize("first", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_only_the_first_stop_signal_stops_the_sweep(saved_handlers, first):
    """Ctrl-C, SIGTERM or SIGHUP stops the sweep once; Ctrl-C pressed again, SIGTERM or SIGHUP
    while its workers are stopped and its report is written, and after the block, are
    ignored (before, a second one raised again out of the cleanup, or killed the process,
    and the exit status became the second signal's or none)."""
    seen = []
    with sweep_cli.stopped_by_signals():
        try:
            os.kill(os.getpid(), signal.Signals[first])
            for _ in range(1000):  # the handler runs at the next bytecode boundary
                pass
        except sweep_cli.Stopped as exc:
            seen.append(exc.signum)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                os.kill(os.getpid(), sig)  # the shutdown goes on
    assert seen == [signal.Signals[first]]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        os.kill(os.getpid(), sig)  # after the block: still shutting down, still alive


def test_an_unstopped_sweep_restores_the_handlers(saved_handlers):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with sweep_cli.stopped_by_signals():
        pass
    assert {s: signal.getsignal(s) for s in before} == before


def test_sighup_stays_ignored_under_nohup(saved_handlers):
    """``nohup gradcheck sweep``: the closed terminal's SIGHUP does not stop the sweep."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with sweep_cli.stopped_by_signals():
        os.kill(os.getpid(), signal.SIGHUP)  # ignored: nothing is raised
        for _ in range(1000):
            pass
        with pytest.raises(sweep_cli.Stopped):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
