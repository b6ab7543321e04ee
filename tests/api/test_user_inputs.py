"""What users pass to check/assert_gradients, and what comes back when nothing can be decided."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import GradientMismatch, NothingDecided, NumpyFunction, Status

X = np.array([0.3, -1.2, 0.7])


def _sin(jvp: bool = True, scale: float = 1.0) -> NumpyFunction:
    return NumpyFunction(np.sin, lambda a, c: (scale * c[0] * np.cos(a[0]),),
                         (lambda a, t: (np.cos(a[0]) * t[0],)) if jvp else None, name="sin")


# -- 1. never green on nothing -----------------------------------------------------------------


def test_all_nan_function_raises_nothing_decided_with_the_reason():
    f = NumpyFunction(lambda x: np.full_like(x, np.nan), lambda a, c: (np.zeros_like(a[0]),),
                      name="all_nan")
    report = gradcheck.check(f, X, backend="numpy")
    assert not report.failures and not report.passed  # nothing wrong shown, nothing decided
    with pytest.raises(NothingDecided) as info:  # ...and assert_gradients says so
        gradcheck.assert_gradients(f, X, backend="numpy")
    text = str(info.value)
    assert text.startswith("gradient check decided nothing: 1 checks: 1 inconclusive "
                           "(1 not decided)")
    assert "non-finite value(s) at the sample point" in text
    assert text.endswith("reproduce (a script, runs as printed):\n"
                         + info.value.report.results[0].reproducer)
    assert isinstance(info.value, GradientMismatch) and isinstance(info.value, AssertionError)
    assert info.value.report.decided == []


def test_forward_mode_without_a_forward_rule_raises_nothing_decided():
    with pytest.raises(NothingDecided) as info:
        gradcheck.assert_gradients(_sin(jvp=False), X, backend="numpy", modes=("fwd",))
    assert "[skipped]" in str(info.value) and "has no hand-derived jvp" in str(info.value)
    # the same function with its forward rule is decided and passes
    report = gradcheck.assert_gradients(_sin(), X, backend="numpy", modes=("fwd",))
    assert [r.status for r in report.decided] == [Status.PASSED]


def _jax_rule(name: str, scale: float = 1.0):
    """``jnp.sin`` or ``jnp.exp`` as a ``jax.custom_vjp`` whose hand-written rule is scaled by
    ``scale`` (1: correct)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    f, df = {"sin": (jnp.sin, jnp.cos), "exp": (jnp.exp, jnp.exp)}[name]

    @jax.custom_vjp
    def g(x):
        return f(x)

    g.defvjp(lambda x: (f(x), x), lambda x, ct: (scale * ct * df(x),))
    return g


def test_jax_custom_vjp_in_forward_mode_decides_nothing():
    f = _jax_rule("sin")
    with pytest.raises(NothingDecided, match="forward mode is not available"):
        gradcheck.assert_gradients(f, X, backend="jax", modes=("fwd",))
    gradcheck.assert_gradients(f, X, backend="jax", modes=("rev",))


def test_a_wrong_gradient_is_still_a_mismatch_not_nothing_decided():
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(_sin(scale=1.01), X, backend="numpy", modes=("rev",))
    assert not isinstance(info.value, NothingDecided)


def test_partly_decided_report_passes_and_counts_what_was_not_decided():
    # |x| has a kink at x = 0 at every element: that block is inconclusive, the other blocks
    # are decided (one kink among other elements is left out: numeric/kinks.py)
    f = NumpyFunction(lambda x, y: (np.abs(x), y ** 2),
                      lambda a, c: (c[0] * np.sign(a[0]), 2 * a[1] * c[1]),
                      lambda a, t: (np.sign(a[0]) * t[0], 2 * a[1] * t[1]), name="absq")
    report = gradcheck.assert_gradients(f, np.zeros(3), np.array([0.5, 1.5]),
                                        backend="numpy")
    n_undecided = len(report.undecided)
    assert n_undecided == 2 and len(report.decided) == len(report) - 2
    assert report.summary() == (f"{len(report)} checks: {len(report) - 2} passed, "
                                "2 inconclusive (2 not decided)")


# -- 4. complex values are rejected or reported, never left out silently -----------------------


def test_complex_input_is_rejected_where_the_backend_cannot_check_it_saying_what_to_do():
    with pytest.raises(gradcheck.InvalidArgument) as info:
        gradcheck.check(_sin(), X.astype(np.complex128), backend="numpy")
    text = str(info.value)
    assert "a NumpyFunction takes flat real arrays" in text
    assert "a complex one as its .real and .imag" in text


def test_complex_output_is_checked_as_its_real_and_imaginary_parts():
    torch = pytest.importorskip("torch")

    def both(x):
        return torch.sin(x), torch.exp(1j * x)

    report = gradcheck.assert_gradients(both, X, backend="torch", modes=("rev",))
    assert {r.path for r in report.results} == {"[0]", "[1].real", "[1].imag"}
    assert all(r.status is Status.PASSED for r in report.results)
    assert all("torch (conjugate Wirtinger)" in r.details["complex_convention"]
               for r in report.results)
    # where the backend declares no convention, a complex output is still a skip, not a gap
    only = NumpyFunction(lambda a: np.exp(1j * a), lambda a, c: (c[0],), name="cexp")
    with pytest.raises(NothingDecided, match="output 0 is complex"):
        gradcheck.assert_gradients(only, X, backend="numpy", modes=("rev",))


# -- 5. bfloat16 (ml_dtypes) is a floating dtype; float8 is refused clearly -----------------------


def test_jax_bfloat16_array_is_checked_in_bfloat16():
    good, bad = _jax_rule("sin"), _jax_rule("sin", 1.05)
    jnp = pytest.importorskip("jax").numpy
    x = jnp.asarray(X, dtype=jnp.bfloat16)
    assert np.asarray(x).dtype.name == "bfloat16"
    assert not np.issubdtype(np.asarray(x).dtype, np.floating)  # why it needs a helper
    report = gradcheck.assert_gradients(good, x, backend="jax", modes=("rev",))
    assert {r.dtype for r in report.results} == {"bfloat16"}
    assert {r.kind for r in report.decided} == {"vjp", "rounding"}
    with pytest.raises(GradientMismatch, match="VJP of output 0 w.r.t. input 0"):
        gradcheck.assert_gradients(bad, x, backend="jax", modes=("rev",))


def test_ml_dtypes_bfloat16_numpy_array_and_torch_bfloat16_tensor():
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for x in (X.astype(ml_dtypes.bfloat16), torch.tensor(X, dtype=torch.bfloat16)):
        report = gradcheck.assert_gradients(torch.sin, x, backend="torch", modes=("rev",))
        assert {r.dtype for r in report.results} == {"bfloat16"}
        assert "rounding" in {r.kind for r in report.decided}


def test_float8_input_is_an_invalid_argument_unless_a_dtype_is_given():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x8 = X.astype(ml_dtypes.float8_e4m3fn)
    with pytest.raises(gradcheck.InvalidArgument) as info:
        gradcheck.check(_sin(), x8, backend="numpy")
    assert str(info.value).startswith("inputs[0] has dtype float8_e4m3fn, which backend "
                                      "'numpy' cannot check (its dtypes: float64, float32, "
                                      "float16): pass dtype= one of those")
    report = gradcheck.assert_gradients(_sin(), x8, backend="numpy", dtype="float32",
                                        modes=("rev",))
    assert {r.dtype for r in report.results} == {"float32"}


# -- 6. the jax backend leaves the user's x64 setting alone --------------------------------------


_X64_SCRIPT = """
import numpy as np, jax, jax.numpy as jnp, gradcheck
{before}
x = np.linspace(-1.0, 1.0, 5)
report = gradcheck.check(jnp.sin, x, backend="jax")
assert report.passed and report.decided, report.summary()
assert {{r.dtype for r in report.results}} == {{"float64"}}
{after_check}
print(jax.config.jax_enable_x64, jnp.ones(2).dtype, jnp.asarray(x).dtype,
      jax.jit(lambda z: z * 2)(x).dtype)
"""

# the other ways a user reaches JAX through gradcheck: a catalog op (the reference modules),
# the semantic probes and an audit (the training hooks)
_X64_MORE = """
assert gradcheck.check(gradcheck.get_backend("jax").op("tanh"), x, backend="jax").passed
assert gradcheck.check_semantics("jax", probes=("accumulation",)).passed
params = {"w": jnp.ones(3)}
audit = gradcheck.audit(params, lambda p, b: jnp.sum(jnp.tanh(p["w"] * b)), jnp.ones(3),
                        backend="jax")
assert audit.passed, audit.summary()
"""


@pytest.mark.parametrize("before, more, after", [
    ("", "", "False float32 float32 float32"),
    ("jax.config.update('jax_enable_x64', True)", "", "True float64 float64 float64"),
    ("", _X64_MORE, "False float32 float32 float32"),
])
def test_jax_check_does_not_switch_x64_on_for_the_rest_of_the_process(before, more, after):
    pytest.importorskip("jax")
    out = _run_python(_X64_SCRIPT.format(before=before, after_check=more))
    assert out.strip().splitlines()[-1] == after


def _run_python(code: str, cwd: str | None = None, path: tuple[str, ...] = ()) -> str:
    """Run ``code`` in a fresh interpreter with this checkout importable; its stdout."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(gradcheck.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((*path, root)), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# -- 2. keyword arguments ------------------------------------------------------------------------


def test_kwargs_reach_every_evaluation_and_are_never_differentiated():
    torch = pytest.importorskip("torch")
    seen = []

    def softmax(x, dim, scale=1.0):
        seen.append((dim, scale))
        return torch.softmax(scale * x, dim=dim)

    x = np.random.default_rng(0).standard_normal((3, 4))
    report = gradcheck.assert_gradients(softmax, x, backend="torch",
                                        kwargs={"dim": 1, "scale": 2.0})
    assert len(seen) > 3 and set(seen) == {(1, 2.0)}
    assert all(r.input_index in (None, 0) for r in report.results)  # x is the only input
    assert "kwargs={'dim': 1, 'scale': 2.0}" in report.results[0].reproducer


def test_kwargs_change_what_is_checked_and_a_wrong_rule_under_them_is_caught():
    def forward(x, power=2):
        return x ** power

    def vjp(args, cts, power=2):
        return (cts[0] * 2 * args[0],)  # right for power=2 only

    f = NumpyFunction(forward, vjp, name="power")
    gradcheck.assert_gradients(f, X, backend="numpy", modes=("rev",), kwargs={"power": 2})
    with pytest.raises(GradientMismatch):
        gradcheck.assert_gradients(f, X, backend="numpy", modes=("rev",), kwargs={"power": 3})


def test_numpy_function_rules_receive_the_kwargs_at_order_2():
    def fwd(x, c=1.0):
        return c * x ** 3

    def vjp_fwd(x, g, c=1.0):
        return (3 * c * x ** 2 * g,)

    inner = NumpyFunction(vjp_fwd, lambda a, cts, c=1.0: (6 * c * a[0] * a[1] * cts[0],
                                                          3 * c * a[0] ** 2 * cts[0]),
                          name="vjp_cube")
    f = NumpyFunction(fwd, inner, name="cube")
    report = gradcheck.assert_gradients(f, X, backend="numpy", modes=("rev",), order=2,
                                        kwargs={"c": 2.5})
    assert "vjp_of_vjp" in {r.kind for r in report.decided}


def test_kwargs_must_be_a_mapping_of_names():
    with pytest.raises(gradcheck.InvalidArgument, match=r"kwargs=\[1\] must be a mapping"):
        gradcheck.check(_sin(), X, backend="numpy", kwargs=[1])


def test_the_same_kwargs_reuse_the_compiled_transforms():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f(x, axis):
        return jnp.cumsum(jnp.sin(x), axis=axis)

    be = gradcheck.get_backend("jax")
    x = np.random.default_rng(1).standard_normal((3, 4))
    gradcheck.assert_gradients(f, x, backend=be, kwargs={"axis": 1})
    builds = be._compiled.builds
    gradcheck.assert_gradients(f, x + 0.1, backend=be, kwargs={"axis": 1}, seed=4)
    assert be._compiled.builds == builds  # the same wrapper: nothing traced again


# -- 3. dict and pytree outputs are checked output by output, named by their path ----------------


def _paths(report):
    """The output paths of the first-order results (order 2 differentiates the VJP, whose
    outputs are the gradients)."""
    return sorted({r.details.get("output_path") for r in report.results
                   if r.output_index is not None and r.details.get("order") != 2},
                  key=str)


def test_torch_dict_and_nested_outputs_are_checked_leaf_by_leaf():
    torch = pytest.importorskip("torch")

    def f(x):
        return {"a": torch.sin(x), "b": (x ** 2, {"c": x.sum()})}

    x = np.random.default_rng(0).standard_normal((2, 3))
    report = gradcheck.assert_gradients(f, x, backend="torch", order=2)
    assert _paths(report) == ["['a']", "['b'][0]", "['b'][1]['c']"]
    subjects = {r.subject for r in report.decided}
    assert "VJP of output ['b'][1]['c'] w.r.t. input 0" in subjects
    assert "vjp_of_vjp" in {r.kind for r in report.decided}


def test_a_wrong_gradient_in_one_named_output_is_caught_and_named():
    torch = pytest.importorskip("torch")

    class Doubled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x

        @staticmethod
        def backward(ctx, g):
            return 2.1 * g  # wrong

    x = np.random.default_rng(0).standard_normal((2, 3))
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(lambda x: {"ok": torch.sin(x), "bad": Doubled.apply(x)}, x,
                                   backend="torch", modes=("rev",))
    [bad] = info.value.results
    assert bad.details["output_path"] == "['bad']" and bad.output_index == 1
    text = str(info.value)
    assert "* VJP of output ['bad'] w.r.t. input 0 [failed]" in text
    assert "    d output ['bad'][0, 0] / d input 0[0, 0]: 2.1 vs 2, " in text


def test_jax_pytree_outputs_are_checked_leaf_by_leaf():
    wrong_exp = _jax_rule("exp", 1.01)
    jnp = pytest.importorskip("jax").numpy

    def f(x):
        return {"loss": jnp.sum(x ** 2), "aux": [jnp.tanh(x), {"e": wrong_exp(x)}]}

    x = np.random.default_rng(2).standard_normal(4)
    report = gradcheck.check(f, x, backend="jax", modes=("rev",))
    assert _paths(report) == ["['aux'][0]", "['aux'][1]['e']", "['loss']"]
    assert [r.subject for r in report.failures] == ["VJP of output ['aux'][1]['e'] w.r.t. input 0"]
    assert len(report.decided) == 3


def test_a_flat_tuple_keeps_positional_output_names():
    torch = pytest.importorskip("torch")
    report = gradcheck.check(lambda x: (torch.sin(x), torch.cos(x)), X, backend="torch",
                             modes=("rev",))
    assert _paths(report) == [None]
    assert {r.subject for r in report.results} >= {"VJP of output 1 w.r.t. input 0"}


def test_equal_but_different_kwargs_get_different_wrappers():
    from gradcheck.api import _with_kwargs

    def f(x, s):
        return x * s

    assert _with_kwargs(f, {"s": 1}) is _with_kwargs(f, {"s": 1})
    assert _with_kwargs(f, {"s": 1}) is not _with_kwargs(f, {"s": True})
    assert _with_kwargs(f, {"s": True}).kwargs == {"s": True}
    assert _with_kwargs(f, {"s": np.ones(2)}) is not _with_kwargs(f, {"s": np.ones(2)})
