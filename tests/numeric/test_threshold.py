"""Detection threshold: a custom op whose backward is scaled by ``1 + delta`` is caught for
``delta >= 1e-7`` in float64 and ``delta >= 1e-4`` in float32, and correct programs pass.

For scale: ``torch.autograd.gradcheck`` passes ``delta = 1e-3``, ``jax.test_util.check_grads``
passes ``delta = 1e-5`` (``benchmarks/detection_threshold.py`` prints the table).

float32 is shown both ways: a mutant wrong in every dtype is caught by the rule check (which runs
in float64 at the float32 point), and a mutant wrong *only* in float32 (correct float64 rule) can
only be caught by the low-precision rounding check - and is.

False positives: 1000 random smooth programs per dtype (random shapes, random compositions of
smooth elementwise ops, constant matmuls, input matmuls and broadcast biases; seeds 0..999,
regenerable with ``benchmarks.random_programs.random_program(seed)``), each with hand-written
derivatives, must all pass.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from benchmarks import random_programs as rp
from gradcheck import NumpyFunction

DELTAS_64 = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
DELTAS_32 = (1e-2, 1e-3, 1e-4)
FP_SEEDS = 1000
FP_CHUNKS = 4


def _scale(delta: float, only: str | None, dtype_name: str) -> float:
    return 1.0 + delta if only is None or dtype_name == only else 1.0


# -- the custom op: y = x sin(x) with a hand-written backward, per backend ------------------------


def numpy_xsin(delta: float = 0.0, only: str | None = None) -> NumpyFunction:
    def vjp(a, c):
        x = a[0]
        s = x.dtype.type(_scale(delta, only, x.dtype.name))
        return (c[0] * (np.sin(x) + x * np.cos(x)) * s,)

    return NumpyFunction(lambda x: x * np.sin(x), vjp,
                         lambda a, t: (t[0] * (np.sin(a[0]) + a[0] * np.cos(a[0])),), name="xsin")


def numpy_layer(delta: float = 0.0, only: str | None = None) -> NumpyFunction:
    """``tanh(x @ w)`` for two inputs: a dense layer with a hand-written backward."""

    def vjp(a, c):
        x, w = a
        y = np.tanh(x @ w)
        g = c[0] * (1 - y * y)
        s = x.dtype.type(_scale(delta, only, x.dtype.name))
        return (g @ w.T) * s, (x.T @ g) * s

    def jvp(a, t):
        y = np.tanh(a[0] @ a[1])
        return ((1 - y * y) * (t[0] @ a[1] + a[0] @ t[1]),)

    return NumpyFunction(lambda x, w: np.tanh(x @ w), vjp, jvp, name="layer")


def torch_xsin(delta: float = 0.0, only: str | None = None):
    torch = pytest.importorskip("torch")

    class XSin(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x * torch.sin(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            name = str(x.dtype).removeprefix("torch.")
            return g * (torch.sin(x) + x * torch.cos(x)) * _scale(delta, only, name)

    return XSin.apply


def jax_xsin(delta: float = 0.0, only: str | None = None):
    pytest.importorskip("jax")
    import jax
    import jax.numpy as jnp

    gradcheck.get_backend("jax")

    @jax.custom_vjp
    def xsin(x):
        return x * jnp.sin(x)

    def bwd(x, g):
        s = _scale(delta, only, x.dtype.name)
        return (g * (jnp.sin(x) + x * jnp.cos(x)) * jnp.asarray(s, x.dtype),)

    xsin.defvjp(lambda x: (xsin(x), x), bwd)
    return xsin


XSIN = {"numpy": numpy_xsin, "torch": torch_xsin, "jax": jax_xsin}


def _x(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _kinds_failed(report):
    return {r.kind for r in report.failures}


# -- float64 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(7,), (16, 16), (1000,)])
@pytest.mark.parametrize("delta", DELTAS_64)
def test_numpy_float64_scaled_backward_caught(delta, shape):
    report = gradcheck.check(numpy_xsin(delta), _x(shape, "float64"), backend="numpy")
    assert _kinds_failed(report) >= {"vjp", "fwd_rev"}, report.summary()


@pytest.mark.parametrize("delta", DELTAS_64)
def test_numpy_float64_scaled_layer_caught(delta):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((8, 32)), rng.standard_normal((32, 16)) / np.sqrt(32)
    report = gradcheck.check(numpy_layer(delta), x, w, backend="numpy")
    assert "vjp" in _kinds_failed(report)
    assert {r.input_index for r in report.failures if r.kind == "vjp"} == {0, 1}


@pytest.mark.parametrize("backend", ["torch", "jax"])
@pytest.mark.parametrize("delta", [1e-3, 1e-7])
def test_engine_float64_scaled_backward_caught(backend, delta):
    report = gradcheck.check(XSIN[backend](delta), _x((16, 16), "float64"), backend=backend,
                             modes=("rev",))
    assert "vjp" in _kinds_failed(report), report.summary()


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_unscaled_op_passes(backend, dtype):
    report = gradcheck.check(XSIN[backend](), _x((16, 16), dtype), backend=backend,
                             modes=("rev",))
    assert report.passed, gradcheck.format_failure(report)
    if dtype == "float32":
        assert "rounding" in {r.kind for r in report}


# -- float32: both ways --------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(7,), (16, 16), (1000,)])
@pytest.mark.parametrize("delta", DELTAS_32)
def test_numpy_float32_wrong_in_every_dtype_caught_by_the_rule_check(delta, shape):
    report = gradcheck.check(numpy_xsin(delta), _x(shape, "float32"), backend="numpy")
    assert "vjp" in _kinds_failed(report)
    vjp = next(r for r in report if r.kind == "vjp")
    assert vjp.details.get("computed_in") == "float64"  # the rule is judged in float64


@pytest.mark.parametrize("shape", [(7,), (16, 16), (1000,), (200, 200)])
@pytest.mark.parametrize("delta", DELTAS_32)
def test_numpy_float32_only_error_caught_by_the_rounding_check(delta, shape):
    report = gradcheck.check(numpy_xsin(delta, only="float32"), _x(shape, "float32"),
                             backend="numpy")
    assert _kinds_failed(report) == {"rounding"}, report.summary()


@pytest.mark.parametrize("delta", DELTAS_32)
def test_numpy_float32_only_layer_error_caught_by_the_rounding_check(delta):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    report = gradcheck.check(numpy_layer(delta, only="float32"), x, w, backend="numpy")
    assert _kinds_failed(report) == {"rounding"}, report.summary()
    assert gradcheck.check(numpy_layer(), x, w, backend="numpy").passed


@pytest.mark.parametrize("backend", ["torch", "jax"])
@pytest.mark.parametrize("only", [None, "float32"])
def test_engine_float32_scaled_backward_caught(backend, only):
    report = gradcheck.check(XSIN[backend](1e-4, only), _x((16, 16), "float32"),
                             backend=backend, modes=("rev",))
    assert _kinds_failed(report) == ({"rounding"} if only else {"vjp"}), report.summary()


# -- random programs -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,delta,only,kind", [
    ("float64", 1e-7, None, "vjp"),
    ("float32", 1e-4, None, "vjp"),
])
def test_random_programs_scaled_backward_caught(dtype, delta, only, kind):
    missed = []
    for seed in range(25):  # 300 in benchmarks/detection_threshold.py
        prog = rp.random_program(seed)
        args = [a.astype(dtype) for a in prog.inputs]
        report = gradcheck.check(rp.numpy_function(prog, delta, only), *args, backend="numpy",
                                 modes=("rev",), seed=seed)
        if kind not in _kinds_failed(report):
            missed.append(prog.describe())
    assert not missed


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("chunk", range(FP_CHUNKS))
def test_no_false_positives_on_random_smooth_programs(dtype, chunk):
    per = FP_SEEDS // FP_CHUNKS
    scan = rp.false_positive_scan(range(chunk * per, (chunk + 1) * per), dtype)
    assert scan.cases == per and scan.checks >= 4 * per
    assert not scan.not_passed, "\n".join(scan.not_passed[:5])
    print(f"{dtype} seeds {chunk * per}..{(chunk + 1) * per - 1}: max ratio per check "
          + ", ".join(f"{k} {v:.3g}" for k, v in sorted(scan.max_ratio.items())))


# -- the same programs through real engines (statistical, --gradcheck-profile=thorough) -------


@pytest.fixture
def thorough(request):
    profile = request.config.getoption("--gradcheck-profile", default=None) or \
        request.config.getini("gradcheck_profile")
    if profile != "thorough":
        pytest.skip("statistical run over many programs: use --gradcheck-profile=thorough")


@pytest.mark.slow
@pytest.mark.parametrize("engine,programs", [("torch", 150), ("jax", 20)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_engine_programs_have_no_false_positives(engine, programs, dtype, thorough):
    pytest.importorskip(engine)
    not_passed = []
    for seed in range(programs):
        prog = rp.random_program(seed)
        report = gradcheck.check(rp.engine_function(prog, engine),
                                 *[a.astype(dtype) for a in prog.inputs], backend=engine,
                                 seed=seed)
        not_passed += [f"{prog.describe()}: {r.message}" for r in report
                       if r.status is not gradcheck.Status.PASSED]
    assert not not_passed, "\n".join(not_passed[:5])
