"""NumPy's huge-page hint is off while a check runs and restored after
(:mod:`gradcheck.numeric.pages`); a user's own setting is left alone; no value changes."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gradcheck
from gradcheck import NumpyFunction
from gradcheck.numeric import pages

pytestmark = pytest.mark.skipif(pages._switch() is None, reason="this NumPy has no hint switch")


def _hint() -> bool:
    from numpy._core import multiarray

    return bool(multiarray._get_madvise_hugepage())


def _watching(seen: list[bool], fail: bool = False) -> NumpyFunction:
    """``sin``, recording the hint each time it is evaluated (raising at the point: ``fail``)."""

    def f(a: np.ndarray) -> np.ndarray:
        seen.append(_hint())
        if fail:
            raise RuntimeError("the function raised")
        return np.sin(a)

    return NumpyFunction(f, lambda a, c: [c[0] * np.cos(a[0])], name="sin")


@pytest.mark.parametrize("before", [True, False])
def test_the_hint_is_off_during_a_check_and_restored_after(before: bool,
                                                           monkeypatch) -> None:
    monkeypatch.delenv(pages.ENVIRONMENT, raising=False)
    switch = pages._switch()
    assert switch is not None
    previous = switch(before)
    try:
        seen: list[bool] = []
        report = gradcheck.check(_watching(seen), np.linspace(-1, 1, 50), backend="numpy")
        assert report.passed
        assert seen and not any(seen)  # every evaluation ran with the hint off
        assert _hint() is before
        # restored after a check whose function raises, too
        gradcheck.check(_watching(seen, fail=True), np.linspace(-1, 1, 50), backend="numpy")
        assert _hint() is before
    finally:
        switch(previous)


def test_a_users_own_setting_is_left_alone(monkeypatch) -> None:
    monkeypatch.setenv(pages.ENVIRONMENT, "1")
    switch = pages._switch()
    assert switch is not None
    previous = switch(True)
    try:
        seen: list[bool] = []
        gradcheck.check(_watching(seen), np.linspace(-1, 1, 50), backend="numpy")
        assert seen and all(seen)
    finally:
        switch(previous)


def test_overlapping_checks_on_threads_restore_the_setting_once(monkeypatch) -> None:
    monkeypatch.delenv(pages.ENVIRONMENT, raising=False)
    switch = pages._switch()
    assert switch is not None
    previous = switch(True)
    inside = threading.Barrier(2)
    states: list[bool] = []

    def hold() -> None:
        with pages.small_pages():
            inside.wait(timeout=10)  # both inside at once
            states.append(_hint())
            inside.wait(timeout=10)

    try:
        threads = [threading.Thread(target=hold) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=20)
        assert states == [False, False]
        assert _hint() is True
    finally:
        switch(previous)


def test_the_hint_changes_no_value(monkeypatch) -> None:
    """The same check with NumPy's hint left as it is (the user's variable set) and with it
    off: the same compared values, allowances and verdicts, bit for bit."""
    x = np.random.default_rng(3).standard_normal(600_000)  # arrays above NumPy's 4 MB

    def run(seen: list[bool]) -> list[tuple]:
        report = gradcheck.check(_watching(seen), x, backend="numpy", modes="rev")
        return [(r.kind, r.status, r.actual, r.expected, r.allowed) for r in report]

    switch = pages._switch()
    assert switch is not None
    previous = switch(True)
    try:
        monkeypatch.delenv(pages.ENVIRONMENT, raising=False)
        seen_off: list[bool] = []
        off = run(seen_off)
        monkeypatch.setenv(pages.ENVIRONMENT, "1")
        seen_on: list[bool] = []
        as_is = run(seen_on)
    finally:
        switch(previous)
    # the two runs did differ in the hint, and in nothing they compute
    assert seen_off and not any(seen_off) and seen_on and all(seen_on)
    assert off == as_is
    assert all(row[1] is gradcheck.Status.PASSED for row in off)
