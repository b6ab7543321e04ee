"""jax.scipy.special.i0, i1: the second derivatives at 0 are 1.5 and 1.0 where they are 1/2
and 0 (i0(x) = 1 + x^2/4 + ..., i1(x) = x/2 + x^3/16 + ...)."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import jax.scipy.special as jss  # noqa: E402

h0 = float(jax.grad(jax.grad(jss.i0))(0.0))
h1 = float(jax.grad(jax.grad(jss.i1))(0.0))
print("jax i0''(0), i1''(0):", h0, h1, "  exact: 0.5, 0.0 (closed form)")
print("REPRODUCES" if (h0, h1) != (0.5, 0.0) else "FIXED")
