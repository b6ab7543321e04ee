"""jax.numpy.arcsinh, arccosh (lax.asinh/acosh): the derivative is 0 for x above ~1.34e154 (x*x
overflows) where 1/x is representable."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

x = 1e200
got = [float(jax.grad(f)(x)) for f in (jnp.arcsinh, jnp.arccosh)]
print("jax arcsinh'(1e200), arccosh'(1e200):", got, " exact 1/x:", 1 / x)
print("REPRODUCES" if 0.0 in got else "FIXED")
