"""A user's ErrorModel profile reaches the comparison: on a real check a stricter profile fails
a borderline pass of a slightly wrong rule, a looser one passes a borderline failure, and the
message still says what was compared, by how much, the allowed error and its derivation."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck import ErrorModel, InvalidArgument, NumpyFunction, Status, check, check_semantics
from gradcheck.engines.numpy.backend import NumpyBackend
from gradcheck.numeric.agreement import Side, compare_vjps
from gradcheck.numeric.rounding import Sample, compare
from gradcheck.reference.numpy import get_op

NUMPY = NumpyBackend()
X = np.random.default_rng(3).standard_normal((4, 5))


def _scaled_sin(delta: float) -> NumpyFunction:
    """sin whose VJP and JVP are off by the relative ``delta`` (a mutant; 0 is correct)."""
    return NumpyFunction(np.sin, lambda a, c: [c[0] * np.cos(a[0]) * (1 + delta)],
                         lambda a, t: [t[0] * np.cos(a[0]) * (1 + delta)], name="scaled_sin")


def _reference(delta: float, model: ErrorModel | None = None):
    kw = {} if model is None else {"error_model": model}
    (r,) = compare_vjps("reference", Side(NUMPY, _scaled_sin(delta)),
                        Side(NUMPY, get_op("sin")), [X], seed=1, **kw)
    return r


def test_the_correct_rule_passes_under_every_profile():
    for model in (None, ErrorModel(rounding_gamma=2.0), ErrorModel(rounding_gamma=128.0)):
        assert _reference(0.0, model).status is Status.PASSED


def test_a_stricter_profile_fails_a_borderline_pass_of_the_reference_check():
    default, strict = _reference(1e-14), _reference(1e-14, ErrorModel(rounding_gamma=2.0))
    assert default.status is Status.PASSED and 0.1 < default.discrepancy_ratio <= 1.0
    assert strict.status is Status.FAILED
    # same comparison, same discrepancy: only the allowance changed, by the profile's factor
    assert (strict.actual, strict.expected, strict.discrepancy) == (
        default.actual, default.expected, default.discrepancy)
    assert strict.allowed == pytest.approx(default.allowed / 8.0, rel=1e-12)
    m = strict.message
    assert "DISAGREES" in m and "<J^T v, u>" in m  # what was compared
    assert f"|diff| {strict.discrepancy:.3g}" in m  # by how much
    assert f"allowed {strict.allowed:.3g}" in m  # the allowed error ...
    assert "[2 x eps(float64) x (sum of |terms| " in m  # ... and its derivation
    assert strict.allowed_source.startswith("2 x eps(float64)")
    assert strict.worst  # the elements are listed, judged with the same profile


def test_a_looser_profile_passes_a_borderline_failure_of_the_reference_check():
    default, loose = _reference(3e-14), _reference(3e-14, ErrorModel(rounding_gamma=128.0))
    assert default.status is Status.FAILED and 1.0 < default.discrepancy_ratio < 8.0
    assert "[16 x eps(float64)" in default.message
    assert loose.status is Status.PASSED
    assert loose.allowed == pytest.approx(default.allowed * 8.0, rel=1e-12)
    assert loose.allowed_source.startswith("128 x eps(float64)")


def test_the_profile_reaches_the_low_precision_rounding_comparison():
    rng = np.random.default_rng(0)
    g64 = rng.standard_normal(50)
    g32 = (g64 * (1 + 4e-6)).astype(np.float32).astype(np.float64)  # ~34 eps32 relative
    samples = [Sample([g32], [g64])]
    default = compare(samples, 0, (50,), "float32", 0.0, None, None)
    loose = compare(samples, 0, (50,), "float32", 0.0, None, None,
                    model=ErrorModel(rounding_gamma=64.0))
    assert default.discrepancy > default.allowance.allowed  # 16 eps32 x ||g|| is exceeded
    assert loose.discrepancy <= loose.allowance.allowed
    assert loose.allowance.source.startswith("64 x eps(float32) x (||VJP|| ")


def test_check_with_a_stricter_profile_fails_a_borderline_pass():
    wrong = _scaled_sin(1e-11)  # ~0.8 of the default allowance (10 x the FD error dominates)
    default = check(wrong, X, backend="numpy", modes=("rev",))
    assert default.passed
    strict = check(wrong, X, backend="numpy", modes=("rev",),
                   error_model=ErrorModel(fd_safety=2.0))
    (r,) = [r for r in strict if r.kind == "vjp"]
    assert r.status is Status.FAILED and "2 x FD error" in r.allowed_source
    wronger = _scaled_sin(3e-11)  # ~2.3 x the default allowance
    assert not check(wronger, X, backend="numpy", modes=("rev",)).passed
    assert check(wronger, X, backend="numpy", modes=("rev",),
                 error_model=ErrorModel(fd_safety=100.0)).passed


def test_check_semantics_judges_its_probes_with_the_profile():
    pytest.importorskip("torch")
    with pytest.raises(InvalidArgument, match="error_model="):
        check_semantics("torch", probes=["detach"], error_model=2.0)
    default = {r.name: r for r in check_semantics("torch", probes=["detach"])}
    strict = {r.name: r for r in check_semantics("torch", probes=["detach"],
                                                 error_model=ErrorModel(fd_safety=2.0))}
    assert default.keys() == strict.keys() and default
    for name, r in strict.items():
        assert r.allowed_source.startswith("2 x FD error"), (name, r.allowed_source)
        assert r.discrepancy == default[name].discrepancy
        assert r.allowed < default[name].allowed
    assert "error_model=gradcheck.ErrorModel(fd_safety=2.0)" in next(iter(strict.values())
                                                                     ).reproducer


def test_audit_judges_its_gradient_checks_and_its_flow_noise_with_the_profile():
    torch = pytest.importorskip("torch")
    from gradcheck import audit

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2).double()
    batch = torch.randn(5, 3, dtype=torch.float64)

    def loss_fn(m, b):
        return (torch.tanh(m(b)) ** 2).sum()

    with pytest.raises(InvalidArgument, match="error_model="):
        audit(model, loss_fn, batch, backend="torch", error_model="strict")
    default = audit(model, loss_fn, batch, backend="torch")
    strict = audit(model, loss_fn, batch, backend="torch", error_model=ErrorModel(fd_safety=2.0))
    assert [p.name for p in default.parameters] == [p.name for p in strict.parameters]
    for d, s in zip(default.parameters, strict.parameters, strict=True):
        assert s.fd_noise == pytest.approx(d.fd_noise / 5.0, rel=1e-12)  # 2x, not 10x, FD error
    grads = [r for r in strict.results if r.kind == "vjp"]
    assert grads and all(r.allowed_source.startswith("2 x FD error") for r in grads)
    assert "error_model=gradcheck.ErrorModel(fd_safety=2.0)" in grads[0].reproducer


def test_the_profile_turns_the_measured_noise_of_two_reverse_paths_into_a_bound():
    """The eager-vs-functional check where torch's tape and ``torch.func.vjp`` round a
    one-element group norm apart (tests/numeric/test_path_noise.py): only the two paths'
    measured noise explains the difference, and the profile's ``noise_factor`` bounds it."""
    torch = pytest.importorskip("torch")
    x = np.array([[-6.795487403017545, 8.49765622094553]])  # OpInfo group_norm[20]'s input

    def eager_func(model: ErrorModel | None = None):
        kw = {} if model is None else {"error_model": model}
        (r,) = [r for r in check(lambda a: torch.nn.functional.group_norm(a, 1), x,
                                 backend="torch", modes=("rev",), **kw)
                if r.kind == "eager_func"]
        return r

    default = eager_func()  # noise_factor 4
    strict, loose = eager_func(ErrorModel(noise_factor=0.25)), eager_func(
        ErrorModel(noise_factor=16.0))
    assert default.status is Status.PASSED and "measured rounding" in default.allowed_source
    assert strict.status is Status.FAILED and loose.status is Status.PASSED
    # same comparison; the allowance (all of it the measured noise here) scales with the factor
    assert strict.discrepancy == default.discrepancy == loose.discrepancy > 0
    assert strict.allowed == pytest.approx(default.allowed / 16.0, rel=1e-3)
    assert loose.allowed == pytest.approx(default.allowed * 4.0, rel=1e-3)
    assert "measured rounding of the judging side" in strict.message
