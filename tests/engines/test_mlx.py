"""MLX adapter: conformance, mapped ops through the numeric checks (order 2, forward and reverse
mode, the alternative reverse paths), a mutant VJP caught through the adapter, the training
probes, and the engine facts behind the documented discrepancies.  Skipped where MLX is not
installed (``pip install "mlx[cpu]"``)."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.backends.protocol_ops import PROTOCOL_OPS
from gradcheck.harness.conformance import Probe
from gradcheck.testing import format_conformance, run_conformance
from tests.support.adapter_checks import ORDER2_KINDS, assert_op_passes, assert_training_probes

mx = pytest.importorskip("mlx.core", reason="mlx is not installed (pip install 'mlx[cpu]')")

# protocol ops whose MLX float64 kernels are exact to float64 rounding (others compute exp /
# sin / cos in float32 precision: docs/known-discrepancies.md, "MLX"); a few, because the
# mx.compile path builds C++ kernels with the system compiler (cold cache: ~1 s per op)
EXACT_OPS = ("tanh", "log", "div", "matmul", "sum")


@pytest.fixture(scope="module")
def mlxb():
    return gradcheck.get_backend("mlx")


def test_conformance(mlxb):
    """The kit's default probes are sin, mul, sum, matmul; MLX's float64 sin is only float32
    accurate (test_float64_transcendentals_are_float32_accurate), so tanh stands in for it."""
    rng = np.random.default_rng(0)
    probes = [Probe(n, mlxb.op(n), PROTOCOL_OPS[n].sample(rng), PROTOCOL_OPS[n].forward)
              for n in ("tanh", "mul", "sum", "matmul")]
    report = run_conformance(mlxb, probes=probes)
    assert report.passed, format_conformance(report)


@pytest.mark.parametrize("name", EXACT_OPS)
def test_exact_ops_pass_order2(mlxb, name):
    assert_op_passes(mlxb, name, seed=7, kinds=ORDER2_KINDS | {"eager_func"})


def _tanh_with_vjp(factor: float):
    """``tanh`` whose custom VJP is ``factor`` times the true one (1.0: correct)."""

    @mx.custom_function
    def f(x):
        return mx.tanh(x)

    @f.vjp
    def f_vjp(primals, cotangent, output):
        return (cotangent * (1.0 - output * output) * factor,)

    return f


@pytest.mark.parametrize("factor", [1.0 + 1e-4, -1.0])
def test_mutant_vjp_is_caught_and_correct_passes(mlxb, factor):
    x = np.random.default_rng(1).standard_normal((3, 4))
    good = gradcheck.check(_tanh_with_vjp(1.0), x, backend=mlxb, modes=("rev",))
    assert good.passed, good.summary()
    bad = gradcheck.check(_tanh_with_vjp(factor), x, backend=mlxb, modes=("rev",))
    assert {r.kind for r in bad.failures} == {"vjp"}, bad.summary()


def test_unimplemented_transform_is_a_skip(mlxb):
    """MLX has no JVP for scatter: the adapter reports a missing capability, not an error."""
    x, src = np.zeros((4, 3)), np.ones((2, 3))
    idx = np.array([0, 2])
    report = gradcheck.check(mlxb.op("index_add_axis0"), x, idx, src, backend=mlxb)
    jvp = [r for r in report.results if r.kind == "jvp"]
    assert jvp and all(r.status is gradcheck.Status.SKIPPED for r in jvp), report.summary()
    assert "not yet implemented" in jvp[0].message


def test_float64_transcendentals_are_float32_accurate():
    """Engine fact behind the MLX float64 entries of docs/known-discrepancies.md: on the CPU,
    float64 ``exp`` and ``sin`` come back as float64 arrays with float32-level errors, while
    ``tanh`` and ``log`` are exact to float64 rounding."""
    x = np.linspace(0.1, 3.0, 64)
    with mx.stream(mx.cpu):
        def rel(f, ref):
            return np.max(np.abs(np.array(f(mx.array(x, dtype=mx.float64))) - ref) / np.abs(ref))

        assert 1e-9 < rel(mx.exp, np.exp(x)) < 1e-5
        assert 1e-9 < rel(mx.sin, np.sin(x)) < 1e-4
        assert rel(mx.tanh, np.tanh(x)) < 1e-14
        assert rel(mx.log, np.log(x)) < 1e-14


def test_float64_numpy_input_becomes_float32_without_a_dtype():
    """Why the adapter always passes the dtype: ``mx.array(float64 ndarray)`` is float32."""
    assert mx.array(np.zeros(2)).dtype == mx.float32
    assert mx.array(np.zeros(2), dtype=mx.float64).dtype == mx.float64


def test_training_is_functional_and_clips_with_epsilon(mlxb):
    assert_training_probes(mlxb.training("cpu", "float64"), np.float64, clip_epsilon=1e-6)
