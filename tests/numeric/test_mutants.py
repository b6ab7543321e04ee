"""Deliberately broken derivatives (mutants) are caught; the correct versions pass.

Each backend gets the same four small ops with hand-written derivatives - NumPy as
``NumpyFunction``, torch as ``autograd.Function`` (``setup_context`` + ``jvp`` staticmethod, so
forward mode is hand-written too), JAX as ``jax.custom_vjp`` / ``jax.custom_jvp`` - and the same
eight mutants:

==================  ======================================  ==============================
mutant              op                                       caught by
==================  ======================================  ==============================
sign_flip           ``sin(x) * y``: both gradients negated   VJP
factor              ``sin(x) * y``: gradients times 2        VJP
transposed          ``x @ W``: ``g @ W`` instead of ``W.T``  VJP
missing_reduction   ``tanh(x + b)``: ``b``'s gradient from   VJP of input 1
                    one broadcast row instead of the sum
zeroed              ``sin(x) * y``: ``y``'s gradient zero    VJP of input 1
swapped             ``sin(x) * y``: gradients swapped        VJP
forward_only        ``sin(x) * y``: JVP sign error in one    JVP (and forward-vs-reverse)
                    term; VJP correct
order2_only         ``sin(x)``: backward treats ``cos(x)``   VJP of VJP
                    as a constant (detach / stop_gradient)
==================  ======================================  ==============================

Backend-specific facts are asserted, not hidden: torch's autograd sums an unreduced broadcast
gradient itself (so that bug is harmless there and passes); JAX derives reverse mode by
transposing a ``custom_jvp`` rule, so a forward-mode error shows in both modes there.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import NumpyFunction
from tests.support.mutants import MUTANTS, OP_OF, B, W, X, mutant_inputs, numpy_op

# mutant -> (check kind that must fail, input index of that failure or None for any)
CAUGHT_BY = {
    "sign_flip": ("vjp", None),
    "factor": ("vjp", None),
    "transposed": ("vjp", 0),
    "missing_reduction": ("vjp", 1),
    "zeroed": ("vjp", 1),
    "swapped": ("vjp", None),
    "forward_only": ("jvp", None),
    "order2_only": ("vjp_of_vjp", 0),
}


# -- torch ------------------------------------------------------------------------------------


def torch_op(op: str, m: str | None):
    torch = pytest.importorskip("torch")
    Wt = torch.as_tensor(W)

    class SavesInputs(torch.autograd.Function):
        """Keeps the inputs for backward and for forward mode (jvp)."""

        generate_vmap_rule = True

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)
            ctx.save_for_forward(*inputs)

    class SinMul(SavesInputs):
        @staticmethod
        def forward(x, y):
            return torch.sin(x) * y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            gx, gy = g * torch.cos(x) * y, g * torch.sin(x)
            return {"sign_flip": (-gx, -gy), "factor": (2 * gx, 2 * gy),
                    "zeroed": (gx, torch.zeros_like(gy)), "swapped": (gy, gx)}.get(m, (gx, gy))

        @staticmethod
        def jvp(ctx, tx, ty):
            x, y = ctx.saved_tensors
            sign = -1.0 if m == "forward_only" else 1.0
            return torch.cos(x) * y * tx + sign * torch.sin(x) * ty

    class MatMul(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x @ Wt.to(x.dtype)

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            w = Wt.to(g.dtype)
            return g @ (w if m == "transposed" else w.T)

        @staticmethod
        def jvp(ctx, t):
            return t @ Wt.to(t.dtype)

    class BiasTanh(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x, b):
            return torch.tanh(x + b)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)
            ctx.save_for_forward(output)

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            gx = g * (1 - y * y)
            if m == "missing_reduction":
                return gx, gx[0]
            if m == "unreduced":
                return gx, gx  # torch's autograd sums this to b's shape itself
            return gx, gx.sum(dim=0)

        @staticmethod
        def jvp(ctx, tx, tb):
            (y,) = ctx.saved_tensors
            return (1 - y * y) * (tx + tb)

    class Sin(SavesInputs):
        @staticmethod
        def forward(x):
            return torch.sin(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * torch.cos(x.detach() if m == "order2_only" else x)

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return torch.cos(x) * t

    return {"sinmul": SinMul, "matmul": MatMul, "bias": BiasTanh, "sin": Sin}[op].apply


# -- jax --------------------------------------------------------------------------------------


def jax_op(op: str, m: str | None):
    pytest.importorskip("jax")
    import jax
    import jax.numpy as jnp

    gradcheck.get_backend("jax")  # enables x64 before any array is made
    if op == "sinmul" and m == "forward_only":
        # JAX transposes a custom_jvp rule to get reverse mode, so the error shows in both
        @jax.custom_jvp
        def sinmul_fwd(x, y):
            return jnp.sin(x) * y

        @sinmul_fwd.defjvp
        def _rule(primals, tangents):
            (x, y), (tx, ty) = primals, tangents
            return jnp.sin(x) * y, jnp.cos(x) * y * tx - jnp.sin(x) * ty

        return sinmul_fwd

    @jax.custom_vjp
    def sinmul(x, y):
        return jnp.sin(x) * y

    def sinmul_bwd(res, g):
        x, y = res
        gx, gy = g * jnp.cos(x) * y, g * jnp.sin(x)
        return {"sign_flip": (-gx, -gy), "factor": (2 * gx, 2 * gy),
                "zeroed": (gx, jnp.zeros_like(gy)), "swapped": (gy, gx)}.get(m, (gx, gy))

    sinmul.defvjp(lambda x, y: (sinmul(x, y), (x, y)), sinmul_bwd)

    @jax.custom_vjp
    def matmul(x):
        return x @ W

    matmul.defvjp(lambda x: (matmul(x), None),
                  lambda res, g: (g @ (W if m == "transposed" else W.T),))

    @jax.custom_vjp
    def bias(x, b):
        return jnp.tanh(x + b)

    def bias_bwd(y, g):
        gx = g * (1 - y * y)
        return gx, {"missing_reduction": gx[0], "unreduced": gx}.get(m, gx.sum(axis=0))

    bias.defvjp(lambda x, b: (bias(x, b), bias(x, b)), bias_bwd)

    @jax.custom_vjp
    def sin(x):
        return jnp.sin(x)

    sin.defvjp(lambda x: (sin(x), x),
               lambda x, g: (g * jnp.cos(jax.lax.stop_gradient(x) if m == "order2_only" else x),))

    return {"sinmul": sinmul, "matmul": matmul, "bias": bias, "sin": sin}[op]


BUILDERS = {"numpy": numpy_op, "torch": torch_op, "jax": jax_op}


def _run(backend: str, op: str, mutant: str | None) -> gradcheck.Report:
    fn = BUILDERS[backend](op, mutant)
    order = 2 if op == "sin" else 1
    return gradcheck.check(fn, *mutant_inputs(op), backend=backend, order=order, seed=3)


def _failed(report: gradcheck.Report) -> set[tuple[str, int | None]]:
    return {(r.kind, r.input_index) for r in report.failures}


@pytest.mark.parametrize("backend", sorted(BUILDERS))
@pytest.mark.parametrize("op", ["sinmul", "matmul", "bias", "sin"])
def test_correct_version_passes(backend: str, op: str) -> None:
    report = _run(backend, op, None)
    if backend == "torch" and op == "sin":  # a real torch bug, see the test below
        report = gradcheck.Report([r for r in report if r.kind != "jvp_of_jvp"])
    assert report.passed, gradcheck.format_failure(report)
    passed = {r.kind for r in report if r.status is gradcheck.Status.PASSED}
    assert "vjp" in passed
    if op == "sin":
        assert "vjp_of_vjp" in passed


@pytest.mark.parametrize("backend", sorted(BUILDERS))
@pytest.mark.parametrize("mutant", MUTANTS)
def test_mutant_is_caught(backend: str, mutant: str) -> None:
    report = _run(backend, OP_OF.get(mutant, "sinmul"), mutant)
    assert not report.passed, f"{backend} {mutant} was not caught: {report.summary()}"
    kind, index = CAUGHT_BY[mutant]
    failed = _failed(report)
    assert any(k == kind and (index is None or i == index) for k, i in failed), failed
    assert all(r.status is gradcheck.Status.FAILED for r in report.failures), \
        gradcheck.format_failure(report)  # caught as a wrong derivative, not an error


@pytest.mark.parametrize("backend", sorted(BUILDERS))
def test_forward_only_error_spares_reverse_mode(backend: str) -> None:
    failed = {k for k, _ in _failed(_run(backend, "sinmul", "forward_only"))}
    assert {"jvp", "fwd_rev"} <= failed or backend == "jax"
    if backend == "jax":  # reverse mode is the transposed JVP rule: wrong as well
        assert "vjp" in failed and "jvp" in failed
    else:
        assert "vjp" not in failed


@pytest.mark.parametrize("backend", sorted(BUILDERS))
def test_order2_error_is_invisible_at_order1(backend: str) -> None:
    fn = BUILDERS[backend]("sin", "order2_only")
    assert gradcheck.check(fn, X, backend=backend, order=1).passed


def test_unreduced_broadcast_gradient_is_an_error_in_numpy_and_jax() -> None:
    for backend in ("numpy", "jax"):
        if backend == "jax":
            pytest.importorskip("jax")
        fn = BUILDERS[backend]("bias", "unreduced") if backend == "jax" else NumpyFunction(
            lambda x, b: np.tanh(x + b),
            lambda a, c: (c[0] * (1 - np.tanh(a[0] + a[1]) ** 2),) * 2)
        report = gradcheck.check(fn, X, B, backend=backend, modes=("rev",))
        assert not report.passed
        errors = [r for r in report.failures if r.status is gradcheck.Status.ERROR]
        assert errors and all(r.kind in ("vjp", "call") for r in errors)
        assert any("shape" in r.message for r in errors), [r.message for r in errors]


def test_torch_sums_an_unreduced_broadcast_gradient_itself() -> None:
    report = gradcheck.check(torch_op("bias", "unreduced"), X, B, backend="torch")
    assert report.passed, gradcheck.format_failure(report)


def test_torch_forward_over_forward_through_custom_function_is_caught() -> None:
    """Not a mutant: the *correct* ``Sin`` above, whose ``jvp`` staticmethod is right.  Nested
    forward mode (``torch.func.jvp`` of ``torch.func.jvp``) through an ``autograd.Function``
    silently returns 0 for the second derivative in torch 2.13 (upstream:
    https://github.com/pytorch/pytorch/issues/197867); the JVP-of-JVP check reports it."""
    report = _run("torch", "sin", None)
    bad = [r for r in report.failures if r.kind == "jvp_of_jvp"]
    assert bad and bad[0].status is gradcheck.Status.FAILED and bad[0].actual == 0.0
    assert {r.kind for r in report.failures} == {"jvp_of_jvp"}
