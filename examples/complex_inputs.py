"""Complex inputs and outputs, each engine in its own convention.

The classic bug, a custom ``torch.autograd.Function`` whose backward misses the ``conj`` of
``f'(z)``, is caught (named by the part it spoils: ``z.imag``) and its correct twin passes; the
same for a JAX ``custom_vjp`` written in torch's convention.  Non-holomorphic built-ins (``abs``,
``conj``, ``real``) pass, and every result says which convention was checked.

Run ``python -m examples.complex_inputs``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

import gradcheck


def torch_square(conj: bool):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            ctx.save_for_backward(z)
            return z * z

        @staticmethod
        def backward(ctx, grad):
            (z,) = ctx.saved_tensors
            return grad * ((2 * z).conj() if conj else 2 * z)  # torch: grad * conj(f'(z))

    return Square.apply


def jax_square(conj: bool):
    @jax.custom_vjp
    def square(z):
        return z * z

    def bwd(z, c):
        return (c * (jnp.conj(2 * z) if conj else 2 * z),)  # jax: c * f'(z), no conj

    square.defvjp(lambda z: (z * z, z), bwd)
    return square


def first_lines(fn, *args, **kw) -> str:
    try:
        return gradcheck.assert_gradients(fn, *args, **kw).summary()
    except gradcheck.GradientMismatch as exc:
        lines = str(exc).splitlines()
        return "\n".join(lines[:5])


def main() -> None:
    rng = np.random.default_rng(0)
    z = rng.normal(size=4) + 1j * rng.normal(size=4)
    zt = torch.tensor(z)
    print("torch, backward with conj:   ", first_lines(torch_square(True), zt, backend="torch",
                                                       modes=("rev",)))
    print("torch, backward without conj:", first_lines(torch_square(False), zt,
                                                       backend="torch", modes=("rev",)))
    print("jax, vjp c * f'(z):          ", first_lines(jax_square(False), z, backend="jax"))
    print("jax, vjp c * conj(f'(z)):    ", first_lines(jax_square(True), z, backend="jax"))
    for name, fn in (("abs", torch.abs), ("conj", torch.conj), ("real", torch.real)):
        print(f"torch.{name}:", gradcheck.check(fn, zt, backend="torch").summary())
    report = gradcheck.check(lambda x: jnp.exp(1j * x), rng.normal(size=3), backend="jax")
    print("jax, real in, complex out:", report.summary(),
          sorted({r.subject for r in report.results if r.kind == "vjp"}))
    print("convention checked:", report.results[0].details["complex_convention"])


if __name__ == "__main__":
    main()
