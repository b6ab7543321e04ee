"""Bad input: a misbehaving function or adapter fails that one check with a clear message, the
run goes on and never crashes; invalid arguments raise InvalidArgument naming argument, value and
the valid choices."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import InvalidArgument, NumpyFunction, Status
from gradcheck.engines.numpy.backend import NumpyBackend


def _sin(**kw) -> NumpyFunction:
    return NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]),),
                         lambda a, t: (np.cos(a[0]) * t[0],), **kw)


def _only(report, status):
    return [r for r in report if r.status is status]


def test_function_that_raises():
    def boom(x):
        raise RuntimeError("kaboom")

    report = gradcheck.check(NumpyFunction(boom, lambda a, c: (c[0],)), np.ones(3),
                             backend="numpy")
    (r,) = report.results
    assert r.status is Status.ERROR and r.kind == "call"
    assert "raised at the sample point" in r.message and "RuntimeError: kaboom" in r.message
    assert not report.passed


def test_non_finite_output_is_inconclusive():
    f = NumpyFunction(np.log, lambda a, c: (c[0] / a[0],))
    with np.errstate(invalid="ignore"):
        report = gradcheck.check(f, np.array([1.0, -1.0]), backend="numpy")
    (r,) = report.results
    assert r.status is Status.INCONCLUSIVE and "non-finite" in r.message
    assert not report.failures and not report.passed  # not a failure, but decided nothing


def test_function_that_validates_its_domain_is_still_checked():
    def safe_log(x):
        if np.any(x <= 0):
            raise ValueError("log of a non-positive number")
        return np.log(x)

    # the first finite-difference steps leave the domain; those rows count as non-finite
    report = gradcheck.check(NumpyFunction(safe_log, lambda a, c: (c[0] / a[0],)),
                             np.array([0.05, 2.0]), backend="numpy", modes=("rev",))
    assert report.passed and _only(report, Status.PASSED)


def test_wrong_shape_from_a_vjp():
    f = NumpyFunction(np.sin, lambda a, c: (c[0][:2],), lambda a, t: (np.cos(a[0]) * t[0],))
    report = gradcheck.check(f, np.ones(3), backend="numpy")
    (err,) = _only(report, Status.ERROR)
    assert err.kind == "vjp" and "returned shape (2,), expected (3,)" in err.message
    assert any(r.kind == "jvp" and r.status is Status.PASSED for r in report)  # run went on


def test_broken_adapter_fails_its_checks_not_the_run():
    class Broken(NumpyBackend):
        name = "broken"

        def vjp(self, fn, args, diff, cotangents, device):
            return [np.zeros(7)]

        def jvp(self, fn, args, diff, tangents, device):
            raise RuntimeError("no forward mode today")

    report = gradcheck.check(_sin(), np.ones(3), backend=Broken())
    kinds = {r.kind: r for r in report}
    assert kinds["vjp"].status is Status.ERROR and "shape (7,)" in kinds["vjp"].message
    assert kinds["jvp"].status is Status.ERROR and "no forward mode today" in kinds["jvp"].message


def test_adapter_whose_batched_evaluation_is_broken():
    class NoBatch(NumpyBackend):
        name = "nobatch"

        def evaluate_batch(self, fn, args, batched, device):
            raise RuntimeError("batch broke")

    report = gradcheck.check(_sin(), np.ones(3), backend=NoBatch())
    assert report.results and all(r.status is Status.ERROR for r in report)
    assert all("batch broke" in r.message for r in report)


def test_wrong_dtype_from_a_low_precision_vjp():
    up = NumpyFunction(np.sin, lambda a, c: ((c[0] * np.cos(a[0])).astype(np.float64),))
    report = gradcheck.check(up, np.ones(3, dtype=np.float32), backend="numpy")
    (err,) = _only(report, Status.ERROR)
    assert err.kind == "rounding" and "dtype float64, expected float32" in err.message
    assert any(r.kind == "vjp" and r.status is Status.PASSED for r in report)


def test_non_float_output_is_an_error():
    f = NumpyFunction(lambda x: (x > 0).astype(int), lambda a, c: (c[0],))
    note, r = gradcheck.check(f, np.ones(3), backend="numpy").results
    assert note.status is Status.SKIPPED and "output 0 is int64" in note.message
    assert r.status is Status.ERROR and "no floating-point output" in r.message


def test_low_precision_output_of_the_wrong_shape():
    f = NumpyFunction(lambda x: np.sin(x) if x.dtype == np.float64 else np.sin(x)[:1],
                      lambda a, c: (c[0] * np.cos(a[0]),))
    (r,) = gradcheck.check(f, np.ones(3, dtype=np.float32), backend="numpy").results
    assert r.status is Status.ERROR and "shape (1,) in float32 but (3,) in float64" in r.message


def test_empty_input_is_inconclusive():
    report = gradcheck.check(_sin(), np.ones((0, 3)), backend="numpy")
    (r,) = report.results
    assert r.status is Status.INCONCLUSIVE and "empty" in r.message and not report.passed


def test_empty_input_next_to_a_real_one():
    f = NumpyFunction(lambda x, e: np.sin(x) + e.sum(), lambda a, c: (c[0] * np.cos(a[0]),
                                                                      np.zeros_like(a[1])))
    report = gradcheck.check(f, np.ones(3), np.ones(0), backend="numpy", modes=("rev",))
    assert {(r.kind, r.input_index, r.status) for r in report} == {
        ("vjp", 1, Status.INCONCLUSIVE), ("vjp", 0, Status.PASSED)}


@pytest.mark.parametrize("mutant", [False, True])
def test_empty_output_needs_an_exactly_zero_vjp(mutant):
    """A batch of zero rows times a weight: no output element, so the weight's VJP is exactly 0
    (seen in OpInfo's zero-size layer_norm samples, which used to crash the FD oracle)."""
    def vjp(a, c):
        g_w = np.ones(3) if mutant else np.sum(c[0] * a[0], axis=0)
        return c[0] * a[1], g_w

    f = NumpyFunction(lambda e, w: e * w, vjp)
    report = gradcheck.check(f, np.ones((0, 3)), np.ones(3), backend="numpy", modes=("rev",))
    by_input = {r.input_index: r for r in report}
    assert by_input[0].status is Status.INCONCLUSIVE
    w = by_input[1]
    if mutant:
        assert w.status is Status.FAILED and not report.passed
        assert "(0, 3) are empty, so the VJP for input 1 must be exactly 0" in w.message
        assert "element (0,) is 1" in w.message
    else:
        assert w.status is Status.PASSED and report.passed


def test_integer_inputs_pass_through_undifferentiated():
    f = NumpyFunction(lambda x, n: np.sin(x) * n,
                      lambda a, c: (c[0] * np.cos(a[0]) * a[1], None),
                      lambda a, t: (np.cos(a[0]) * a[1] * t[0],))
    report = gradcheck.check(f, np.linspace(0, 1, 3), np.array([1, 2, 3]), backend="numpy")
    assert report.passed
    assert {r.input_index for r in report} == {0}


def test_only_integer_inputs_is_an_error():
    (r,) = gradcheck.check(_sin(), np.arange(3), backend="numpy").results
    assert r.status is Status.ERROR and "no floating-point input" in r.message


def test_numpy_backend_needs_a_numpy_function():
    report = gradcheck.check(np.sin, np.ones(3), backend="numpy")
    assert not report.passed
    assert any("NumpyFunction" in r.message for r in report.failures)


@pytest.mark.parametrize("kwargs,pieces", [
    (dict(backend="nope"), ["backend='nope'", "'numpy'", "'torch'", "'jax'", "module:Attr"]),
    (dict(backend=42), ["backend=42"]),
    (dict(backend="numpy", device="cuda"), ["device='cuda'", "'cpu'"]),
    (dict(backend="numpy", dtype="int8"), ["dtype='int8'", "'float64'", "'float32'"]),
    (dict(backend="numpy", modes=("sideways",)), ["modes=('sideways',)", "'rev'", "'fwd'"]),
    (dict(backend="numpy", modes=()), ["modes=()", "'rev'", "'fwd'"]),
    (dict(backend="numpy", order=3), ["order=3", "1, 2"]),
    (dict(backend="numpy", probes=0), ["probes=0"]),
    (dict(backend="numpy", rtol=-1.0), ["rtol=-1.0"]),
])
def test_invalid_arguments_name_argument_value_and_choices(kwargs, pieces):
    with pytest.raises(InvalidArgument) as info:
        gradcheck.check(_sin(), np.ones(2), **kwargs)
    for piece in pieces:
        assert piece in str(info.value)
    assert isinstance(info.value, ValueError)  # InvalidArgument is also a ValueError


def test_no_inputs_is_invalid():
    with pytest.raises(InvalidArgument, match="inputs"):
        gradcheck.check(_sin(), backend="numpy")


def test_assert_gradients_raises_an_assertion_error_on_errors_too():
    def boom(x):
        raise RuntimeError("kaboom")

    with pytest.raises(AssertionError, match="kaboom"):
        gradcheck.assert_gradients(NumpyFunction(boom, lambda a, c: (c[0],)), np.ones(2),
                                   backend="numpy")


def test_empty_output_vjp_with_the_wrong_number_of_gradients_is_an_error():
    class Short(NumpyBackend):
        def vjp(self, fn, args, diff, cotangents, device):
            return []  # an adapter that drops the gradients

    f = NumpyFunction(lambda e, w: e * w, lambda a, c: (c[0] * a[1], np.zeros(3)))
    report = gradcheck.check(f, np.ones((0, 3)), np.ones(3), backend=Short(), modes=("rev",))
    (err,) = [r for r in report if r.status is Status.ERROR]
    assert ("VJP with the empty output(s) (0, 3): the VJP returned 0 arrays, expected 1"
            in err.message)
