"""The ``kernel_ulp`` check (issue 35, miss class d; docs/error-model.md section 4c): each
elementwise kernel a function runs in float32/float16/bfloat16 is judged on its own inputs
against the same op in float64, correctly rounded, within a float32 computation's error.

Mutants: torch custom kernels (``torch.library.custom_op`` tagged pointwise, opaque to the
tracer like a compiled extension) whose low-precision result is 1 or 2 ulps off the correctly
rounded value, in the forward and in the backward; a float32 kernel a few ulps off.  Twins: the
same kernels correctly rounded, and composite user functions (tanh and its backward
``1 - y^2``, softplus, ``x sigmoid(x)``, a layer norm with reductions, ``exp(x) - 1`` near 0),
whose whole chains are many ulps from the correctly rounded float64 value while every kernel
is right: they pass.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradcheck
from gradcheck.backends.kernels import KernelCall, KernelTrace
from gradcheck.core.results import Status
from gradcheck.numeric import kernel_ulps
from gradcheck.numeric.resolution import Subject

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")

TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
CAST = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
X = np.array([0.3, -1.2, 0.7, 2.1, -0.4, 1.6])


def _up(y, k):
    """``y`` moved ``k`` numbers of its dtype up (or down for negative ``k``)."""
    to = torch.full_like(y, float("inf") if k > 0 else float("-inf"))
    for _ in range(abs(k)):
        y = torch.nextafter(y, to)
    return y


def _opmath(x):
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


_COUNT = [0]


def custom_sin(forward_off=0, backward_off=0):
    """``sin`` as a custom kernel: computed in float32 (float64 in float64) and rounded once,
    then moved ``forward_off`` ulps below float64; its backward ``g * cos(x)``, ``cos`` a
    custom kernel moved ``backward_off`` ulps."""
    _COUNT[0] += 1
    ns = f"gc_kernel_ulps_{_COUNT[0]}"

    @torch.library.custom_op(f"{ns}::cos", mutates_args=(), tags=(torch.Tag.pointwise,))
    def cos(x: torch.Tensor) -> torch.Tensor:
        y = torch.cos(_opmath(x)).to(x.dtype)
        return _up(y, backward_off) if x.dtype != torch.float64 else y

    @torch.library.custom_op(f"{ns}::sin", mutates_args=(), tags=(torch.Tag.pointwise,))
    def sin(x: torch.Tensor) -> torch.Tensor:
        y = torch.sin(_opmath(x)).to(x.dtype)
        return _up(y, forward_off) if x.dtype != torch.float64 else y

    cos.register_fake(torch.empty_like)
    sin.register_fake(torch.empty_like)

    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * cos(x)

    sin.register_autograd(backward, setup_context=setup)
    return sin


def check(fn, x, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # reverse mode: a custom op without a forward-mode rule has no JVP to compare
        return gradcheck.check(fn, x, backend="torch", modes=("rev",), **kw)


def kernel_failures(report):
    return [r for r in report.results
            if r.status is Status.FAILED and r.details.get("per_component") == "kernel_ulp"]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("ulps", [1, 2])
@pytest.mark.parametrize("where", ["forward", "backward"])
def test_a_kernel_1_or_2_ulps_off_is_caught_and_its_twin_passes(dtype, ulps, where):
    x = X.astype(CAST[dtype])
    off = custom_sin(**{f"{where}_off": ulps})
    bad = check(off, x)
    failed = kernel_failures(bad)
    assert failed, [r.message for r in bad.results]
    r = failed[0]
    assert r.kind.value == "rounding" and r.order == 1
    assert r.details["op"].endswith(("::sin", ".sin.default") if where == "forward"
                                    else ("::cos", ".cos.default"))
    assert r.details["node"] == ("forward" if where == "forward" else "BackwardCFunction") \
        or where == "backward"
    assert abs(r.details["ulps"]) == ulps
    assert r.details["kernel_dtype"] == dtype
    assert "correctly rounded" in r.message and "reproduce: torch.ops." in r.message
    assert r.discrepancy_ratio > 1
    good = check(custom_sin(), x)
    assert good.passed, gradcheck.format_failure(good)
    assert not kernel_failures(good)


def test_the_whole_chain_check_cannot_see_one_ulp():
    """The ``ulp`` check of the whole derivative (ULP_BOUND units) passes the 1-ulp mutant:
    only the kernel judgement catches it."""
    x = X.astype(ml_dtypes.bfloat16)
    rep = check(custom_sin(backward_off=1), x)
    failed = [r for r in rep.results if r.status is Status.FAILED]
    assert [r.details.get("per_component") for r in failed] == ["kernel_ulp"]


def test_a_float32_kernel_some_ulps_off_is_caught():
    """float32: the allowance is the float32 kernel's own error, 4 eps32 of
    ``|f| + |x f'|`` (about 5 ulps of exp near 0.1); 8 ulps off is caught."""
    x = np.array([0.05, 0.1, 0.15, 0.2], dtype=np.float32)
    _COUNT[0] += 1

    def make(off):
        @torch.library.custom_op(f"gc_kernel_ulps_{_COUNT[0]}_{off}::exp", mutates_args=(),
                                 tags=(torch.Tag.pointwise,))
        def exp(x: torch.Tensor) -> torch.Tensor:
            y = torch.exp(x)
            return _up(y, off) if x.dtype == torch.float32 else y

        exp.register_fake(torch.empty_like)
        exp.register_autograd(lambda ctx, g: g * ctx.y,
                              setup_context=lambda ctx, inputs, output: setattr(ctx, "y",
                                                                                output))
        return exp

    bad = check(make(8), x)
    failed = kernel_failures(bad)
    assert failed and failed[0].details["ulps"] == 8, [r.message for r in bad.results]
    good = check(make(0), x)
    assert good.passed and not kernel_failures(good)


COMPOSITES = {
    "tanh": torch.tanh,
    "softplus": torch.nn.functional.softplus,
    "silu": lambda t: t * torch.sigmoid(t),
    "layer_norm": lambda t: (t - t.mean()) / torch.sqrt(((t - t.mean()) ** 2).mean() + 1e-5),
    "expm1": lambda t: torch.exp(t) - 1,
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_correct_composites_pass_with_every_kernel_judged(dtype, name):
    """Every kernel passes, or fails only as a kernel of torch's own table of kernels measured
    off (``x sigmoid(x)``'s backward runs ``sigmoid_backward``, 1-2 ulps off in float16)."""
    fn = COMPOSITES[name]
    x = (X * (1e-3 if name == "expm1" else 1)).astype(CAST[dtype])
    verdicts = kernel_ulps.kernel_checks(Subject(_backend(), fn), [x.astype(np.float64)],
                                         dtype, 1, 0, ("rev", "fwd"))
    assert [v.extra["kernel_path"] for v in verdicts] == ["forward", "reverse mode", "forward mode"]
    for v in verdicts:
        assert v.status is Status.PASSED or "known" in v.extra, v.message("kernel_ulp")
        assert v.judged > 0
    if name == "layer_norm":  # the reductions are named, not judged
        assert any("aten.mean" in n or "aten.sum" in n for n in verdicts[0].extra["not_judged"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = gradcheck.check(fn, x, backend="torch")
    new = [r.message for r in kernel_failures(rep) if not r.known]
    assert not new, new


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_order_2_of_a_correct_composite_passes(dtype):
    x = X.astype(CAST[dtype])
    verdicts = kernel_ulps.kernel_checks(Subject(_backend(), torch.tanh),
                                         [x.astype(np.float64)], dtype, 2, 0, ("rev", "fwd"))
    assert [v.extra["kernel_path"] for v in verdicts] == ["reverse-over-reverse",
                                                   "forward-over-reverse"]
    assert all(v.status is Status.PASSED for v in verdicts), [v.message("k") for v in verdicts]


def _backend():
    from gradcheck.backends.registry import get_backend

    return get_backend("torch")


# -- the judgement on synthetic kernel calls ----------------------------------------------------

def _call(got, exact, terms=None, dtype="bfloat16", second=None):
    got, exact = np.atleast_1d(np.asarray(got, float)), np.atleast_1d(np.asarray(exact, float))
    terms = np.abs(exact) if terms is None else np.atleast_1d(np.asarray(terms, float))
    return KernelCall("op", "forward", dtype, got, exact, terms, np.zeros_like(exact),
                      np.zeros_like(exact) if second is None else np.atleast_1d(second))


def test_either_neighbour_passes_where_the_exact_value_is_within_the_allowance_of_a_midpoint():
    lo, hi = 1.0, 1.0 + 2.0 ** -7  # neighbours in bfloat16
    mid = (lo + hi) / 2
    near = mid - 2.0 ** -24  # within 4 eps32 of the midpoint, on lo's side
    for got in (lo, hi):
        j = kernel_ulps.judge(_call(got, near))
        assert j.judged[0] and j.ratio[0] <= 1
    far = mid - 2.0 ** -12  # far from the midpoint: only lo is right
    assert kernel_ulps.judge(_call(lo, far)).ratio[0] <= 1
    assert kernel_ulps.judge(_call(hi, far)).ratio[0] > 1


def test_nan_fails_infinities_need_their_rounding_and_poles_are_not_judged():
    assert np.isinf(kernel_ulps.judge(_call(np.nan, 1.0)).ratio[0])
    assert not kernel_ulps.judge(_call(np.nan, np.nan)).judged[0]
    big = float(np.finfo(np.float16).max)
    assert kernel_ulps.judge(_call(np.inf, 1e6, dtype="float16")).ratio[0] == 0  # overflows
    assert np.isinf(kernel_ulps.judge(_call(np.inf, big / 2, dtype="float16")).ratio[0])
    # a second difference far above the first: float64's own value is no reference
    assert not kernel_ulps.judge(_call(1.3e15, 6.6e32, second=6.6e32)).judged[0]


def test_ulps_between_counts_representable_numbers_across_zero():
    assert kernel_ulps.ulps_between(np.array([1.0 + 2 ** -6]), np.array([1.0]), "bfloat16")[0] \
        == 2
    tiny = float(np.finfo(np.float16).smallest_subnormal)
    assert kernel_ulps.ulps_between(np.array([tiny]), np.array([-tiny]), "float16")[0] == 2


def test_a_verdict_names_what_it_did_not_judge():
    v = kernel_ulps.verdict(KernelTrace((_call(1.0, 1.0),), (("aten.sum.default", 2),)),
                            "forward", 1, "bfloat16")
    assert v.status is Status.PASSED and "aten.sum.default x2" in v.what


def test_an_adapter_that_cannot_trace_kernels_gives_no_verdict():
    from gradcheck.backends.registry import get_backend

    numpy_backend = get_backend("numpy")
    assert numpy_backend.trace_kernels(lambda: None) is None
    assert kernel_ulps.kernel_checks(Subject(numpy_backend, np.sin), [X], "float32", 1, 0,
                                     ("rev",)) == []


# -- jax: the jaxpr interpreted equation by equation ---------------------------------------------

JAX_COMPOSITES = ["tanh", "softplus", "silu", "layer_norm", "expm1"]


def _jax_fn(name):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    return {"tanh": jnp.tanh, "softplus": jax.nn.softplus,
            "silu": lambda t: t * jax.nn.sigmoid(t),
            "layer_norm": lambda t: (t - t.mean()) / jnp.sqrt(((t - t.mean()) ** 2).mean()
                                                              + 1e-5),
            "expm1": lambda t: jnp.exp(t) - 1}[name]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("name", JAX_COMPOSITES)
def test_jax_correct_composites_pass_with_every_kernel_judged(dtype, name):
    """Every kernel passes, or fails only as a kernel of jax's own table of kernels measured
    off (XLA's float16 ``div`` is 1 ulp off at -0.2166 / 1.121 in the layer norm, its
    ``logistic`` in ``x sigmoid(x)``)."""
    from gradcheck.backends.registry import get_backend

    x = X * (1e-3 if name == "expm1" else 1)
    verdicts = kernel_ulps.kernel_checks(Subject(get_backend("jax"), _jax_fn(name)), [x], dtype,
                                         1, 0, ("rev", "fwd"))
    assert [v.extra["kernel_path"] for v in verdicts] == ["forward", "reverse mode", "forward mode"]
    for v in verdicts:
        assert v.status is Status.PASSED or "known" in v.extra, v.message("kernel_ulp")
        assert v.judged > 0 and all(k.startswith("lax.") for k in v.extra["kernels"])


def test_jax_a_kernel_off_is_caught_with_its_reproducer():
    """XLA's bfloat16 ``exp2`` (in jax's table of kernels measured off) is 77 ulps low at 117.5
    (1.506e35, correctly rounded 2.350e35), a real kernel defect on jax 0.10.2's CPU: ``check``
    catches it at its point as that known finding (J20), and a function without it passes."""
    jax = pytest.importorskip("jax")

    x = np.array([117.5, 1.0, -2.0]).astype(ml_dtypes.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bad = gradcheck.check(jax.numpy.exp2, x, backend="jax")
        good = gradcheck.check(lambda t: jax.numpy.exp(t * 0.5), x, backend="jax")
    failed = kernel_failures(bad)
    assert failed, [r.message for r in bad.results]
    r = failed[0]
    assert r.details["op"] == "lax.exp2" and r.details["operands"] == [117.5]
    assert r.details["ulps"] < -1 and r.details["reproducer"].startswith("jax.lax.exp2_p.bind(")
    assert r.known and "J20" in r.known_as.reason and "known: " in r.message
    assert not kernel_failures(good)


def test_torch_a_known_kernel_off_fails_as_its_finding_and_its_twin_passes():
    """torch's bfloat16 ``rsqrt`` on one element gives 0.4609375 at 4.75 where 0.458984375 is
    correctly rounded (T22): caught at that point as the known finding, with the kernel, the
    ulps and where it is recorded; at 4.0 (exact 0.5) and as ``1 / sqrt`` it passes."""
    x = np.array([4.75])
    bad = check(torch.rsqrt, x, dtype="bfloat16")
    failed = kernel_failures(bad)
    assert len(failed) == 1 and failed[0].known, [r.message for r in bad.results]
    r = failed[0]
    assert r.details["op"] == "aten.rsqrt.default" and r.details["ulps"] == 1
    assert "T22" in r.known_as.reason and r.known_as.nature == "bug"
    assert not bad.passed  # the user is told: the computed value is off, and why
    assert not kernel_failures(check(torch.rsqrt, np.array([4.0]), dtype="bfloat16"))
    assert not kernel_failures(check(lambda t: 1 / torch.sqrt(t), x, dtype="bfloat16"))


def test_a_new_kernel_defect_is_not_hidden_behind_a_known_one():
    """A function running torch's bfloat16 ``rsqrt`` where it is off (known, T22) and a custom
    kernel 2 ulps off (new): the verdict fails on the new one, without a known mark."""
    sin = custom_sin(forward_off=2)
    x = np.array([4.75])
    report = check(lambda t: torch.rsqrt(t) + sin(t), x, dtype="bfloat16")
    failed = kernel_failures(report)
    assert failed and not failed[0].known and "gc_kernel_ulps" in failed[0].details["op"]
    alone = kernel_failures(check(lambda t: torch.rsqrt(t) + torch.sin(t), x,
                                  dtype="bfloat16"))
    assert alone and all(r.known for r in alone)


def test_kernels_beyond_the_element_budget_are_named_not_judged(monkeypatch):
    from gradcheck.backends.kernels import OVER_BUDGET
    from gradcheck.engines.torch import kernels as torch_kernels

    monkeypatch.setattr(torch_kernels, "ELEMENT_BUDGET", 4)
    v = kernel_ulps.kernel_checks(Subject(_backend(), lambda t: torch.tanh(t) * 2 + 1), [X],
                                  "bfloat16", 1, 0, ("rev",))[0]
    assert v.judged == 6 and f"{OVER_BUDGET} x2" in v.extra["not_judged"]


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp", "checkpoint"])
def test_jax_rules_and_call_bodies_are_judged_primitive_by_primitive(kind):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from gradcheck.backends.registry import get_backend

    if kind == "custom_jvp":
        fn = jax.custom_jvp(jnp.sin)
        fn.defjvp(lambda p, t: (jnp.sin(p[0]), jnp.cos(p[0]) * t[0]))
    elif kind == "custom_vjp":
        fn = jax.custom_vjp(jnp.sin)
        fn.defvjp(lambda x: (jnp.sin(x), x), lambda x, ct: (ct * jnp.cos(x),))
    else:
        fn = jax.checkpoint(lambda t: jnp.tanh(t) * 2)
    v = kernel_ulps.kernel_checks(Subject(get_backend("jax"), fn), [X], "bfloat16", 1, 0,
                                  ("rev",))
    assert [x.status for x in v] == [Status.PASSED, Status.PASSED]
    assert "lax.sin" in v[0].extra["kernels"] or "lax.tanh" in v[0].extra["kernels"]
    assert {"lax.cos", "lax.tanh"} & set(v[1].extra["kernels"])
