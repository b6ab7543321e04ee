"""The low-precision rounding check (norm-wise) at the ends of float16's range: a derivative
element beyond 65504 is correctly an infinity, and one in the subnormal range is rounded to a
spacing of 2^-24; both are right, and a derivative wrong there is still caught."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradcheck

torch = pytest.importorskip("torch")


def _check(fn, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gradcheck.check(fn, x, backend="torch", modes=("rev",))


def _rounding(report):
    return [r for r in report.results if r.kind.value == "rounding"]


def test_a_subnormal_float16_derivative_correctly_rounded_passes_and_a_wrong_one_fails():
    """jax, ``x ** -2`` computed in float32 and rounded, at 256 (4 elements): the derivative
    -1.19e-7 is a float16 subnormal (spacing 6e-8), correctly rounded 0.375 off relative,
    within the subnormal spacing the norm-wise check allows (without it: 6.5x its allowance);
    a derivative 20x too large is caught."""
    jnp = pytest.importorskip("jax").numpy
    x = np.full(4, 256.0).astype(np.float16)

    def up(scale):
        def f(t):
            return (t.astype(jnp.float32) ** -2).astype(t.dtype)
        return f if scale == 1 else _scaled_jax(f, scale)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        good = gradcheck.check(up(1), x, backend="jax")
        bad = gradcheck.check(up(20), x, backend="jax")
    assert good.passed, gradcheck.format_failure(good)
    assert "subnormal spacing" in _rounding(good)[0].allowed_source
    assert not bad.passed, bad.summary()


def _scaled_jax(f, scale):
    """``f`` whose derivative is scaled by ``scale`` below float64 only."""
    import jax

    @jax.custom_jvp
    def g(t):
        return f(t)

    @g.defjvp
    def _jvp(primals, tangents):
        (t,), (dt,) = primals, tangents
        d = -2 * t.astype(jax.numpy.float32) ** -3
        if t.dtype != jax.numpy.float64:
            d = d * scale
        return g(t), (d * dt.astype(jax.numpy.float32)).astype(t.dtype)

    return g


def test_a_float16_derivative_beyond_its_range_is_correctly_infinite():
    """1 / sqrt(x) at 7.8e-5: v f'(x) beyond 65504 rounds to inf (right) at some elements,
    finite elsewhere; a rule computing in float32 then rounding passes."""
    x = np.full(32, 7.814168930053711e-05).astype(np.float16)
    report = _check(lambda t: 1 / torch.sqrt(t), x)
    assert report.passed, gradcheck.format_failure(report)


def test_torch_float16_rsqrt_backward_overflowing_inside_is_caught():
    """torch's float16 rsqrt backward computes -0.5 g y^3 with y^3 = 1.45e6 beyond float16:
    inf where the gradient is -4552 (the same point as the test above)."""
    x = np.full(32, 7.814168930053711e-05).astype(np.float16)
    report = _check(torch.rsqrt, x)
    assert any(r.status.value == "failed" for r in _rounding(report)), report.summary()
