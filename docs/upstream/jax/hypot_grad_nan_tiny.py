"""jax.numpy.hypot: at (a, b) = (1e-200, 3e-200) the partials are nan and -inf, where they are
a/r = 0.3162 and b/r = 0.9487 (the forward, 3.16e-200, is right)."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import math  # noqa: E402

da, db = jax.grad(jnp.hypot, argnums=(0, 1))(1e-200, 3e-200)
r = math.sqrt(10)  # closed form
print("jax value:", float(jnp.hypot(1e-200, 3e-200)), " exact:", r * 1e-200)
print("jax d/da, d/db:", float(da), float(db))
print("exact a/r, b/r:", 1 / r, 3 / r)
print("REPRODUCES" if not (math.isfinite(float(da)) and math.isfinite(float(db))) else "FIXED")
