"""jax.numpy.linalg.norm: the 2-norm of [1e200, 1e200] is inf, where sqrt(2) * 1e200 is
representable: the sum of squares is not scaled."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

x = jnp.array([1e200, 1e200])
n = float(jnp.linalg.norm(x))
print("jax norm, gradient:  ", n, jax.grad(jnp.linalg.norm)(x).tolist())
print("exact norm, gradient:", 2 ** 0.5 * 1e200, [2 ** -0.5] * 2)
print("REPRODUCES" if n == float("inf") else "FIXED")
