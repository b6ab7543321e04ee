"""The sweep's own resolution checks (gradcheck/sweep/resolution.py): each one finds a
deliberately wrong derivative where only it can see it (at 1e-300 or 1e300, a few ulps off in
float16/bfloat16 at order 1 and 2, in the subnormals, in a tiny forward-mode component next to
O(1) ones), and passes the correct op at the same point."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.stream import read_streams
from gradcheck.sweep import Op, SweepConfig, findings, sweep
from gradcheck.sweep.inventory import ELEMENTWISE
from gradcheck.sweep.resolution import ULP_BOUND, resolution_checks

torch = pytest.importorskip("torch")
pytest.importorskip("mpmath")

TINY = np.array([1e-300, -3e-250, 2e-190, -1e-100, 5e-20, 1e-17])
HUGE = np.array([1e300, -3e250, 2e190, -1e100, 5e20, 1e17])
SUBNORMAL = np.array([5e-324, -1e-320, 3e-315, -2e-310, 1e-309, -4e-312])
UNIT = np.array([0.3, -1.2, 0.7, 2.1, -0.4, 1.6])


def _op(name, fn, x, **kw):
    kw.setdefault("fwd", False)
    kw.setdefault("order2", False)
    return Op(name, "torch", fn, (x,), family=ELEMENTWISE, **kw)


def _failed(results, oracle=None):
    return [r for r in results if r.status.value == "failed"
            and (oracle is None or r.details.get("sweep_oracle") == oracle)]


def _clean(results):
    bad = [r.message for r in results if r.status.value in ("failed", "error")]
    return not bad, bad


def _function(forward, backward):
    """A torch autograd function of its inputs: ``forward(*xs)`` and ``backward(*xs, g)``
    (one gradient per input; a tuple for several)."""

    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *xs):
            ctx.save_for_backward(*xs)
            return forward(*xs)

        @staticmethod
        def backward(ctx, g):
            return backward(*ctx.saved_tensors, g)

    return F.apply


class _SinTiny:
    """sin whose backward doubles below 1e-200 (``wrong``) or is exact."""

    wrong = True
    apply = staticmethod(_function(torch.sin, lambda x, g: g * torch.cos(x) * (
        torch.where(x.abs() < 1e-200, 2.0, 1.0) if _SinTiny.wrong else 1.0)))


#: 2x whose backward is 3 above 1e200 (the mutant)
_twice_huge = _function(lambda x: 2 * x,
                        lambda x, g: g * torch.where(x.abs() > 1e200, 3.0, 2.0).to(g.dtype))


def test_components_below_the_underflow_bound_are_not_judged_in_a_flush_to_zero_engine():
    """XLA on CPU flushes subnormal results to zero: jax's forward mode gives 0 for a component
    (J u)_k of ~1e-308 (x near the smallest normal, u scaled by |x|) that NumPy's product of
    the reverse row and u keeps.  That is the dtype's absolute rounding below its smallest
    normal number, not a wrong rule: those components are not judged, the others are."""
    jax = pytest.importorskip("jax")
    x = np.array([2.2250738585072014e-308, -3.1e-308, 1e-300, 0.5])
    sin = Op("jax.numpy.sin", "jax", jax.numpy.sin, (x,), family=ELEMENTWISE, fwd=True,
             order2=False)
    ok, bad = _clean(resolution_checks(sin, (x,), "float64", 1, 7, ("rev", "fwd")))
    assert ok, bad
    # a rule off by 1e-6 (jax transposes the custom JVP into reverse mode too) is still
    # caught at the judged components
    wrong = Op("mutant.sin", "jax", _jax_sin_wrong_jvp(jax), (x,), family=ELEMENTWISE,
               fwd=True, order2=False)
    kinds = {r.kind.value for r in _failed(resolution_checks(wrong, (x,), "float64", 1, 7,
                                                             ("rev", "fwd")), "scaled")}
    assert {"jvp", "vjp"} <= kinds


def _jax_sin_wrong_jvp(jax):
    @jax.custom_jvp
    def f(x):
        return jax.numpy.sin(x)

    @f.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return jax.numpy.sin(x), jax.numpy.cos(x) * t * (1 + 1e-6)

    return f


def test_scaled_directions_judge_tiny_and_huge_inputs():
    _SinTiny.wrong = True
    mutant = resolution_checks(_op("mutant.sin", _SinTiny.apply, TINY, leaf="sin"), (TINY,),
                               "float64", 1, 5, ("rev",))
    assert _failed(mutant, "scaled") and _failed(mutant, "mpmath")
    _SinTiny.wrong = False
    twin = resolution_checks(_op("twin.sin", _SinTiny.apply, TINY, leaf="sin"), (TINY,),
                             "float64", 1, 5, ("rev",))
    ok, bad = _clean(twin)
    assert ok, bad
    assert any(r.status.value == "passed" and r.details["sweep_oracle"] == "scaled"
               for r in twin)  # judged, not abstained
    huge = resolution_checks(_op("mutant.twice", _twice_huge, HUGE), (HUGE,), "float64",
                             1, 5, ("rev",))
    worst = _failed(huge, "scaled")
    assert worst and worst[0].actual is not None and worst[0].expected is not None
    assert abs(worst[0].actual / worst[0].expected - 1.5) < 1e-9  # 3 instead of 2
    correct = resolution_checks(_op("twin.twice", lambda x: 2 * x, HUGE, fwd=True), (HUGE,),
                                "float64", 1, 5, ("rev", "fwd"))
    ok, bad = _clean(correct)
    assert ok and any(r.status.value == "passed" for r in correct), bad


def _erf_backward(x, g):
    d = 2 / np.sqrt(np.pi) * torch.exp(-x * x)
    return g * d * torch.where(x.abs() < 1e-305, 1.5, 1.0).to(d.dtype)


#: erf whose backward is 1.5x too large in the subnormals (FD cannot resolve there)
_erf_subnormal = _function(torch.special.erf, _erf_backward)


def test_mpmath_judges_the_subnormals():
    mutant = resolution_checks(_op("mutant.erf", _erf_subnormal, SUBNORMAL, leaf="erf"),
                               (SUBNORMAL,), "float64", 1, 3, ("rev",))
    assert _failed(mutant, "mpmath")
    twin = resolution_checks(_op("torch.special.erf", torch.special.erf, SUBNORMAL,
                                 leaf="erf", order2=True), (SUBNORMAL,), "float64", 1, 3,
                             ("rev",))
    ok, bad = _clean(twin)
    assert ok and any(r.details["sweep_oracle"] == "mpmath" and r.status.value == "passed"
                      for r in twin), bad


class _TripleFwd(torch.autograd.Function):
    """3x with a right backward and a forward-mode rule 10% off below 1e-200."""

    @staticmethod
    def forward(x):
        return 3 * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(inputs[0])
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        return 3 * g

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return t * torch.where(x.abs() < 1e-200, 3.3, 3.0).to(t.dtype)


def test_forward_vs_reverse_per_component_sees_a_tiny_component():
    x = np.array([1.0, 2.0, 1e-250, -0.5, 0.25, 3.0])
    mutant = resolution_checks(_op("mutant.triple", _TripleFwd.apply, x, fwd=True), (x,),
                               "float64", 1, 9, ("rev", "fwd"))
    kinds = {r.kind.value for r in _failed(mutant, "scaled")}
    assert "fwd_rev" in kinds and "jvp" in kinds and "vjp" not in kinds
    twin = resolution_checks(_op("twin.triple", lambda t: 3 * t, x, fwd=True), (x,),
                             "float64", 1, 9, ("rev", "fwd"))
    ok, bad = _clean(twin)
    assert ok, bad


def _ulps_off(dtype, order):
    """A factor ``1 + k eps(dtype)``: at order 1 ``k`` is twice the measured bound (8 ulps;
    the units are about an ulp there); at order 2, where a unit is 3-4 ulps at these points
    (the rounding of x and of y carried through the third derivative), four times it."""
    return 1 + 2 * order * ULP_BOUND[(dtype, order)] * {"float16": 2.0 ** -10,
                                                        "bfloat16": 2.0 ** -7}[dtype]


_LOW = (torch.float16, torch.bfloat16)


class _Off:
    """Factors (in float16/bfloat16 only: the float64 rule stays right) on sin's first
    derivative and, through the cos below, on its second."""

    first = 1.0
    second = 1.0


def _low(factor, g):
    return factor if g.dtype in _LOW else 1.0


#: cos whose backward (sin's second derivative) is ``_Off.second`` off in low precision
_cos_off = _function(torch.cos, lambda x, g: (-g.float() * torch.sin(x.float()) * _low(
    _Off.second, g)).to(g.dtype))
#: sin whose first derivative is ``_Off.first`` off in low precision (computed in float32 and
#: rounded: the right kernel is within half an ulp), its second by way of ``_cos_off``
_sin_off = _function(torch.sin, lambda x, g: (g.float() * torch.cos(x.float()) * _low(
    _Off.first, g)).to(g.dtype) if _Off.first != 1.0 else g * _cos_off(x))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_off_beyond_the_measured_bound_is_found_at_orders_1_and_2(dtype):
    low = UNIT.astype(np.float32)
    op = _op("mutant.sin", _sin_off, low, order2=True, leaf="sin")
    try:
        _Off.first = _ulps_off(dtype, 1)
        first = resolution_checks(op, (UNIT,), dtype, 1, 4, ("rev",))
        assert _failed(first, "ulp") and all(r.order == 1 for r in _failed(first))
        _Off.first, _Off.second = 1.0, _ulps_off(dtype, 2)
        second = resolution_checks(op, (UNIT,), dtype, 2, 4, ("rev",))
        assert _failed(second, "ulp") and all(r.order == 2 for r in _failed(second))
        _Off.second = 1.0
        right = resolution_checks(op, (UNIT,), dtype, 1, 4, ("rev",)) + resolution_checks(
            op, (UNIT,), dtype, 2, 4, ("rev",))
        ok, bad = _clean(right)
        assert ok and any(r.status.value == "passed" for r in right), bad
    finally:
        _Off.first, _Off.second = 1.0, 1.0
    native = _op("torch.sin", torch.sin, UNIT, order2=True, fwd=True, leaf="sin")
    both = resolution_checks(native, (UNIT,), dtype, 1, 4, ("rev", "fwd")) + \
        resolution_checks(native, (UNIT,), dtype, 2, 4, ("rev", "fwd"))
    ok, bad = _clean(both)
    assert ok, bad


def test_the_sweep_runs_the_resolution_checks_and_triages_them(tmp_path):
    _SinTiny.wrong = True
    try:
        op = _op("mutant.sin_tiny", _SinTiny.apply, UNIT.copy(), leaf="sin")
        outcome = sweep(SweepConfig((), profile="quick"), tmp_path, extra_ops=[op])
    finally:
        _SinTiny.wrong = False
    data = read_streams([outcome.stream])
    failed = [r for r in data.checks if r.status.value == "failed"]
    # wrong below 1e-200: at the tiny band and at exact zeros, nowhere else
    assert {r.details["sweep"]["point"] for r in failed} == {"tiny", "zero"}
    assert {"scaled", "mpmath"} <= {r.details["sweep"]["oracle"] for r in failed}
    classes = {f.cls for f in findings(data.checks) if f.op == "mutant.sin_tiny"}
    assert "confirmed" in classes and "false_alarm" not in classes


def test_scaled_rows_of_a_scalar_output():
    """A reduction to a 0-d output: its one row J^T e_0 (a 0-d cotangent of one) is compared,
    a backward 1.5x too large is flagged and the right one passes."""
    x = np.array([[0.3, -1.2, 0.7], [2.1, -0.4, 1.6]])
    right = _function(lambda t: (t * t).sum(), lambda t, g: 2 * g * t)
    wrong = _function(lambda t: (t * t).sum(), lambda t, g: 3 * g * t)
    ok = resolution_checks(Op("twin.sumsq", "torch", right, (x,)), (x,), "float64", 1, 2,
                           ("rev",))
    assert [r.status.value for r in ok] == ["passed"], [r.message for r in ok]
    bad = resolution_checks(Op("mutant.sumsq", "torch", wrong, (x,)), (x,), "float64", 1, 2,
                            ("rev",))
    assert _failed(bad, "scaled")


def test_elementwise_in_fact_is_not_fooled_by_a_transpose_or_an_underflowing_softmax():
    """A square transpose fixes its first and last elements; a softmax at large logits moves
    the other probabilities of a row only where they did not underflow.  Taken for
    elementwise, the scaled check compared their components with one VJP of ones (a false
    alarm); a true elementwise op still takes the shortcut."""
    from gradcheck.backends.registry import get_backend
    from gradcheck.sweep.resolution import diagonal

    be = get_backend("torch")
    square = np.arange(16.0).reshape(4, 4) / 7 - 1
    logits = np.array([[1e4, -1e3, 100.0, -10.0], [10.0, -10.0, 1e3 - 1e3, -100.0]])
    for fn, x in ((torch.t, square), (lambda t: torch.softmax(t, -1), logits)):
        op = Op("shape.keeper", "torch", fn, (x,), family=ELEMENTWISE)
        assert not diagonal(be, op, (x,), be.evaluate(fn, [x], "cpu"))
        ok, bad = _clean(resolution_checks(op, (x,), "float64", 1, 3, ("rev",)))
        assert ok, bad
    sin = Op("torch.sin", "torch", torch.sin, (square,), family=ELEMENTWISE)
    assert diagonal(be, sin, (square,), be.evaluate(torch.sin, [square], "cpu"))


def test_mpmath_does_not_judge_a_derivative_that_underflows_in_float64():
    """exp'(-720) = 2.0e-313 is subnormal; XLA flushes it to 0 on CPU.  That is the absolute
    rounding below the smallest normal number, not a wrong rule: the element is not judged
    (without the underflow term the check failed it), the others are."""
    jax = pytest.importorskip("jax")
    x = np.array([-720.0, -0.5, 0.25, 1.5])
    op = Op("jax.numpy.exp", "jax", jax.numpy.exp, (x,), family=ELEMENTWISE, fwd=False,
            order2=False, leaf="exp")
    results = [r for r in resolution_checks(op, (x,), "float64", 1, 5, ("rev",))
               if r.details.get("sweep_oracle") == "mpmath"]
    assert results and all(r.status.value == "passed" for r in results), results
    assert "(3 of 4 judged)" in results[0].message


def _minimum(scale: float = 1.0):
    """torch.minimum with its own backward: the true rule (the smaller input's side, ``x`` at
    a tie), or ``d/dx`` times ``scale`` where ``x < y`` (wrong off the ties)."""

    def backward(x, y, g):
        pick = x <= y
        return (torch.where(pick, g, 0.0) * torch.where(x < y, scale, 1.0),
                torch.where(pick, 0.0, g))

    return _function(torch.minimum, backward)


def test_a_tie_is_a_kink_the_scaled_check_does_not_judge():
    """At a tie of ``min(x, y)`` the central difference along a direction that moves ``x``
    and ``y`` differently averages the two sides; the one-sided differences stay apart as the
    step shrinks, so those components are not judged (the tiny band's broadcast inputs share
    values: ``torch.clamp_max`` had 12 ties in 500 elements).  Off the ties the check still
    judges, and a rule wrong there still fails."""
    x = np.array([1e-200, 3e-120, -2e-50, 0.5, 1e-17, -4e-300])
    y = np.array([1e-200, 1e-121, -2e-50, 0.7, 2e-17, -4e-300])  # ties at 0, 2 and 5
    two = (x, y)

    def op(name, fn):
        return Op(name, "torch", fn, two, family=ELEMENTWISE, fwd=False, order2=False)

    right = resolution_checks(op("twin.minimum", _minimum()), two, "float64", 1, 5, ("rev",))
    ok, bad = _clean(right)
    assert ok, bad
    scaled = [r for r in right if r.details.get("sweep_oracle") == "scaled"]
    assert scaled and scaled[0].status.value == "passed"
    assert scaled[0].details["components"] == 3  # the three ties are not judged
    wrong = resolution_checks(op("mutant.minimum", _minimum(1 + 1e-6)), two, "float64", 1, 5,
                              ("rev",))
    assert _failed(wrong, "scaled")


def test_a_derivative_below_the_smallest_normal_number_is_not_judged():
    """rsqrt' at 3e303 is -3e-456: not representable in float64, so AD gives 0 while (J u)_k
    = f' u_k, with u scaled by |x|, is 2e-152, which the FD resolves.  The derivative's own
    rounding (TINY64 |u_k|) covers it; the O(1) elements are still judged, and a rule off by
    1e-6 there still fails."""
    x = np.array([3.2e303, 2.4, 0.7, 1.8e307, 5.0])

    def rsqrt(scale):
        return _function(torch.rsqrt, lambda z, g: g * -0.5 * z ** -1.5 * scale)

    right = resolution_checks(_op("twin.rsqrt", rsqrt(1.0), x), (x,), "float64", 1, 5,
                              ("rev",))
    ok, bad = _clean(right)
    assert ok, bad
    scaled = [r for r in right if r.details.get("sweep_oracle") == "scaled"]
    assert scaled and scaled[0].details["components"] == 3
    wrong = resolution_checks(_op("mutant.rsqrt", rsqrt(1 + 1e-6), x), (x,), "float64", 1, 5,
                              ("rev",))
    assert _failed(wrong, "scaled")


def test_components_where_the_op_itself_is_inexact_are_not_judged():
    """torch's gelu in the left tail is computed from ``1 + erf(x / sqrt 2)``: at -8.3 its
    value is 9% off (and its derivative 0.1%), so a scaled FD of it there is off the true
    derivative while reverse mode is right.  Where the op has an mpmath counterpart whose
    value it misses, the component is not judged (the message says how many); the O(1)
    elements still are, and a backward off by 1e-6 there still fails."""
    x = np.array([-8.302175681319747, -9.111627561154895, 0.3, -1.2, 0.7, 2.1])

    def gelu(scale):
        def backward(z, g):
            cdf = 0.5 * torch.special.erfc(-z / 2 ** 0.5)
            pdf = torch.exp(-z * z / 2) / (2 * torch.pi) ** 0.5
            return g * (cdf + z * pdf) * torch.where(z.abs() < 3, scale, 1.0)

        return _function(torch.nn.functional.gelu, backward)

    for order in (1, 2):
        right = resolution_checks(_op("twin.gelu", torch.nn.functional.gelu, x, leaf="gelu",
                                      order2=order == 2), (x,), "float64", order, 5, ("rev",))
        ok, bad = _clean(right)
        assert ok, bad
        scaled = [r for r in right if r.details.get("sweep_oracle") == "scaled"][0]
        assert scaled.status.value == "passed" and "not judged" in scaled.message
    wrong = resolution_checks(_op("mutant.gelu", gelu(1 + 1e-6), x, leaf="gelu"), (x,),
                              "float64", 1, 5, ("rev",))
    assert _failed(wrong, "scaled")


def test_differences_of_values_below_the_smallest_normal_number_resolve_nothing_there():
    """An engine that flushes subnormal results to zero (or an intermediate that underflows)
    gives 0 for exp(50 x) = 7.3e-309 at x = -14.19 and at its neighbours, so every difference
    there is 0 while the true (J u)_k, about 5e-306, is a normal number that reverse mode
    gets right.  Each value's absolute rounding of up to the smallest normal number, divided
    by the step, is part of the FD error, which the component's 0 is judged with; a backward
    off by 1e-6 at the O(1) elements still fails."""
    tiny = float(np.finfo(np.float64).tiny)
    x = np.array([-709.5 / 50, 0.3, -1.2, 0.2])

    def flushed(scale):
        def forward(z):
            y = torch.exp(50 * z)
            return torch.where(y < tiny, 0.0, y)

        return _function(forward, lambda z, g: g * 50 * torch.exp(50 * z) * torch.where(
            z.abs() < 3, scale, 1.0))

    right = resolution_checks(_op("twin.exp", flushed(1.0), x), (x,), "float64", 1, 5,
                              ("rev",))
    ok, bad = _clean(right)
    assert ok, bad
    assert right[0].status.value == "passed" and right[0].details["components"] == 4
    wrong = resolution_checks(_op("mutant.exp", flushed(1 + 1e-6), x), (x,), "float64", 1, 5,
                              ("rev",))
    assert _failed(wrong, "scaled")


def _pairs_of_eigvals(scale: float = 1.0):
    """torch.linalg.eigvals as real pairs (the imaginary parts of real eigenvalues are exactly
    0), its backward the true one times ``scale``."""

    def eig(a):
        return torch.view_as_real(torch.linalg.eigvals(a)).reshape(-1)

    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return eig(a)

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return torch.func.vjp(eig, a)[1](g)[0] * scale

    return F.apply


def test_a_decomposition_is_judged_normwise():
    """A real eigenvalue's imaginary part is exactly 0, so every FD of it is 0, while reverse
    mode computes it through the eigenvectors and gives rounding of 1e-16 there; its own row
    allows nothing (terms 0).  A decomposition's derivative is accurate normwise: each
    component is allowed the rounding of the largest of its output.  A backward off by 1e-6
    still fails."""
    from gradcheck.sweep.inventory import LINALG

    a = np.random.default_rng(3).normal(size=(5, 5))  # 3 real eigenvalues, a complex pair

    def op(name, fn):
        return Op(name, "torch", fn, (a,), family=LINALG, fwd=False, order2=False)

    right = resolution_checks(op("twin.eigvals", _pairs_of_eigvals()), (a,), "float64", 1, 5,
                              ("rev",))
    ok, bad = _clean(right)
    assert ok, bad
    wrong = resolution_checks(op("mutant.eigvals", _pairs_of_eigvals(1 + 1e-6)), (a,),
                              "float64", 1, 5, ("rev",))
    assert _failed(wrong, "scaled")


def _cumprod(delta: float = 0.0):
    """cumprod along the only axis with its own backward (explicit products, right at zeros)
    times ``1 + delta x``, whose own derivative the double backward drops (``x`` detached):
    exact at order 1 at x = 0, its second derivative off by ``delta`` there."""

    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.cumprod(x, 0)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            n = len(x)
            rows = [torch.stack([torch.prod(torch.cat([x[:j], x[j + 1:k + 1]])) if k >= j
                                 else x.new_zeros(()) for k in range(n)]) for j in range(n)]
            return (torch.stack(rows) @ g) * (1 + delta * x.detach())

    return F.apply


def test_order_2_is_judged_by_the_derivative_s_own_structure():
    """At all zeros cumprod looks elementwise (each output moves only with its own element),
    but its gradient does not (its element 0 moves with element 1): the second derivative's
    rows are not one VJP of ones.  Judged as elementwise it failed by 4 (a false alarm); now
    the twin passes and a double backward off by 1e-6 relative fails."""
    x = np.zeros(6)

    def op(name, fn):
        return Op(name, "torch", fn, (x,), family=ELEMENTWISE, fwd=False, order2=True)

    right = resolution_checks(op("twin.cumprod", _cumprod()), (x,), "float64", 2, 5, ("rev",))
    ok, bad = _clean(right)
    assert ok, bad
    wrong = resolution_checks(op("mutant.cumprod", _cumprod(1e-6)), (x,), "float64", 2, 5,
                              ("rev",))
    assert _failed(wrong, "scaled")


def test_a_second_derivative_that_overflows_float64_is_not_judged():
    """logit''(1e-209) = -1e418 overflows float64 (torch gives nan there), while (J u)_k =
    f'' u_k with u scaled by |x| is 4e208, which the FD resolves: no float64 rule can give
    the entry, so the component is not judged; the O(1) elements are, and a double backward
    that drops a 1e-6 relative term there fails."""
    x = np.array([1e-209, 0.3, 0.6, 0.45])

    def logit(delta):
        return _function(torch.logit, lambda z, g: g / (z * (1 - z)) * (1 + delta * z.detach()))

    def op(name, fn):
        return Op(name, "torch", fn, (x,), family=ELEMENTWISE, fwd=False, order2=True)

    right = resolution_checks(op("twin.logit", logit(0.0)), (x,), "float64", 2, 5, ("rev",))
    ok, bad = _clean(right)
    assert ok, bad
    assert right[0].details["components"] == 3
    wrong = resolution_checks(op("mutant.logit", logit(1e-6)), (x,), "float64", 2, 5,
                              ("rev",))
    assert _failed(wrong, "scaled")


def test_a_running_maximum_of_few_elements_is_not_taken_for_elementwise():
    """jax's cummax on 4 elements, the second the running maximum of three outputs: moving
    the first, the middle and the last element and three random halves never moved it apart
    from the outputs it sets, so its column sum (3) was compared as its derivative (1).  Few
    elements are moved one at a time; a real elementwise op still is one."""
    from gradcheck.backends.registry import get_backend
    from gradcheck.sweep.resolution import diagonal

    x = np.array([0.3, 0.9, 0.2, 0.5])
    backend = get_backend("torch")

    def op(name, fn):
        return Op(name, "torch", fn, (x,), family=ELEMENTWISE, fwd=False, order2=False)

    cummax = op("torch.cummax", lambda t: torch.cummax(t, 0).values)
    assert not diagonal(backend, cummax, [x], backend.evaluate(cummax.fn, [x], "cpu"))
    sin = op("torch.sin", torch.sin)
    assert diagonal(backend, sin, [x], backend.evaluate(sin.fn, [x], "cpu"))
    ok, bad = _clean(resolution_checks(cummax, (x,), "float64", 1, 5, ("rev",)))
    assert ok, bad
