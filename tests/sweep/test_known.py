"""The sweep's known discrepancies that are bugs (gradcheck/sweep/known.py, nature "bug"),
each pinned by its standalone reproducer as a strict xfail: the test asserts the right
derivative, so it fails today and turns XPASS (a failure under strict) the day the engine is
fixed, which says the entry must go.  Independent evidence for each: the closed-form
derivative (and central differences or the other path where the note says so)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gradcheck.sweep import known

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")


def test_every_bug_entry_has_a_pinning_test_here():
    bugs = {k.subject for k in known.KNOWN if k.nature == "bug"}
    assert bugs == {"torch.linalg.det", "torch.addcdiv", "torch.asinh", "jax.[ln]*.a*sinh",
                    "torch*acosh", "jax.[ln]*.a*cosh",
                    "jax.numpy.sinc", "jax.scipy.special.exp[i1]", "jax.*expm1",
                    "jax.scipy.special.gammainc*", "jax.lax.igamma",
                    "jax.nn.[es]elu", "torch*expm1", "jax.scipy.special.spence",
                    "torch.cholesky_inverse", "torch.nn.functional.hardsigmoid",
                    "jax.numpy.hypot"}
    assert {k.nature for k in known.KNOWN} == {"bug", "by_design"}


@pytest.mark.xfail(strict=True, reason="known.py: torch.linalg.det tape backward at rank n-1")
def test_det_tape_backward_at_a_rank_deficient_matrix():
    a = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.5, 1.0, 7.0]], dtype=torch.float64,
                     requires_grad=True)
    torch.linalg.det(a).backward()
    adjugate = torch.func.grad(torch.linalg.det)(a.detach())  # the right value (cofactors)
    assert abs(float(adjugate[0, 0]) - 11.0) < 1e-9  # the functional path is right
    assert torch.allclose(a.grad, adjugate, rtol=1e-9, atol=1e-12)


@pytest.mark.xfail(strict=True, reason="known.py: torch.addcdiv -inf at tiny tensor2")
def test_addcdiv_reverse_mode_at_tiny_tensor2():
    s = torch.tensor([1.0], dtype=torch.float64)
    t1 = torch.tensor([1e-300], dtype=torch.float64)
    t2 = torch.tensor([3e-300], dtype=torch.float64, requires_grad=True)
    torch.addcdiv(s, t1, t2, value=1.0).sum().backward()
    want = -1e-300 / 3e-300 / 3e-300  # -1.1e299, finite
    assert math.isfinite(want)
    assert float(t2.grad) == pytest.approx(want, rel=1e-12)


def test_addcdiv_forward_mode_at_tiny_tensor2_is_right():
    """The record is reverse mode only: forward mode gets the finite derivative."""
    s = torch.tensor([1.0], dtype=torch.float64)
    t1 = torch.tensor([1e-300], dtype=torch.float64)
    _, tangent = torch.func.jvp(lambda b: torch.addcdiv(s, t1, b, value=1.0),
                                (torch.tensor([3e-300], dtype=torch.float64),),
                                (torch.ones(1, dtype=torch.float64),))
    assert float(tangent) == pytest.approx(-1e-300 / 3e-300 / 3e-300, rel=1e-12)


@pytest.mark.xfail(strict=True, reason="known.py: torch.asinh derivative 0 above ~1e154")
def test_torch_asinh_derivative_at_huge_inputs():
    x = torch.tensor([1e200, -3e250], dtype=torch.float64, requires_grad=True)
    torch.asinh(x).sum().backward()
    want = 1 / np.abs(x.detach().numpy())  # 1/sqrt(1 + x^2) = 1/|x| to 1e-400 relative
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


@pytest.mark.xfail(strict=True, reason="known.py: jax.numpy.arcsinh derivative 0 above ~1e154")
def test_jax_arcsinh_derivative_at_huge_inputs():
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)  # as gradcheck's jax backend does
    x = jnp.array([1e200, -3e250], dtype=jnp.float64)
    got = [np.asarray(jax.vmap(jax.grad(f))(x)) for f in (jnp.arcsinh, jax.lax.asinh)]
    for g in got:  # both are 0; the strict xfail needs each one fixed
        np.testing.assert_allclose(g, 1 / np.abs(np.asarray(x)), rtol=1e-12)


@pytest.mark.xfail(strict=True, reason="known.py: torch.acosh derivative 0 above ~1e154")
def test_torch_acosh_derivative_at_huge_inputs():
    x = torch.tensor([1e200, 3e250], dtype=torch.float64, requires_grad=True)
    torch.acosh(x).sum().backward()
    want = 1 / x.detach().numpy()  # 1/sqrt(x^2 - 1) = 1/x to 1e-400 relative
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


@pytest.mark.xfail(strict=True, reason="known.py: jax.numpy.acosh derivative 0 above ~1e154")
def test_jax_acosh_derivative_at_huge_inputs():
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)  # as gradcheck's jax backend does
    x = jnp.array([1e200, 3e250], dtype=jnp.float64)
    for fn in (jnp.acosh, jnp.arccosh, jax.lax.acosh):
        got = np.asarray(jax.vmap(jax.grad(fn))(x))
        np.testing.assert_allclose(got, 1 / np.asarray(x), rtol=1e-12)


@pytest.mark.xfail(strict=True, reason="known.py: jax.numpy.sinc derivative -inf at tiny x")
def test_jax_sinc_derivative_at_tiny_inputs():
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    x = np.array([1e-300, 1e-200])
    got = np.asarray(jax.vmap(jax.grad(jnp.sinc))(jnp.asarray(x)))
    np.testing.assert_allclose(got, -np.pi ** 2 * x / 3, rtol=1e-12)  # sinc'(x) ~ -pi^2 x/3


_EXPI_HANG = """
import numpy as np, jax
jax.config.update("jax_enable_x64", True)
import jax.scipy.special as s
for x in (1e-113, -1e-10):
    assert np.isfinite(float(s.expi(np.array([x]))[0]))  # alone: at once
print(np.asarray(s.expi(np.array([-1e-10, 1.0]))), np.asarray(s.exp1(np.array([1e-113, 1.0]))))
"""


@pytest.mark.xfail(strict=True, reason="known.py: jax expi/exp1 hang on mixed tiny and O(1) "
                                       "arguments")
def test_jax_expi_and_exp1_return_on_an_array_mixing_tiny_and_unit_arguments():
    import subprocess
    import sys

    try:
        done = subprocess.run([sys.executable, "-c", _EXPI_HANG], capture_output=True,
                              text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("jax.scipy.special.expi([-1e-10, 1.0]) / exp1([1e-113, 1.0]) did not "
                    "return within 30 s")
    assert done.returncode == 0, done.stderr[-2000:]


_IGAMMA_HANG = """
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import jax.scipy.special as s
assert abs(float(s.gammainc(np.array([2.0]), np.array([2.0]))[0]) - 0.593994150290162) < 1e-12
print(np.asarray(s.gammainc(np.array([1e200]), np.array([1e200]))))  # P(a, a) -> 1/2
"""


@pytest.mark.xfail(strict=True, reason="known.py: jax gammainc/igamma hang at a = x = 1e200")
def test_jax_gammainc_returns_at_huge_equal_arguments():
    import subprocess
    import sys

    try:
        done = subprocess.run([sys.executable, "-c", _IGAMMA_HANG], capture_output=True,
                              text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("jax.scipy.special.gammainc(1e200, 1e200) did not return within 30 s")
    assert done.returncode == 0, done.stderr[-2000:]
    assert abs(float(done.stdout.strip(" []\n")) - 0.5) < 1e-6, done.stdout


@pytest.mark.xfail(strict=True, reason="known.py: jax expm1/elu/selu derivative 0 at -100")
def test_jax_expm1_elu_selu_derivatives_at_minus_100():
    jax.config.update("jax_enable_x64", True)
    want = math.exp(-100.0)  # 3.7e-44: representable, and the exact derivative of expm1
    assert float(jax.grad(jax.numpy.expm1)(-100.0)) == pytest.approx(want, rel=1e-12, abs=0)
    assert float(jax.grad(jax.nn.elu)(-100.0)) == pytest.approx(want, rel=1e-12, abs=0)


@pytest.mark.xfail(strict=True, reason="known.py: torch expm1 derivative 0 at -100")
def test_torch_expm1_derivative_at_minus_100():
    x = torch.tensor(-100.0, dtype=torch.float64, requires_grad=True)
    torch.special.expm1(x).backward()
    assert float(x.grad) == pytest.approx(math.exp(-100.0), rel=1e-12, abs=0)


@pytest.mark.xfail(strict=True, reason="known.py: jax spence derivative off by -1 at tiny x")
def test_jax_spence_derivative_at_tiny_arguments():
    jax.config.update("jax_enable_x64", True)
    for x in (1e-20, 1e-100, 2.2250738585072014e-308):
        want = math.log(x) / (1 - x)  # d/dx of scipy's spence: int_1^x log(t) / (1 - t) dt
        assert float(jax.grad(jax.scipy.special.spence)(x)) == pytest.approx(want, rel=1e-12)


@pytest.mark.xfail(strict=True, reason="known.py: torch.cholesky_inverse forward mode wrong")
def test_torch_cholesky_inverse_forward_mode_at_an_ordinary_factor():
    torch.manual_seed(0)
    factor = (torch.tril(torch.randn(4, 4, dtype=torch.float64))
              + 4 * torch.eye(4, dtype=torch.float64))
    tangent = torch.tril(torch.randn(4, 4, dtype=torch.float64))
    # the exact JVP: the same function written as inv(L L^T), a different rule
    want = torch.func.jvp(lambda m: torch.linalg.inv(m @ m.T), (factor,), (tangent,))[1]
    h = 1e-6
    fd = (torch.cholesky_inverse(factor + h * tangent)
          - torch.cholesky_inverse(factor - h * tangent)) / (2 * h)
    assert torch.allclose(fd, want, rtol=0, atol=1e-8)  # the reference is right
    cotangent = torch.randn(4, 4, dtype=torch.float64)
    (grad,) = torch.func.vjp(torch.cholesky_inverse, factor)[1](cotangent)
    assert float((grad * tangent).sum()) == pytest.approx(float((want * cotangent).sum()),
                                                         rel=1e-9)  # reverse mode is right
    got = torch.func.jvp(torch.cholesky_inverse, (factor,), (tangent,))[1]
    assert torch.allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.xfail(strict=True, reason="known.py: torch hardsigmoid float64 derivative 1/6 in "
                                       "float32")
def test_torch_hardsigmoid_float64_derivative():
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.hardsigmoid(x)
    assert torch.equal(y, (x + 3) / 6)  # the forward is right
    (grad,) = torch.autograd.grad(y.sum(), x)
    assert grad.tolist() == pytest.approx([1 / 6] * 3, rel=1e-14, abs=0)


def test_torch_hardsigmoid_float32_derivative_is_the_rounded_one_sixth():
    """The float64 entry's twin: in float32 the derivative is float32(1/6), correctly rounded."""
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float32, requires_grad=True)
    (grad,) = torch.autograd.grad(torch.nn.functional.hardsigmoid(x).sum(), x)
    assert grad.tolist() == [float(np.float32(1 / 6))] * 3


@pytest.mark.xfail(strict=True, reason="known.py: jax.numpy.hypot partials at huge and tiny "
                                       "arguments")
def test_jax_hypot_partials_at_huge_and_tiny_arguments():
    jax.config.update("jax_enable_x64", True)
    r = math.sqrt(10.0)  # hypot(1, 3); the partials are a/r, b/r at any scale
    want = [1 / r, 3 / r]
    assert [float(v) for v in jax.grad(jax.numpy.hypot, (0, 1))(1e-200, 3e-200)] == \
        pytest.approx(want, rel=1e-12)
    assert [float(v) for v in jax.grad(jax.numpy.hypot, (0, 1))(1e200, 3e200)] == \
        pytest.approx(want, rel=1e-12)


def test_torch_hypot_partials_at_huge_and_tiny_arguments_are_right():
    """The jax entry's twin: torch.hypot gets a/r and b/r at both scales."""
    r = math.sqrt(10.0)
    for scale in (1e-200, 1e200):
        a = torch.tensor(scale, dtype=torch.float64, requires_grad=True)
        b = torch.tensor(3 * scale, dtype=torch.float64, requires_grad=True)
        torch.hypot(a, b).backward()
        assert [float(a.grad), float(b.grad)] == pytest.approx([1 / r, 3 / r], rel=1e-12)


def test_torch_cholesky_ex_at_the_tiny_band_is_outside_its_domain():
    """The by_design entry: the tiny band's cholesky_ex matrices (values of both signs, 1e-308
    .. 1e-16; these are the first entries of the sweep's float64 point) have negative
    diagonals, so the factorization stops (info != 0) and its derivative is not defined; a
    positive definite matrix of the same magnitude factors, and the entry covers only the
    reverse-mode kinds at that band."""
    bad = torch.tensor([[-3.7280662108277965e-195, 4.9429697879062355e-213],
                        [8.68953694995502e-249, -7.909733561235226e-243]], dtype=torch.float64)
    assert int(torch.linalg.cholesky_ex(bad, upper=True).info) != 0
    good = torch.tensor([[4e-200, 1e-200], [1e-200, 3e-200]], dtype=torch.float64)
    assert int(torch.linalg.cholesky_ex(good, upper=True).info) == 0
    entry = known.lookup("torch", "torch.linalg.cholesky_ex", "vjp", "float64", "tiny")
    assert entry is not None and entry.nature == "by_design"
    assert known.lookup("torch", "torch.linalg.cholesky_ex", "vjp", "float64", "unit") is None
