"""The failing path confirmed by projected estimates (:mod:`gradcheck.numeric.projected_failure`):
a clear mutant is failed by it (and localized on a budget), its correct twin passes, a
borderline mutant and a function with a kink fall back to the full path unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import NumpyFunction
from gradcheck.numeric import bisection, projected_failure
from gradcheck.oracle.error_model import ErrorModel
from tests.numeric.test_bisection import torch_sin_wrong_at

N = 100_000
X = np.random.default_rng(5).standard_normal(N)
WRONG = (12_345, 67_890)  # elements whose VJP is wrong (set away from 0: not crossed)
X[list(WRONG)] = (1.5, -1.2)


def _sin(wrong: dict[int, float] | None = None, scale: float = 0.0) -> NumpyFunction:
    """``sin`` with its VJP scaled by ``1 + delta`` at the elements ``wrong`` and by
    ``1 + scale`` everywhere."""

    def vjp(a, c):
        g = c[0] * np.cos(a[0]) * (1 + scale)
        for e, d in (wrong or {}).items():
            g[..., e] *= 1 + d
        return [g]

    return NumpyFunction(np.sin, vjp, lambda a, t: [np.cos(a[0]) * t[0]], name="sin")


#: the default check, ``fast=True``, and ``fast=True`` with one probe (what torch's fast mode
#: checks, ``docs/cost-model.md``): each confirms a clear failure on the projected path; the
#: key of the screen's state in ``details``
CONFIGS = {"default": ({}, "screen"), "fast": ({"fast": True}, "fast_screen"),
           "fast, one probe": ({"fast": True, "probes": 1}, "fast_screen")}


def _vjp(report: gradcheck.Report) -> gradcheck.CheckResult:
    return next(r for r in report if r.kind == "vjp")


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_a_clear_mutant_is_confirmed_and_its_worst_elements_named_at_1e5(config: str) -> None:
    kwargs, key = CONFIGS[config]
    wrong = {WRONG[0]: 1e-3, WRONG[1]: 1e-4}
    r = _vjp(gradcheck.check(_sin(wrong), X, backend="numpy", modes="rev", **kwargs))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["failure_path"] == projected_failure.PATH
    assert r.details[key] == "failed: confirmed by projected estimates"
    assert "confirmed by projected estimates" in r.details["oracle"]
    # the message says what was compared, by how much, the allowance and its source, and
    # how to reproduce it
    assert "DISAGREES" in r.message and "allowed" in r.message and "ratio" in r.message
    assert r.allowed_source and "FD error" in r.allowed_source
    assert r.discrepancy is not None and r.allowed is not None
    assert r.discrepancy > projected_failure.DEFAULT_MARGIN * r.allowed
    assert r.reproducer
    # localized on a budget along the confirming direction: the wrong elements, worst first
    assert r.localized is not None and r.localized.startswith(bisection.PREFIX)
    assert [w.index for w in r.worst][:2] == [(WRONG[0],), (WRONG[1],)]
    for w in r.worst[:2]:
        assert w.actual == pytest.approx(w.expected * (1 + wrong[w.index[0]]), rel=1e-8)
        assert abs(w.actual - w.expected) > w.allowed


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_the_correct_twin_passes(config: str) -> None:
    r = _vjp(gradcheck.check(_sin(), X, backend="numpy", modes="rev", **CONFIGS[config][0]))
    assert r.status is gradcheck.Status.PASSED, r.message
    assert "failure_path" not in r.details


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_a_uniform_mutant_at_1e5_is_confirmed(config: str) -> None:
    r = _vjp(gradcheck.check(_sin(scale=1e-7), X, backend="numpy", modes="rev",
                             **CONFIGS[config][0]))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["failure_path"] == projected_failure.PATH
    assert r.relative_discrepancy == pytest.approx(1e-7, rel=1e-3)


def test_a_borderline_failure_falls_back_to_the_full_path() -> None:
    """A VJP off by a relative 5e-10 at n = 1e4: the screen's worst ratio is about 2, between
    1 and the margin, not clear; the full check judges it (as before this path existed)."""
    x = X[:10_000]
    report = gradcheck.check(_sin(scale=5e-10), x, backend="numpy", modes="rev")
    r = _vjp(report)
    assert "failure_path" not in r.details
    assert r.details["screen"].startswith("escalated: ")
    assert "not confirmed by projected estimates: not clear" in r.details["screen"]


def test_an_unreachable_margin_keeps_the_full_path() -> None:
    model = ErrorModel(projected_failure_margin=1e300)
    r = _vjp(gradcheck.check(_sin(scale=1e-6), X[:2000], backend="numpy", modes="rev",
                             error_model=model))
    assert r.status is gradcheck.Status.FAILED
    assert "failure_path" not in r.details
    assert "not clear" in r.details["screen"]


def _abs_wrong_at_100() -> NumpyFunction:
    """``|x|`` with its VJP ``1 + 1e-3`` off at element 100."""

    def vjp(a, c):
        g = c[0] * np.sign(a[0])
        g[..., 100] *= 1 + 1e-3
        return [g]

    return NumpyFunction(np.abs, vjp, lambda a, t: [np.sign(a[0]) * t[0]], name="abs")


def _near_zero_at_7(value: float) -> np.ndarray:
    x = X[:2000].copy()
    x[7] = value
    return x


def test_a_function_near_its_kink_is_split_and_its_failure_confirmed_on_the_rest() -> None:
    """``|x|`` with an element at 1e-6 (the screen's steps see the kink) and a wrong VJP
    elsewhere: the screen's split estimates that element apart at steps below 1e-6
    (:mod:`gradcheck.numeric.screen_split`), and the failure among the other elements is
    confirmed by projected estimates on them alone, its element named."""
    r = _vjp(gradcheck.check(_abs_wrong_at_100(), _near_zero_at_7(1e-6), backend="numpy",
                             modes="rev"))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["failure_path"] == projected_failure.PATH
    assert "kink" in r.details["screen_split"]
    assert r.worst[0].index == (100,)


def test_a_kink_at_every_step_is_left_out_and_the_rest_decided() -> None:
    """``|x|`` with an element at 1e-30, below every step of the split: its kink shows at
    every level, so the split has no estimate for it; the check leaves the kink out
    (:mod:`gradcheck.numeric.kinks`) and fails the wrong VJP among the rest."""
    r = _vjp(gradcheck.check(_abs_wrong_at_100(), _near_zero_at_7(1e-30), backend="numpy",
                             modes="rev"))
    assert r.status is gradcheck.Status.FAILED
    assert "input 0[7]" in r.details["kinks"]
    assert r.worst[0].index == (100,)


def test_explicit_tolerances_keep_the_full_path() -> None:
    r = _vjp(gradcheck.check(_sin(scale=1e-6), X[:2000], backend="numpy", modes="rev",
                             rtol=1e-9, atol=0.0))
    assert r.status is gradcheck.Status.FAILED
    assert "failure_path" not in r.details


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_two_wrong_elements_are_named_at_1e6_with_torch(config: str) -> None:
    """The default model at n = 1e6 on torch: a ``sin`` whose backward is wrong at two
    elements is failed by the projected path, and both are named, worst first."""
    torch = pytest.importorskip("torch")
    n = 10**6
    bad = {n // 3: 1e-3, n - 7: 1e-4}

    x = np.random.default_rng(0).standard_normal(n)
    x[list(bad)] = (0.7, -1.3)  # not crossed by the screen's steps
    r = _vjp(gradcheck.check(torch_sin_wrong_at(torch, bad), x, backend="torch",
                             modes=("rev",), **CONFIGS[config][0]))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["failure_path"] == projected_failure.PATH
    assert r.localized is not None and r.localized.startswith(bisection.PREFIX)
    assert [w.index for w in r.worst][:2] == [(n // 3,), (n - 7,)]
