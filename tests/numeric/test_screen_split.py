"""The screen's split (:mod:`gradcheck.numeric.screen_split`): a correct function whose
elements near a pole spoil the screen's one table passes without the full oracle; a VJP
wrong at an ordinary element is failed (confirmed on the settled elements, the element
named), one wrong at the element nearest the pole is not passed, and a kink at every step
leaves the split; the estimator's parts agree with the screen's own arithmetic.

``tan`` at Gaussian points: about one point in ten lies within ``0.1`` of a pole, where the
screen's steps do not converge; the closest of ``N`` lies about ``2 / N`` from one.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import NumpyFunction
from gradcheck.numeric import projected_failure
from gradcheck.oracle import fd

N = 4000
X = np.random.default_rng(11).standard_normal(N)
NEAR = int(np.argmin(np.abs(np.abs(X) - np.pi / 2)))  # the element nearest a pole
ORDINARY = int(np.argmin(np.abs(X - 0.3)))


def _tan(wrong: dict[int, float] | None = None, scale: float = 0.0) -> NumpyFunction:
    """``tan`` with its VJP scaled by ``1 + delta`` at the elements ``wrong`` and by
    ``1 + scale`` everywhere (its JVP exact)."""

    def vjp(a, c):
        g = c[0] * (1 + np.tan(a[0]) ** 2) * (1 + scale)
        for e, d in (wrong or {}).items():
            g[..., e] *= 1 + d
        return [g]

    return NumpyFunction(np.tan, vjp, lambda a, t: [(1 + np.tan(a[0]) ** 2) * t[0]],
                         name="tan")


def _first_order(report: gradcheck.Report) -> list[gradcheck.CheckResult]:
    return [r for r in report if r.kind in ("vjp", "jvp")]


def test_the_element_nearest_a_pole_is_close() -> None:
    """The premise: the screen's steps (about 4e-3) cross the pole next to ``NEAR``."""
    assert abs(abs(X[NEAR]) - np.pi / 2) < 1e-3


@pytest.mark.parametrize("fast", [False, True])
def test_correct_tan_passes_by_the_split(fast: bool) -> None:
    report = gradcheck.check(_tan(), X, backend="numpy", fast=fast)
    assert report.passed, gradcheck.format_failure(report)
    key = "fast_screen" if fast else "screen"
    for r in _first_order(report):
        assert r.details[key] == "passed"
        note = r.details["screen_split"]
        assert "kink" in note and "level 1" in note
        # the split's evaluations after the screen's 8: level 0 and at least one deeper level
        assert r.details["fd_evaluations"] >= 8 + 16
    vjp = next(r for r in report if r.kind == "vjp")
    assert vjp.probes == 6  # P cotangents on the settled elements, P on the others


def test_a_wrong_vjp_at_an_ordinary_element_is_confirmed_and_named() -> None:
    r = next(r for r in gradcheck.check(_tan({ORDINARY: 1e-6}), X, backend="numpy",
                                        modes="rev") if r.kind == "vjp")
    assert r.status is gradcheck.Status.FAILED
    assert r.details["failure_path"] == projected_failure.PATH
    assert "screen_split" in r.details
    assert r.worst[0].index == (ORDINARY,)


def test_a_wrong_vjp_at_the_element_nearest_the_pole_is_not_passed() -> None:
    """The split judges the elements below the screen's steps apart (its own floor, its
    own terms): a 1e-6 error there fails it, and the full check reports it."""
    r = next(r for r in gradcheck.check(_tan({NEAR: 1e-6}), X, backend="numpy",
                                        modes="rev") if r.kind == "vjp")
    assert r.status is gradcheck.Status.FAILED
    assert "screen_split" not in r.details
    assert "split (" in r.details["screen"]
    assert r.worst[0].index == (NEAR,)


def test_a_wrong_vjp_everywhere_is_confirmed() -> None:
    r = next(r for r in gradcheck.check(_tan(scale=1e-7), X, backend="numpy", modes="rev")
             if r.kind == "vjp")
    assert r.status is gradcheck.Status.FAILED
    assert r.details["failure_path"] == projected_failure.PATH


def test_two_inputs_and_two_outputs_split_together() -> None:
    """``(tan(x) y, x + y)``: the troubled outputs are the same for both inputs' groups;
    every comparison passes by the split."""

    def fn(x, y):
        return np.tan(x) * y, x + y

    def vjp(a, c):
        x, y = a
        return [c[0] * (1 + np.tan(x) ** 2) * y + c[1], c[0] * np.tan(x) + c[1]]

    def jvp(a, t):
        x, y = a
        return [(1 + np.tan(x) ** 2) * y * t[0] + np.tan(x) * t[1], t[0] + t[1]]

    y = np.random.default_rng(12).standard_normal(N)
    report = gradcheck.check(NumpyFunction(fn, vjp, jvp, name="tan_xy"), X, y,
                             backend="numpy")
    assert report.passed, gradcheck.format_failure(report)
    assert all("screen_split" in r.details for r in _first_order(report))


def test_the_projections_of_kept_tables_are_the_screens() -> None:
    """:func:`fd.reprojected` gives the screen's own estimate on other cotangents, and the
    elements kept by ``keep`` carry the same per-element estimates as the full tables."""
    rng = np.random.default_rng(3)
    u = rng.standard_normal((1, N))
    W = rng.standard_normal((1, 3, N))
    f0 = np.tan(X)
    full = fd.projected_derivatives(np.tan, X, u, W[:, :1], f0=f0, elements=True,
                                    tables=True)
    direct = fd.projected_derivatives(np.tan, X, u, W, f0=f0)
    again = fd.reprojected(full, W, f0)
    for name in ("value", "error", "magnitude", "jump", "jump_bound"):
        np.testing.assert_allclose(getattr(again, name), getattr(direct, name), rtol=1e-9,
                                   err_msg=name)
    keep = np.array([NEAR, ORDINARY, 5])
    part = fd.projected_derivatives(np.tan, X, u, W[:, :1], f0=f0, elements=True,
                                    tables=True, keep=keep)
    assert part.element_value is not None and full.element_value is not None
    np.testing.assert_array_equal(part.element_value[0], full.element_value[0, keep])
    np.testing.assert_array_equal(fd.element_kinks(part, f0)[0],
                                  fd.element_kinks(full, f0)[0, keep])


def test_element_kinks_flag_a_kink_and_not_a_smooth_element() -> None:
    x = np.array([1e-4, 0.7, -1.3])
    u = np.array([[1.0, 1.0, 1.0]])
    est = fd.projected_derivatives(np.abs, x, u, np.ones((1, 1, 3)), f0=np.abs(x),
                                   elements=True, tables=True)
    assert fd.element_kinks(est, np.abs(x))[0].tolist() == [True, False, False]


def _richardson_by_argmin(d: np.ndarray, rounding: np.ndarray, base: float, ahead: bool
                          ) -> tuple[np.ndarray, np.ndarray]:
    """The candidates' choice written as one argmin over every candidate (the reference
    the row-by-row choice of :func:`fd._richardson` must equal)."""
    P, K, m = d.shape
    vals, errs = [], []
    prev, amp = d, 1.0
    for j in range(1, K):
        w = base**j - 1.0
        cur = prev[:, 1:] + (prev[:, 1:] - prev[:, :-1]) / w
        amp *= (base**j + 1.0) / w
        prev_col, prev = prev[:, 1:], cur
        if cur.shape[1] < 2:
            break
        trunc = np.abs(cur - prev_col)
        stab = np.abs(np.diff(cur, axis=1))
        trunc[:, 1:] = np.maximum(trunc[:, 1:], stab)
        trunc[:, 0] = np.maximum(trunc[:, 0], stab[:, 0])
        if ahead and cur.shape[1] > 2:
            trunc[:, :-1] = np.maximum(trunc[:, :-1], fd._ahead(cur, amp * rounding[:, j:]))
        err = trunc + amp * rounding[:, j:]
        vals.append(cur)
        errs.append(np.where(np.isnan(err), np.inf, err))
    v, e = np.concatenate(vals, axis=1), np.concatenate(errs, axis=1)
    pick = np.argmin(e, axis=1)[:, None, :]
    best_e = np.take_along_axis(e, pick, axis=1)[:, 0]
    best_v = np.where(np.isfinite(best_e), np.take_along_axis(v, pick, axis=1)[:, 0], np.nan)
    return best_v, best_e


@pytest.mark.parametrize("shape", [(1, 4, 3000), (3, 7, 2000), (2, 3, 500)])
@pytest.mark.parametrize("ahead", [False, True])
def test_richardson_keeps_the_first_smallest_error(shape: tuple[int, int, int],
                                                   ahead: bool) -> None:
    rng = np.random.default_rng(4)
    d = rng.standard_normal(shape) * rng.choice([1.0, 1e-8, 1e8], size=shape)
    d[rng.random(shape) < 0.02] = np.nan
    d[rng.random(shape) < 0.01] = np.inf
    d[:, :, :50] = 1.0  # ties: every candidate equal
    rounding = np.abs(rng.standard_normal(shape)) * 1e-12
    with np.errstate(all="ignore"):
        got = fd._richardson(d.copy(), rounding, 4.0, ahead=ahead)
        want = _richardson_by_argmin(d, rounding, 4.0, ahead)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0])
