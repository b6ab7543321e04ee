"""A check never passes what it could not resolve (issue 13): mutant pairs.

Each bad case (a noisy, nondeterministic, impure, exiting or hanging function) is never passed,
and its correct twin still passes."""

import time

import numpy as np
import pytest

import gradcheck
import gradcheck.backends.limits
from gradcheck import NumpyFunction
from gradcheck.core.errors import NothingDecided
from gradcheck.core.results import Status

X = np.random.default_rng(0).normal(size=(3, 4))


def _cube(noise=0.0, sign=1.0):
    """x^3 with a hand-written rule (``sign`` -1: a sign flip).  With ``noise``, random noise of
    that size from the third call on: the determinism check's repeat at the sample point
    sees none of it (noise that sets in after a warm-up), only the resolution rule can stop
    it from passing."""
    rng, calls = np.random.default_rng(0), []

    def fwd(x):
        calls.append(1)
        return x ** 3 + (noise * rng.standard_normal(np.shape(x)) if len(calls) > 2 else 0)

    return NumpyFunction(fwd, lambda a, c: (sign * 3 * a[0] ** 2 * c[0],),
                         lambda a, t: (sign * 3 * a[0] ** 2 * t[0],), name="cube")


def _kinds(report, kind):
    return [r for r in report.results if r.kind == kind]


# -- 1. resolution before verdict ----------------------------------------------------------


@pytest.mark.parametrize("noise", [1e-2, 3e-3])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_an_unresolvable_estimate_never_passes(noise, sign):
    rep = gradcheck.check(_cube(noise, sign), X, backend="numpy")
    rule = _kinds(rep, "vjp") + _kinds(rep, "jvp")
    assert rule and not any(r.status is Status.PASSED for r in rule)
    for r in rule:
        if r.status is Status.INCONCLUSIVE:
            assert "not resolved" in r.message and "not passed" in r.message
            assert r.details["resolution"] > gradcheck.oracle.error_model.RESOLUTION
    with pytest.raises(gradcheck.GradientMismatch):
        gradcheck.assert_gradients(_cube(noise, sign), X, backend="numpy", modes=("rev",))


def test_the_smooth_twin_passes_and_its_sign_flip_fails():
    ok = gradcheck.assert_gradients(_cube(), X, backend="numpy")
    assert all(r.details["resolution"] < 1e-6 for r in _kinds(ok, "vjp"))
    bad = gradcheck.check(_cube(sign=-1.0), X, backend="numpy")
    assert {r.status for r in _kinds(bad, "vjp") + _kinds(bad, "jvp")} == {Status.FAILED}


def test_an_explicit_tolerance_does_not_make_an_unresolved_check_pass():
    rep = gradcheck.check(_cube(1e-2, -1.0), X, backend="numpy", modes=("rev",), atol=1e3)
    assert {r.status for r in _kinds(rep, "vjp")} == {Status.INCONCLUSIVE}


def test_an_unused_input_still_passes_on_exact_zeros():
    f = NumpyFunction(lambda x, y: np.sin(x), lambda a, c: (np.cos(a[0]) * c[0], 0 * a[1]),
                      lambda a, t: (np.cos(a[0]) * t[0],), name="unused")
    rep = gradcheck.assert_gradients(f, X, X[:2], backend="numpy")
    assert all(r.status is Status.PASSED for r in rep.results)


def test_resolution_threshold():
    resolved = gradcheck.oracle.error_model.resolved
    assert resolved(1e-3, 1.0) and not resolved(0.1, 1.0)
    assert resolved(1e-13, 0.0)  # both sides exactly zero
    assert not resolved(float("nan"), 1.0)


# -- 2. determinism ------------------------------------------------------------------------


def test_a_nondeterministic_function_is_reported_and_never_passed():
    torch = pytest.importorskip("torch")

    class Noisy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3 + 1e-2 * torch.randn_like(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return -3 * x ** 2 * g  # sign flipped: passed before resolution and determinism

    rep = gradcheck.check(Noisy.apply, X, backend="torch", modes=("rev",))
    assert not any(r.status is Status.PASSED for r in rep.results)
    nd = [r for r in rep.results if "nondeterministic" in r.details]
    assert len(nd) == 1 and nd[0].status is Status.INCONCLUSIVE
    assert "nondeterministic" in nd[0].message and nd[0].details["nondeterministic"] > 1e-4
    with pytest.raises(NothingDecided):
        gradcheck.assert_gradients(Noisy.apply, X, backend="torch", modes=("rev",))


def test_rounding_level_differences_between_calls_are_deterministic_enough():
    rng = np.random.default_rng(1)
    # two calls differ by one ulp (a reduction summed in another order)
    f = NumpyFunction(lambda x: np.sin(x) * (1 + np.finfo(float).eps * rng.choice([-1, 1])),
                      lambda a, c: (np.cos(a[0]) * c[0],), lambda a, t: (np.cos(a[0]) * t[0],),
                      name="sin_ulp")
    rep = gradcheck.assert_gradients(f, X, backend="numpy")
    assert not any("nondeterministic" in r.details for r in rep.results)


# -- 3. purity -----------------------------------------------------------------------------


def test_a_function_that_modifies_its_input_in_place_is_an_error():
    torch = pytest.importorskip("torch")

    def scale_in_place(x):
        with torch.no_grad():
            x.mul_(0.51)
        return torch.sin(x)

    rep = gradcheck.check(scale_in_place, X, backend="torch", modes=("rev",))
    assert not rep.passed and not any(r.status is Status.PASSED for r in rep.results)
    err = [r for r in rep.results if r.status is Status.ERROR]
    assert len(err) == 1 and err[0].input_index == 0
    assert "fn modified input 0 in place" in err[0].message and "pure" in err[0].message
    assert err[0].details["max_change"] == pytest.approx(np.max(np.abs(X)) * 0.49)

    def scale_copy(x):
        return torch.sin(x.clone().mul_(0.51))

    gradcheck.assert_gradients(scale_copy, X, backend="torch", modes=("rev",))


def test_a_numpy_forward_that_modifies_its_second_input_is_named():
    def fwd(x, y):
        y += 1.0
        return x * y

    f = NumpyFunction(fwd, lambda a, c: (a[1] * c[0], a[0] * c[0]), name="impure")
    rep = gradcheck.check(f, X, X + 2, backend="numpy", modes=("rev",))
    err = [r for r in rep.results if r.status is Status.ERROR]
    assert [r.input_index for r in err] == [1] and "input 1" in err[0].message


# -- 5. user code cannot end the run -------------------------------------------------------


def test_system_exit_in_fn_is_an_error_result_not_the_end_of_the_run():
    def exits(x):
        raise SystemExit(3)

    f = NumpyFunction(exits, lambda a, c: (c[0],), name="exits")
    rep = gradcheck.check(f, X, backend="numpy")
    assert [r.status for r in rep.results] == [Status.ERROR]
    assert "SystemExit" in rep.results[0].message

    calls = []

    def exits_in_rule(a, c):
        calls.append(1)
        raise SystemExit("bye")

    g = NumpyFunction(np.sin, exits_in_rule, name="rule_exits")
    rep = gradcheck.check(g, X, backend="numpy", modes=("rev",))
    assert calls and any(r.status is Status.ERROR and "SystemExit" in r.message
                         for r in rep.results)


def test_keyboard_interrupt_still_stops():
    def interrupted(x):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gradcheck.check(NumpyFunction(interrupted, lambda a, c: (c[0],)), X, backend="numpy")


# -- 4. time limits ------------------------------------------------------------------------


@pytest.mark.skipif(not gradcheck.backends.limits.enforceable(), reason="needs SIGALRM")
def test_a_hanging_function_is_an_error_after_the_timeout():
    calls = []

    def hangs(x):
        calls.append(1)
        if len(calls) > 2:  # the sample point and its repeat answer; the FD calls hang
            while True:
                try:
                    time.sleep(0.05)
                except Exception:  # noqa: S112 - a function that swallows exceptions
                    continue
        return np.sin(x)

    f = NumpyFunction(hangs, lambda a, c: (np.cos(a[0]) * c[0],), name="hangs")
    t0 = time.perf_counter()
    rep = gradcheck.check(f, X, backend="numpy", modes=("rev",), timeout=0.5)
    assert time.perf_counter() - t0 < 5
    assert not rep.passed and "timeout=0.5 s" in rep.results[-1].message
    assert rep.results[-1].status is Status.ERROR
    calls.clear()
    ok = NumpyFunction(np.sin, lambda a, c: (np.cos(a[0]) * c[0],), name="sin")
    assert gradcheck.check(ok, X, backend="numpy", timeout=60).passed
    import signal

    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # no timer left behind


def test_the_rounding_floor_survives_huge_steps():
    floor = gradcheck.oracle.error_model.fd_rounding_floor(
        np.ones(2), np.full(2, 1e200), np.ones(2), np.ones(2), 1e200, 1e198)
    assert floor == 0.0 or np.isfinite(floor)


@pytest.mark.skipif(not gradcheck.backends.limits.enforceable(), reason="no way to interrupt")
@pytest.mark.parametrize("defeat", ["ignore", "handler", "alarm0"])
def test_a_function_that_defeats_sigalrm_still_times_out(defeat):
    import signal
    import threading

    stop = threading.Event()  # ends the spin after a generous bound if the limit failed
    guard = threading.Timer(120, stop.set)
    calls = []

    def hostile(x):
        calls.append(1)
        if len(calls) > 2:
            if defeat == "ignore":
                signal.signal(signal.SIGALRM, signal.SIG_IGN)
            elif defeat == "handler":
                signal.signal(signal.SIGALRM, lambda *_: None)
            else:
                signal.alarm(0)
            while not stop.is_set():
                try:
                    sum(range(100))
                except Exception:  # noqa: S112 - a function that swallows exceptions
                    continue
        return np.sin(x)

    before = signal.getsignal(signal.SIGALRM)
    guard.start()
    try:
        rep = gradcheck.check(NumpyFunction(hostile, lambda a, c: (np.cos(a[0]) * c[0],)), X,
                              backend="numpy", modes=("rev",), timeout=0.5)
    finally:
        guard.cancel()
    assert not stop.is_set()  # the check's limit, not the test's guard, ended it
    assert rep.results[-1].status is Status.ERROR and "timeout=0.5 s" in rep.results[-1].message
    assert signal.getsignal(signal.SIGALRM) == before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
