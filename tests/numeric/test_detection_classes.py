"""``check`` at a point as sharp as the sweep (issue 35, item 1): one mutant pair per miss
class, on functions written here (torch ``autograd.Function`` and jax ``custom_jvp`` rules).
Each buggy function is caught by ``gradcheck.check`` at its point; its correct twin passes with
no failure at the same point and dtype.  docs/error-model.md section 4c.

a) order 2 in float16/bfloat16: an ``inf`` Hessian, a NaN Hessian through a composition;
b) tiny magnitudes: 1e-300, subnormal inputs, a derivative that underflows to 0 at -700;
c) components below the FD resolution of the projections: a VJP that loses a 5e-17 relative
   component, a second derivative of 1e-16 next to terms of order 1;
d) low-precision derivatives a few ulps from the correctly rounded float64 value;
e) an ``inf`` derivative where the true value is finite, close to the float64 limit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradcheck
from gradcheck.numeric.resolution import ULP_BOUND

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")


def elementwise(forward, first, second=None):
    """A torch op ``forward(x)`` whose derivative is ``first(x)`` and, where ``second`` is
    given, whose derivative's derivative is ``second(x)`` (each a rule written by hand, the
    way a custom kernel's is)."""

    class Second(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, g):
            ctx.save_for_backward(x, g)
            return g * first(x)

        @staticmethod
        def backward(ctx, gg):
            x, g = ctx.saved_tensors
            return gg * g * second(x), gg * first(x)

    return custom_vjp(forward, lambda x, g: Second.apply(x, g) if second is not None
                      else g * first(x))


def custom_vjp(forward, vjp):
    """A torch op ``forward(x)`` with the hand-written ``vjp(x, g)``."""

    class Op(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return forward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return vjp(x, g)

    return Op.apply


def check(fn, x, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gradcheck.check(fn, x, backend=kw.pop("backend", "torch"), **kw)


def assert_pair(mutant, twin, x, *, caught_by=None, **kw):
    """The mutant fails (by the per-component stage, where ``caught_by`` names its oracle:
    ``"scaled"``, ``"ulp"``, or ``"rounding"`` for the half-precision order-2 non-finite
    check); the twin has no failed or errored result."""
    bad = check(mutant, x, **kw)
    assert not bad.passed, bad.summary()
    failed = [r for r in bad.results if r.status.value == "failed"]
    if caught_by == "rounding":
        assert any(r.kind.value == "rounding" and r.order == 2
                   and r.details.get("per_component") == "rounding" for r in failed), \
            bad.summary()
    elif caught_by is not None:
        assert any(r.details.get("per_component") == caught_by for r in failed), [
            r.message for r in failed]
    good = check(twin, x, **kw)
    assert good.passed, gradcheck.format_failure(good)
    assert not [r for r in good.results if r.status.value in ("failed", "error")]
    return bad, good


def _flagged(fn, x, **kw):
    """Whether check without the per-component stage flags ``fn`` (the miss it closes)."""
    return not check(fn, x, resolution=False, **kw).passed


# -- a) order 2 in float16 / bfloat16 -----------------------------------------------------------

def _sin_second(extra):
    return elementwise(torch.sin, torch.cos, lambda x: -torch.sin(x) + extra(x))


SIN = _sin_second(lambda x: 0 * x)
# sin's second derivative computed through an intermediate that overflows in float16 only
SIN_INF_HESSIAN = elementwise(torch.sin, torch.cos, lambda x: -(torch.sin(x) * 1e5) * 1e-5)
# ... and one that gives inf - inf = NaN in float16 and bfloat16 (exp(100 x) overflows both)
SIN_NAN_HESSIAN = _sin_second(lambda x: torch.exp(100 * x) - torch.exp(100 * x))
HALF_X = np.array([0.9, 1.3, -1.1, 2.0])


def test_a_an_inf_hessian_in_float16_is_caught():
    """The order-2 derivative computed in float16 is inf where the same function's float64
    one is finite in float16 (the half-precision order-2 check); the ulp check, which adds a
    result only where that did not fail already, sees it too element by element."""
    x = HALF_X.astype(np.float16)
    bad, _ = assert_pair(SIN_INF_HESSIAN, SIN, x, caught_by="rounding", order=2)
    r = next(r for r in bad.results if r.kind.value == "rounding" and r.order == 2
             and r.status.value == "failed")
    assert r.actual is not None and not np.isfinite(r.actual)
    from gradcheck.backends.registry import get_backend
    from gradcheck.numeric import resolution

    def subject(fn):
        return resolution.Subject(get_backend("torch"), fn, normwise=True, order2=True)

    ulp = resolution.ulp_checks(subject(SIN_INF_HESSIAN), [x.astype(np.float64)], "float16",
                                2, 0, ("rev",))
    assert ulp and ulp[0].status.value == "failed" and not np.isfinite(ulp[0].actual)
    twin = resolution.ulp_checks(subject(SIN), [x.astype(np.float64)], "float16", 2, 0,
                                 ("rev",))
    assert twin and twin[0].status.value == "passed"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_a_nan_hessian_through_a_composition_is_caught_in_the_dtype(dtype):
    """Not elementwise (the product with the reversed input): the per-element ulp check does
    not apply, and the order-2 derivative computed in the dtype is NaN where the same
    function's float64 one is finite in the dtype."""
    x = np.array([0.9, 1.3, 0.4, 2.0]).astype(ml_dtypes.bfloat16 if dtype == "bfloat16"
                                              else np.float16)

    def composed(f):
        return lambda t: f(t) * torch.flip(t, (0,))

    assert_pair(composed(SIN_NAN_HESSIAN), composed(SIN), x, caught_by="rounding", order=2)


def test_a_order_2_in_half_precision_leaves_out_what_the_dtype_cannot_compute():
    """The order-2 run in float16 keeps the rule check in float64 as before and adds the
    non-finite check of the second derivative computed in the dtype: a numpy rule that
    answers float64 in float16 (no comparison in the dtype possible) adds nothing, and the
    check still passes."""
    from gradcheck.core.rules import NumpyFunction

    def order2(args, cts):  # always float64, whatever the dtype of its arguments
        x, c = (np.asarray(a, dtype=np.float64) for a in args)
        w = np.asarray(cts[0], dtype=np.float64)
        return [6 * x * c * w, 3 * x * x * w]

    cube = NumpyFunction(lambda x: x ** 3, NumpyFunction(
        lambda x, c: 3 * x * x * c, order2), name="cube")
    x = np.array([0.5, -1.25, 0.75], dtype=np.float16)
    rep = check(cube, x, backend="numpy", order=2, modes=("rev",))
    assert rep.passed, gradcheck.format_failure(rep)
    assert not [r for r in rep.results if r.status.value == "error"]


# -- b) tiny magnitudes ----------------------------------------------------------------------------

def _doubled_below(limit):
    return lambda x: torch.cos(x) * torch.where(x.abs() < limit, 2.0, 1.0).to(x.dtype)


@pytest.mark.parametrize("x", [np.array(1e-300), np.array(1e-310),
                               np.array([1e-300, -3e-300, 2e-299]),
                               np.array([5e-324, -1e-320, 3e-315, -2e-310])],
                         ids=["1e-300", "subnormal-1e-310", "near-1e-300", "subnormals"])
def test_b_tiny_and_subnormal_inputs(x):
    mutant = elementwise(torch.sin, _doubled_below(1e-200))
    twin = elementwise(torch.sin, torch.cos)
    bad, good = assert_pair(mutant, twin, x)
    assert any(r.details.get("per_component") == "scaled" for r in bad.results) or any(
        r.kind.value == "vjp" and r.status.value == "failed" for r in bad.results)


def test_b_a_derivative_that_underflows_to_zero_where_the_true_value_is_normal():
    """exp'(-700) = 9.9e-305, a normal number; the mutant computes it as exp(x)^2 / exp(x),
    whose square underflows to 0."""
    mutant = elementwise(torch.exp, lambda x: torch.exp(x) * torch.exp(x) / torch.exp(x))
    twin = elementwise(torch.exp, torch.exp)
    for x in (np.array(-700.0), np.array([-700.0, -705.0, -690.0])):
        bad, _ = assert_pair(mutant, twin, x)
        worst = [r for r in bad.results if r.status.value == "failed"][0]
        assert worst.actual == 0.0


def test_b_a_scalar_at_1e300_with_a_rule_that_is_right_only_above_1e200():
    """At a lone scalar of 1e-300 the projected check's steps (2^-3) move the input by 1e299
    of its size: the stage's relative steps judge it."""
    mutant = elementwise(lambda x: torch.exp(x) - 1, lambda x: torch.exp(x) * torch.where(
        x.abs() < 1e-200, 1.5, 1.0).to(x.dtype))
    twin = elementwise(lambda x: torch.exp(x) - 1, torch.exp)
    assert_pair(mutant, twin, np.array(1e-300))


def _named(name, forward, first):
    """A one-input function named ``name`` (as an engine's own function is) with the rule
    ``first``."""
    fn = elementwise(forward, first)

    def named(x):
        return fn(x)

    named.__name__ = name
    return named


@pytest.mark.parametrize("x", [-100.0, -700.0])
def test_b_a_derivative_far_below_the_value_is_judged_by_mpmath(x):
    """expm1'(x) = exp(x) (3.7e-44 at -100, 9.9e-305 at -700, normal numbers) beside
    expm1(x) = -1: no finite difference of the function resolves it, so a rule computing it
    as expm1(x) + 1 (0 there: torch's and jax's, T20/J17) passes every projection; a function
    that is expm1 by its name is judged element by element against mpmath."""
    pytest.importorskip("mpmath")
    xs = np.array([x, 0.5, -2.0])
    mutant = _named("expm1", torch.expm1, lambda t: torch.expm1(t) + 1)
    twin = _named("expm1", torch.expm1, torch.exp)
    assert _flagged(mutant, xs) is False  # the miss this closes
    bad, _ = assert_pair(mutant, twin, xs, caught_by="mpmath")
    r = next(r for r in bad.results if r.details.get("per_component") == "mpmath")
    assert r.actual == 0.0 and r.expected == pytest.approx(np.exp(x), rel=1e-12)


def test_b_the_engines_own_expm1_is_caught_at_minus_100():
    pytest.importorskip("mpmath")
    jnp = pytest.importorskip("jax").numpy
    for fn, backend in ((torch.expm1, "torch"), (torch.special.expm1, "torch"),
                        (jnp.expm1, "jax")):
        report = check(fn, np.array([-100.0]), backend=backend)
        assert any(r.details.get("per_component") == "mpmath" for r in report.failures), \
            report.summary()
    # torch's elu is right there (exp(x) for x < 0 times alpha): no false alarm
    assert check(torch.nn.functional.elu, np.array([-100.0, 0.5])).passed


def test_b_a_function_named_as_mpmath_rule_that_is_another_function_is_not_judged():
    """Named expm1 but computing 2 expm1(x): its value is not mpmath's, so mpmath says
    nothing (and its correct rule passes)."""
    pytest.importorskip("mpmath")
    other = _named("expm1", lambda t: 2 * torch.expm1(t), lambda t: 2 * torch.exp(t))
    report = check(other, np.array([-100.0, 0.5]))
    assert report.passed
    assert not any(r.details.get("per_component") == "mpmath" for r in report.results)


# -- c) components below the FD resolution of the projections -------------------------------------

def test_c_a_vjp_that_loses_a_5e_17_relative_component():
    """d/dx (x^2 / 2) = x: the mutant's rule drops the elements below 1e-16, a component
    5e-17 of the gradient's norm, which no projection on random directions resolves."""
    x = np.array([1.0, 5e-17, -0.7])
    mutant = elementwise(lambda t: t * t / 2, lambda t: t * (t.abs() >= 1e-16).to(t.dtype))
    twin = elementwise(lambda t: t * t / 2, lambda t: t)
    assert _flagged(mutant, x) is False  # the miss this closes
    bad, _ = assert_pair(mutant, twin, x, caught_by="scaled")
    r = next(r for r in bad.results if r.details.get("per_component") == "scaled")
    assert r.kind.value == "vjp" and r.actual == 0.0 and r.details["component"] == 1


def test_c_a_second_derivative_of_1e_16_next_to_terms_of_order_1():
    """(x^3 / 6)'' = x: the mutant's second derivative drops the element of 1e-16."""
    x = np.array([1.0, 1e-16, 0.5])
    cube = (lambda t: t ** 3 / 6, lambda t: t * t / 2)
    mutant = elementwise(*cube, lambda t: t * (t.abs() >= 1e-15).to(t.dtype))
    twin = elementwise(*cube, lambda t: t)
    assert _flagged(mutant, x, order=2) is False
    bad, _ = assert_pair(mutant, twin, x, caught_by="scaled", order=2)
    r = next(r for r in bad.results if r.details.get("per_component") == "scaled"
             and r.status.value == "failed")
    assert r.order == 2 and r.kind.value == "vjp_of_vjp"


def test_c_with_a_jax_custom_jvp_rule():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def half_square(lost):
        @jax.custom_jvp
        def f(x):
            return x * x / 2

        @f.defjvp
        def _(primals, tangents):
            (x,), (t,) = primals, tangents
            d = jnp.where(jnp.abs(x) < 1e-16, 0.0, x) if lost else x
            return f(x), d * t

        return f

    x = np.array([1.0, 5e-17, -0.7])
    assert_pair(half_square(True), half_square(False), x, caught_by="scaled", backend="jax")


# -- d) low-precision derivatives a few ulps from the correctly rounded value -------------------

_EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def _off_in(dtype, ulps):
    """sin whose derivative is off by ``ulps`` ulps in ``dtype`` only (the float64 rule is
    right: the projected check's rule check in float64 cannot see it)."""
    t = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]

    def first(x):
        d = torch.cos(x)
        return d * (1 + ulps * _EPS[dtype]) if x.dtype == t else d

    return elementwise(torch.sin, first)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_d_a_derivative_some_ulps_off_the_rounded_float64_value(dtype):
    """Off by twice the measured bound (ULP_BOUND units, about an ulp each at these points):
    the norm-wise rounding check allows 16 eps plus the measured noise, the per-element check
    4 units.  (float32 keeps the norm-wise check alone: docs/error-model.md section 4c.)"""
    ulps = 2 * ULP_BOUND[(dtype, 1)]
    cast = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    x = np.array([0.3, -1.2, 0.7, 2.1, -0.4, 1.6]).astype(cast)
    bad, good = assert_pair(_off_in(dtype, ulps), elementwise(torch.sin, torch.cos), x,
                            caught_by="ulp")
    r = next(r for r in bad.results if r.details.get("per_component") == "ulp")
    assert r.details["max_ulps"] > ULP_BOUND[(dtype, 1)]
    assert "rounded to " + dtype in r.message


def test_d_the_correct_twin_in_low_precision_is_judged_not_skipped():
    x = np.array([0.3, -1.2, 0.7, 2.1]).astype(ml_dtypes.bfloat16)
    rep = check(elementwise(torch.sin, torch.cos), x)
    assert rep.passed
    assert all(r.status.value != "failed" for r in rep.results)


# real engine kernels 1-32 ulps off the correctly rounded value (docs/upstream), at their points:
# each is caught as the engine's known defect; the same function with a correct kernel passes
_TORCH_OFF = [
    ("erf T23", lambda x: torch.erf(x), lambda x: torch.sin(x), [1.2665987014770508e-06]),
    ("xlogy T31", lambda x: torch.xlogy(x, torch.full_like(x, 7392.0)),
     lambda x: x * 8.908, [-23.125]),
    ("logit T26", lambda x: torch.logit(x), lambda x: torch.log(x), [0.498046875]),
]


@pytest.mark.parametrize("name, off, twin, value", _TORCH_OFF, ids=[c[0] for c in _TORCH_OFF])
def test_d_a_torch_bfloat16_kernel_off_is_caught_as_the_engines_known_defect(name, off, twin,
                                                                             value):
    x = np.full(64, value).astype(ml_dtypes.bfloat16)  # the vectorized path
    bad = check(off, x)
    failed = [r for r in bad.results if r.status.value == "failed"]
    assert not bad.passed and failed and all(r.known for r in failed), bad.summary()
    assert name.split()[1] in failed[0].known_as.reason
    good = check(twin, x)
    assert not [r for r in good.results if r.status.value in ("failed", "error")], \
        gradcheck.format_failure(good)


def test_d_a_jax_bfloat16_kernel_off_is_caught_as_the_engines_known_defect():
    """XLA's bfloat16 ``asinh`` expanded in the dtype: 0.91796875 at 1.046875 where 0.9140625
    (J21); ``sinh`` is right there."""
    jnp = pytest.importorskip("jax").numpy
    x = np.full(4, 1.046875).astype(ml_dtypes.bfloat16)
    bad = check(jnp.arcsinh, x, backend="jax")
    failed = [r for r in bad.results if r.status.value == "failed"]
    assert failed and all(r.known for r in failed) and "J21" in failed[0].known_as.reason
    good = check(jnp.sinh, x, backend="jax")
    assert not [r for r in good.results if r.status.value in ("failed", "error")]


# -- e) inf where the true derivative is finite near the float64 limit -------------------------

def test_e_an_inf_derivative_near_the_float64_limit():
    """log'(x) = 1/x is 3.3e307 at 3e-308, finite; the mutant computes x / x^2, whose square
    underflows to 0."""
    mutant = elementwise(torch.log, lambda x: x / (x * x))
    twin = elementwise(torch.log, lambda x: 1 / x)
    for x in (np.array(3e-308), np.array([2.5e-308, 3e-308, 0.5])):
        bad, _ = assert_pair(mutant, twin, x, caught_by="scaled")
        worst = next(r for r in bad.results if r.status.value == "failed"
                     and r.details.get("per_component") == "scaled")
        assert worst.actual is not None and np.isinf(worst.actual)
        assert worst.expected is not None and np.isfinite(worst.expected)


def test_e_an_inf_second_derivative_near_the_float64_limit():
    """log''(x) = -1/x^2 is -1e308 at 1e-154, finite; the mutant computes it as
    -((1/x) (10/x)) / 10, whose product overflows to inf first."""
    x = np.array([1e-154, 2e-154, 0.5])
    recip = (lambda t: torch.log(t), lambda t: 1 / t)
    mutant = elementwise(*recip, lambda t: -((1 / t) * (10 / t)) / 10)
    twin = elementwise(*recip, lambda t: -(1 / t) / t)
    assert_pair(mutant, twin, x, order=2)


# -- the sweep and check share one implementation -------------------------------------------------

def test_the_sweep_runs_the_same_resolution_checks():
    from gradcheck.numeric import resolution
    from gradcheck.sweep import resolution as sweep_resolution

    assert sweep_resolution.ULP_BOUND is resolution.ULP_BOUND
    assert sweep_resolution.TINY64 == resolution.TINY64
    import inspect

    src = inspect.getsource(sweep_resolution)
    assert "shared.scaled_checks(" in src and "shared.ulp_checks(" in src


def test_resolution_false_leaves_the_stage_out():
    x = np.array([1.0, 5e-17, -0.7])
    mutant = elementwise(lambda t: t * t / 2, lambda t: t * (t.abs() >= 1e-16).to(t.dtype))
    rep = check(mutant, x, resolution=False)
    assert rep.passed and not any(r.details.get("per_component") for r in rep.results)
    # and the half-precision order-2 non-finite check (the NaN Hessian of class a, missed so)
    half = np.array([0.9, 1.3, 0.4, 2.0]).astype(np.float16)
    rep = check(lambda t: SIN_NAN_HESSIAN(t) * torch.flip(t, (0,)), half, order=2,
                resolution=False)
    assert rep.passed
    assert not any(r.kind.value == "rounding" and r.order == 2 for r in rep.results)
