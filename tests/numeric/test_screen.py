"""The fast screen (``gradcheck.check(fast=True)``): it passes correct derivatives on its own,
never passes a mutant the full check fails on these functions, and hands everything it cannot
vouch for (kinks, ill-converged estimates, low precision, disagreements) to the full check.

The functions are NumPy ones with hand-written derivatives (no engine needed); the mutants scale
the reverse mode by ``1 + delta`` or break one element of it.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import NumpyFunction
from gradcheck.numeric import projected_failure
from gradcheck.oracle import fd
from gradcheck.oracle.error_model import DEFAULT_MODEL

N = 400
X = np.random.default_rng(7).standard_normal(N)
W = np.random.default_rng(8).standard_normal((32, N)) / np.sqrt(N)


def _chain(delta: float = 0.0, element: int | None = None) -> NumpyFunction:
    """``sin(x) exp(-x^2) + tanh(x)^2`` elementwise; the VJP scaled by ``1 + delta`` (all
    elements, or only ``element``)."""

    def d(x):
        t = np.tanh(x)
        return (np.cos(x) - 2 * x * np.sin(x)) * np.exp(-x * x) + 2 * t * (1 - t * t)

    def vjp(a, c):
        g = c[0] * d(a[0])
        if element is None:
            g = g * (1 + delta)
        else:
            g = g.copy()
            g[element] *= 1 + delta
        return [g]

    return NumpyFunction(lambda x: np.sin(x) * np.exp(-x * x) + np.tanh(x) ** 2, vjp,
                         lambda a, t: [d(a[0]) * t[0]], name="chain")


def _layer(delta: float = 0.0) -> NumpyFunction:
    def vjp(a, c):
        s = 1 - np.tanh(W @ a[0]) ** 2
        return [(W.T @ (c[0] * s)) * (1 + delta)]

    return NumpyFunction(lambda x: np.tanh(W @ x), vjp,
                         lambda a, t: [(1 - np.tanh(W @ a[0]) ** 2) * (W @ t[0])], name="layer")


def _logsumexp(delta: float = 0.0) -> NumpyFunction:
    def f(x):
        mx = np.max(x)
        return np.log(np.sum(np.exp(x - mx))) + mx

    def vjp(a, c):
        p = np.exp(a[0] - f(a[0]))
        return [c[0] * p * (1 + delta)]

    return NumpyFunction(f, vjp, lambda a, t: [np.exp(a[0] - f(a[0])) @ t[0]], name="lse")


FUNCTIONS = {"chain": _chain, "layer": _layer, "logsumexp": _logsumexp}


def _screen_states(report: gradcheck.Report) -> set[str]:
    return {r.details.get("fast_screen", "") for r in report if r.kind in ("vjp", "jvp")}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_correct_derivatives_pass_the_screen_on_its_own(name: str) -> None:
    report = gradcheck.check(FUNCTIONS[name](), X, backend="numpy", fast=True)
    assert report.passed, gradcheck.format_failure(report)
    assert _screen_states(report) == {"passed"}, [r.message for r in report]
    kinds = {r.kind for r in report}
    assert kinds == {"vjp", "jvp"}  # the full check's extra comparisons did not run
    r = next(r for r in report if r.kind == "vjp")
    assert "fast screen" in r.message and r.allowed_source.endswith("(fast screen)")
    assert len(r.convergence) == fd.SCREEN_LEVELS
    assert "fast=True" in r.reproducer


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("delta", [1e-3, 1e-7])
def test_scaled_mutants_are_caught_and_localized(name: str, delta: float) -> None:
    report = gradcheck.check(FUNCTIONS[name](delta), X, backend="numpy", modes="rev",
                             fast=True)
    assert not report.passed
    vjp = next(r for r in report if r.kind == "vjp")
    assert vjp.status is gradcheck.Status.FAILED
    # the screen saw the disagreement itself (not a convergence problem), clear enough to be
    # confirmed by projected estimates (docs/error-model.md 2c), as in the default check,
    # without the full oracle; the confirming estimate localizes it
    assert vjp.details["fast_screen"] == "failed: confirmed by projected estimates"
    assert vjp.details["failure_path"] == projected_failure.PATH
    assert vjp.worst, "the failure is localized"


def test_one_wrong_element_is_caught_and_localized() -> None:
    report = gradcheck.check(_chain(1e-5, element=123), X, backend="numpy", modes="rev",
                             fast=True)
    vjp = next(r for r in report if r.kind == "vjp")
    assert vjp.status is gradcheck.Status.FAILED
    # confirmed by projected estimates and localized on a budget along the confirming
    # direction (more output elements than the bisection's budget of rows): named by its
    # output element, as the default check names it
    assert vjp.details["failure_path"] == projected_failure.PATH
    assert vjp.worst[0].index == (123,)


def test_verdicts_match_the_full_check_on_the_mutant_suite() -> None:
    """The screen only passes: on every mutant and correct op of the mutant suite, the fast
    run's VJP/JVP verdicts are the full check's."""
    from tests.support.mutants import MUTANTS, OP_OF, mutant_inputs, numpy_op

    for mutant in (None, *MUTANTS):
        op = OP_OF.get(mutant or "", "sinmul")
        fn = numpy_op(op, mutant)
        full = gradcheck.check(fn, *mutant_inputs(op), backend="numpy", seed=3)
        fast = gradcheck.check(fn, *mutant_inputs(op), backend="numpy", seed=3, fast=True)

        def verdicts(rep: gradcheck.Report) -> dict:
            return {(r.kind, r.input_index): r.status for r in rep if r.kind in ("vjp", "jvp")}

        assert verdicts(fast) == verdicts(full), mutant


def test_a_kink_goes_to_the_full_check() -> None:
    """``|x|`` at a zero element: the central difference (0) equals what the rule returns
    (sign(0) = 0), so only the kink test stops the screen from passing it."""
    x = np.zeros_like(X)  # at the kink everywhere (a kink among other elements is left out
    # and the rest decided: gradcheck/numeric/kinks.py)
    f = NumpyFunction(np.abs, lambda a, c: [c[0] * np.sign(a[0])], name="abs")
    report = gradcheck.check(f, x, backend="numpy", modes="rev", fast=True)
    vjp = next(r for r in report if r.kind == "vjp")
    assert "kink" in vjp.details["fast_screen"]
    assert vjp.status is gradcheck.Status.INCONCLUSIVE


def test_low_precision_goes_to_the_full_check() -> None:
    report = gradcheck.check(_chain(), X.astype(np.float32), backend="numpy", fast=True)
    assert report.passed, gradcheck.format_failure(report)
    assert all("covers float64" in s for s in _screen_states(report))
    assert "rounding" in {r.kind for r in report}


def test_an_unconverged_estimate_goes_to_the_split() -> None:
    """``sin(20 x)``: the screen's steps are too large for 4 levels to converge to its floor,
    so it does not pass on its own; its split (the elements that do not converge estimated
    at smaller steps, :mod:`gradcheck.numeric.screen_split`) does, and says why it ran."""
    f = NumpyFunction(lambda x: np.sin(20 * x), lambda a, c: [20 * c[0] * np.cos(20 * a[0])],
                      name="fast_sine")
    report = gradcheck.check(f, X, backend="numpy", modes="rev", fast=True)
    assert report.passed, gradcheck.format_failure(report)
    assert _screen_states(report) == {"passed"}
    assert all("error estimate" in r.details["screen_split"] for r in report
               if r.kind in ("vjp", "jvp"))


def test_a_noisy_evaluation_goes_to_the_full_check() -> None:
    """``sin`` evaluated in float32: the float64 screen cannot trust its differences; the full
    oracle measures the noise and does not fail the (correct) rule (it abstains: a report
    that decided nothing, not a pass)."""
    f = NumpyFunction(lambda x: np.sin(x.astype(np.float32)).astype(np.float64),
                      lambda a, c: [c[0] * np.cos(a[0])], name="sin32")
    report = gradcheck.check(f, X, backend="numpy", modes="rev", fast=True)
    assert not report.failures, gradcheck.format_failure(report)
    assert all("kinks" not in r.details for r in report.results)  # its noise is no kink
    assert all(s.startswith("escalated") for s in _screen_states(report))


def test_projected_estimate_is_accurate_and_its_error_covers_the_truth() -> None:
    rng = np.random.default_rng(0)
    u = rng.standard_normal((3, N))
    v = rng.standard_normal((3, 1, N))
    f = _chain()
    est = fd.projected_derivatives(lambda Z: np.stack([f(z) for z in Z]), X, u, v, f0=f(X))
    assert est.evaluations == 3 * 2 * fd.SCREEN_LEVELS
    assert not np.any(est.kink)
    # the estimate is along the rounded directions: project the exact derivative on those
    exact = np.array([v[p, 0] @ (f.jvp([X], [est.directions[p]])[0]) for p in range(3)])
    err = np.abs(est.value[:, 0] - exact)
    assert np.all(err <= 10 * est.error[:, 0]), (err, est.error[:, 0])
    assert np.all(est.error[:, 0] <= DEFAULT_MODEL.screen_floor * est.magnitude[:, 0])


def test_projected_estimate_flags_a_kink_and_not_a_smooth_point() -> None:
    x = np.array([0.0, 1.0, -2.0])
    u = np.array([[1.0, 0.5, 0.25]])
    w = np.ones((1, 1, 3))
    relu = fd.projected_derivatives(lambda Z: np.maximum(Z, 0), x, u, w, f0=np.maximum(x, 0))
    assert relu.kink.all()
    smooth = fd.projected_derivatives(lambda Z: np.exp(Z), x, u, w, f0=np.exp(x))
    assert not smooth.kink.any()


def _two_by_two(delta: float = 0.0) -> NumpyFunction:
    """``(sin(a) b, sum(a b))`` with an integer index input passed through."""

    def vjp(args, cts):
        a, b, _ = args
        ga = cts[0] * np.cos(a) * b + cts[1] * b
        gb = cts[0] * np.sin(a) + cts[1] * a
        return [ga * (1 + delta), gb, None]

    def jvp(args, tans):
        a, b, _ = args
        ta, tb = tans[0], tans[1]
        return [np.cos(a) * b * ta + np.sin(a) * tb, np.sum(b * ta + a * tb)]

    return NumpyFunction(lambda a, b, k: (np.sin(a) * b, np.sum(a * b)), vjp, jvp, name="two")


def test_several_inputs_and_outputs_are_screened_pair_by_pair() -> None:
    args = (X, X[::-1].copy(), np.arange(N))
    report = gradcheck.check(_two_by_two(), *args, backend="numpy", fast=True)
    assert report.passed, gradcheck.format_failure(report)
    pairs = {(r.kind, r.output_index, r.input_index) for r in report}
    assert pairs == {(k, i, j) for k in ("vjp", "jvp") for i in (0, 1) for j in (0, 1)}
    assert _screen_states(report) == {"passed"}
    bad = gradcheck.check(_two_by_two(1e-7), *args, backend="numpy", fast=True)
    failed = {(r.kind, r.output_index, r.input_index) for r in bad.failures}
    # input 0's gradient is wrong, seen from both outputs by the VJP check and confirmed by
    # projected estimates (fast=True leaves out the comparisons of two AD values: the default
    # check's forward-vs-reverse comparison fails it too)
    assert failed == {("vjp", i, 0) for i in (0, 1)}
    assert all(r.details["failure_path"] == projected_failure.PATH for r in bad.failures)
    full = gradcheck.check(_two_by_two(1e-7), *args, backend="numpy")
    assert ({(r.kind, r.output_index, r.input_index) for r in full.failures}
            == {(k, i, 0) for k in ("vjp", "fwd_rev") for i in (0, 1)})


def test_an_adapter_error_is_reported_by_the_full_check() -> None:
    wrong = NumpyFunction(lambda a: 2 * a, lambda a, c: [np.zeros(3)], name="wrong_shape")
    report = gradcheck.check(wrong, X, backend="numpy", modes="rev", fast=True)
    (vjp,) = [r for r in report if r.kind == "vjp"]
    assert vjp.status is gradcheck.Status.ERROR
    assert "shape (3,)" in vjp.message
    assert vjp.details["fast_screen"] == "escalated: the backend's VJP raised"
