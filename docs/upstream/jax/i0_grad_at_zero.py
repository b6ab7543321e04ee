"""jax.scipy.special.i0: the derivative at 0 is 1.0, where i0'(x) = i1(x) and i1(0) = 0
(i0e'(0) is right, 0; scipy.special.i1(0) = 0)."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import jax.scipy.special as jss  # noqa: E402

got = float(jax.grad(jss.i0)(0.0))
near = float(jax.grad(jss.i0)(1e-3))
print("jax i0'(0):", got, "  i0'(1e-3):", near, "  i0e'(0):",
      float(jax.grad(jss.i0e)(0.0)))
print("exact i1(0) = 0, i1(1e-3) = 5.000000625e-4 (closed form x/2 + x^3/16 + ...)")
print("REPRODUCES" if got != 0 else "FIXED")
