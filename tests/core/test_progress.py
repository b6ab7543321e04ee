"""The progress display (gradcheck/core/progress.py) on a fake terminal and a fake CI log,
with a fake clock: one line rewritten in place on a terminal, at most one plain line a minute
(and one at the end) in a log, the time left from each backend's rate so far."""

from __future__ import annotations

import io

import pytest

from gradcheck.core.progress import PLAIN_EVERY_S, Progress, duration, in_ci, mode_for


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_mode_follows_the_terminal_and_the_ci_environment():
    assert mode_for(Tty(), {}) == "line"
    assert mode_for(io.StringIO(), {}) == "plain"  # a file or a pipe: a log
    assert mode_for(Tty(), {"CI": "true"}) == "plain"  # a CI system that fakes a terminal
    assert mode_for(Tty(), {"GITHUB_ACTIONS": "true"}) == "plain"
    assert mode_for(Tty(), {"CI": "false"}) == "line"
    assert mode_for(io.StringIO(), {"GRADCHECK_PROGRESS": "line"}) == "line"
    assert mode_for(Tty(), {"GRADCHECK_PROGRESS": "off"}) == "off"
    assert mode_for(Tty(), {"GRADCHECK_PROGRESS": "nonsense"}) == "line"  # ignored
    assert in_ci({"BUILDKITE": "1"}) and not in_ci({"CI": ""})


def test_on_a_terminal_one_line_is_rewritten_per_op_and_ended_once():
    out, clock = Tty(), Clock()
    p = Progress("gradcheck sweep", "ops", {"torch": 4, "jax": 2}, out=out, clock=clock,
                 environ={"COLUMNS": "200"})  # wide enough (xdist workers see 80 or 100)
    assert p.mode == "line"
    clock.now += 10
    p.done("torch", failed=True)
    assert out.getvalue() == ("\rgradcheck sweep: torch 1/4 ops, 1 failed, ~30 s left | "
                              "jax 0/2 ops, 0 failed, time left unknown\x1b[K")
    clock.now += 10
    p.done("jax")
    p.close()
    p.close()  # idempotent
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\x1b[K\n")
    assert "jax 1/2 ops, 0 failed, ~20 s left" in text  # its rate: one op in 20 s


def test_in_a_ci_log_a_plain_line_at_most_once_a_minute_and_one_at_the_end():
    out, clock = io.StringIO(), Clock()
    p = Progress("gradcheck run", "tests", {"numpy": 100}, out=out, clock=clock, environ={})
    assert p.mode == "plain"
    for _ in range(50):
        clock.now += 1
        p.done("numpy")
    assert out.getvalue() == ""  # 50 s: nothing yet
    for _ in range(20):
        clock.now += 1
        p.done("numpy")
    assert out.getvalue() == "gradcheck run: numpy 60/100 tests, 0 failed, ~40 s left\n"
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[-1].startswith("gradcheck run: numpy 70/100 tests")
    assert "\r" not in out.getvalue() and PLAIN_EVERY_S == 60


def test_ops_mode_names_each_op_and_off_prints_nothing():
    out = io.StringIO()
    p = Progress("sweep", "ops", {"jax": 2}, out=out, mode="ops")
    p.done("jax", False, "jax.nn.selu")
    p.done("jax", True, "jax.nn.soft_sign")
    assert out.getvalue().splitlines() == ["sweep jax [1/2] jax.nn.selu",
                                           "sweep jax [2/2] jax.nn.soft_sign: failed"]
    quiet = io.StringIO()
    p = Progress("sweep", "ops", {"jax": 2}, out=quiet, mode="off")
    p.done("jax")
    p.close()
    assert quiet.getvalue() == ""
    with pytest.raises(ValueError, match="choose from"):
        Progress("sweep", "ops", out=quiet, mode="loud")


def test_the_terminal_line_never_wraps(monkeypatch):
    import os
    import shutil

    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback: os.terminal_size((40, 24)))
    out = Tty()
    p = Progress("gradcheck sweep", "ops", {"torch": 9, "jax": 9, "autograd": 9}, out=out,
                 environ={})
    p.done("torch")
    line = out.getvalue().split("\r")[-1].replace("\x1b[K", "")
    assert len(line) < 40 and line.endswith("...")


def test_a_closed_terminal_stops_the_display_not_the_run():
    out = Tty()
    p = Progress("sweep", "ops", {"jax": 2}, out=out, environ={})
    out.close()
    p.done("jax")  # ValueError on a closed stream: swallowed, the display is off
    assert p.mode == "off"


def test_durations_are_coarse():
    assert [duration(s) for s in (0.2, 40, 200, 7200)] == ["~1 s", "~40 s", "~3 min", "~2.0 h"]
