"""jax.numpy.linalg.norm: the 2-norm of [1e-200, 3e-200] is 0 and its gradient inf, where
sqrt(10) * 1e-200 is a normal number and the gradient x/||x|| is [0.316, 0.949]."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

x = jnp.array([1e-200, 3e-200])
n = float(jnp.linalg.norm(x))
r = 10 ** 0.5  # closed form
print("jax norm, gradient:  ", n, jax.grad(jnp.linalg.norm)(x).tolist())
print("exact norm, gradient:", r * 1e-200, [1 / r, 3 / r])
print("REPRODUCES" if n == 0 else "FIXED")
