"""The finite-difference oracle (gradcheck.oracle.fd): accuracy, error estimates, kinks, retries,
batching.

Accuracy and coverage are measured on ``benchmarks/smooth_cases.py`` (smooth float64 functions
with hand-written exact directional derivatives); ``benchmarks/oracle_accuracy.py`` prints the
same figures next to torch's fixed-step scheme and ``scipy.differentiate``.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from benchmarks.smooth_cases import catalog, relative_error
from gradcheck.oracle import fd
from gradcheck.oracle.jacobian import fd_jacobian

EPS = float(np.finfo(np.float64).eps)


def _estimate(case):
    est = fd.directional_derivatives(case.f, case.x, case.u[None])
    return est, case.jvp(est.directions[0])


@pytest.fixture(scope="module")
def measured():
    rows = []
    for case in catalog():
        est, exact = _estimate(case)
        value, err = est.value[0], est.error[0]
        slack = 4 * EPS * np.abs(exact)  # the exact derivative is itself rounded to float64
        rows.append((relative_error(value, exact),
                     bool(np.all(np.abs(value - exact) <= err + slack)),
                     bool(np.all(np.abs(value - exact) <= 10 * err + slack))))
    return np.array(rows)


def test_catalog_is_large_enough(measured):
    assert len(measured) >= 100


def test_accuracy_median_and_p99(measured):
    rel = measured[:, 0]
    assert np.median(rel) <= 1e-11
    assert np.percentile(rel, 99) <= 1e-9


def test_error_estimate_covers_the_true_error(measured):
    # inflated as the tolerance uses it; the raw estimate is reported by the benchmark
    assert measured[:, 2].mean() >= 0.99
    assert measured[:, 1].mean() >= 0.9


@pytest.mark.parametrize("f,df,x", [
    (np.sin, np.cos, 0.7),
    (np.exp, np.exp, 3.0),
    (lambda t: t**3, lambda t: 3 * t**2, -2.0),
    (np.arctan, lambda t: 1 / (1 + t * t), 12.0),
])
def test_scalar_derivatives(f, df, x):
    est = fd.directional_derivatives(lambda X: f(X), np.array([x]), np.array([[1.0]]))
    assert est.value[0, 0] == pytest.approx(df(x), rel=1e-12)
    assert abs(est.value[0, 0] - df(x)) <= 10 * est.error[0, 0] + 4 * EPS * abs(df(x))
    assert not est.kink.any()


@pytest.mark.parametrize("name,f,x,u", [
    ("relu at 0", lambda X: np.maximum(X, 0.0), np.array([0.0, 1.0]), np.array([1.0, 0.5])),
    ("abs at 0", lambda X: np.abs(X), np.array([0.0]), np.array([1.0])),
    ("max with a tie", lambda X: np.max(X, axis=1, keepdims=True), np.array([1.0, 1.0]),
     np.array([1.0, -1.0])),
])
def test_kinks_are_detected(name, f, x, u):
    est = fd.directional_derivatives(f, x, u[None])
    assert est.kink.any(), name
    p, e = np.argwhere(est.kink)[0]
    assert abs(est.left[p, e] - est.right[p, e]) > 0.5


@pytest.mark.parametrize("f,x", [
    (lambda X: np.abs(X), np.array([0.3, -2.0])),  # away from the kink
    (lambda X: np.maximum(X, 0.0), np.array([1e-3, -1e-3])),  # close to it: steps cross it
    (np.sin, np.zeros(3)),
    (lambda X: np.sum(X**2, axis=1, keepdims=True), np.array([1.0, -1.0])),
])
def test_smooth_points_are_not_kinks(f, x):
    est = fd.directional_derivatives(f, x, np.ones((2, x.size)))
    assert not est.kink.any()


def test_kink_gives_an_inconclusive_check_not_a_failure():
    relu = gradcheck.NumpyFunction(lambda x: np.maximum(x, 0.0),
                                   lambda a, c: (c[0] * (a[0] > 0),), name="relu")
    # every element at the kink: none left to decide on (with other elements the kinks are
    # left out and the rest decided: tests/acceptance/test_day_one_edge.py)
    report = gradcheck.check(relu, np.zeros(3), backend="numpy", modes=("rev",))
    assert not report.failures and not report.passed  # nothing decided is not a pass
    (r,) = [r for r in report if r.kind == "vjp"]
    assert r.status is gradcheck.Status.INCONCLUSIVE
    assert "not differentiable" in r.message and "left derivative" in r.message


def test_retry_with_smaller_steps_when_the_domain_is_left():
    x = np.array([1e-4, 2e-3, 3.0])  # the first steps (1/8) leave log's domain
    est = fd.directional_derivatives(lambda X: np.log(X), x, np.ones((1, 3)))
    assert np.all(np.isfinite(est.value))
    assert est.value[0] == pytest.approx(1 / x, rel=1e-9)
    assert est.evaluations > 1 + 6 + 2 * fd.DEFAULT_LEVELS  # more than one attempt
    assert est.steps.shape[1] > fd.DEFAULT_LEVELS  # every attempt's steps are recorded


def test_closer_to_the_domain_edge_the_estimate_says_it_is_poor():
    # 1e-6 next to 3.0: the smallest retry steps barely fit; the value is off by 4e-7
    # relative and the error estimate says so (it is what widens the allowance)
    x = np.array([1e-6, 3.0])
    est = fd.directional_derivatives(lambda X: np.log(X), x, np.ones((1, 2)))
    assert np.all(np.abs(est.value[0] - 1 / x) <= est.error[0])
    assert est.error[0, 0] > 1e-9 * 1e6


def test_retry_when_large_steps_cross_a_pole():
    x = np.array([2e-4, -5e-4])
    est = fd.directional_derivatives(lambda X: 1 / X, x, np.ones((1, 2)))
    assert est.value[0] == pytest.approx(-1 / x**2, rel=1e-8)


def test_steps_are_exact():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(50) * 10
    est = fd.directional_derivatives(np.sin, x, rng.standard_normal((2, 50)))
    binade = np.floor(np.log2(np.abs(x)))
    checked = 0
    for p in range(2):
        for h in est.steps[p]:
            d = h * est.directions[p]
            # wherever x +- d stays in the binade of x, x +- h u is computed exactly
            same = (np.floor(np.log2(np.abs(x + d))) == binade) & (
                np.floor(np.log2(np.abs(x - d))) == binade)
            assert np.array_equal(((x + d) - x)[same], d[same])
            assert np.array_equal((x - (x - d))[same], d[same])
            checked += same.sum()
    assert checked > 0.8 * est.steps.size * 50


def test_rounded_directions_stay_close_to_the_requested_ones():
    rng = np.random.default_rng(5)
    x, u = rng.standard_normal(20) * 100, rng.standard_normal((3, 20))
    est = fd.directional_derivatives(np.sin, x, u)
    assert np.allclose(est.directions, u, rtol=1e-6, atol=0)


def test_noise_is_measured_and_widens_the_error_estimate():
    rng = np.random.default_rng(1)

    def noisy(X):  # smooth plus evaluation noise of 1e-9 (a million ulps)
        return np.sin(X) + 1e-9 * rng.standard_normal(X.shape)

    x = np.linspace(-1, 1, 5)
    est = fd.directional_derivatives(noisy, x, np.ones((1, 5)))
    assert np.all(est.noise > 1e-10)
    assert np.all(np.abs(est.value[0] - np.cos(x)) <= 10 * est.error[0])
    quiet = fd.directional_derivatives(np.sin, x, np.ones((1, 5)))
    assert np.all(quiet.noise < 1e-14)


def test_evaluations_are_batched():
    calls = []

    def f(X):
        calls.append(X.shape)
        return np.tanh(X)

    x = np.linspace(-1, 1, 4)
    est = fd.directional_derivatives(f, x, np.eye(4)[:3])
    assert all(len(shape) == 2 and shape[1] == 4 for shape in calls)
    assert len(calls) == 2  # f(x), then the noise points and the table in one batched call
    assert sum(shape[0] for shape in calls) == est.evaluations
    # every direction, noise point and step at once
    assert calls[1][0] == 3 * (6 + 2 * fd.DEFAULT_LEVELS)


def test_jacobian_is_batched_and_accurate():
    A = np.random.default_rng(2).standard_normal((3, 5))
    calls = []

    def f(X):
        calls.append(len(X))
        return np.sin(X @ A.T)

    x = np.random.default_rng(3).standard_normal(5)
    est = fd_jacobian(f, x)  # the "table" method: no pattern
    J, E = est.value, est.error
    exact = np.cos(A @ x)[:, None] * A
    assert J.shape == (3, 5) and E.shape == (3, 5)
    assert np.allclose(J, exact, rtol=1e-10, atol=1e-12)
    assert np.all(np.abs(J - exact) <= 10 * E + 1e-15)
    assert len(calls) <= 3 + 2  # f(x), noise, one table (+ retries at most)


def test_levels_below_three_are_rejected():
    with pytest.raises(ValueError, match="levels"):
        fd.directional_derivatives(np.sin, np.zeros(2), np.ones((1, 2)), levels=2)


def test_projected_magnitudes_are_the_sums_of_abs_projections_times_abs_values():
    """The projected estimate does not hold ``|W|`` whole: each row's ``|w| . |a|`` is made in
    one work array (``fd.abs_dot``); the same sums as the whole ``|W| @ |a|``, to the rounding
    of a sum (the order of a dot product's additions)."""
    rng = np.random.default_rng(5)
    x, u = rng.standard_normal(300), rng.standard_normal((1, 300))
    W = rng.standard_normal((1, 3, 300))

    def f(X):
        return np.sin(X) * 2.0 + X ** 3

    f0 = f(x[None])[0]
    est = fd.projected_derivatives(f, x, u, W, f0=f0)
    h = est.steps[0, -1]
    d = np.abs(f(x[None] + h * est.directions[0])[0] - f(x[None] - h * est.directions[0])[0])
    whole = np.abs(W[0]) @ d / (2 * h)
    assert np.allclose(est.magnitude[0], whole, rtol=1e-14, atol=0)
    assert np.all(est.magnitude > 0)
    work: list[np.ndarray] = []
    rows = [fd.abs_dot(w, np.abs(f0), work) for w in W[0]]
    assert len(work) == 1  # one work array served every row
    assert np.allclose(rows, np.abs(W[0]) @ np.abs(f0), rtol=1e-14, atol=0)
