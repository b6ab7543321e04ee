"""jax.numpy.arctan2: forward over reverse gives nan for d2/dy2 at (1e200, -3e200), where
2xy/(x^2+y^2)^2 = -6e-402 rounds to -0 in float64 (reverse over reverse gives 0)."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import math  # noqa: E402

fr = float(jax.jacfwd(jax.grad(jnp.arctan2))(1e200, -3e200))
rr = float(jax.grad(jax.grad(jnp.arctan2))(1e200, -3e200))
print("jax d2/dy2 forward over reverse:", fr, " reverse over reverse:", rr)
print("exact: 2xy/(x^2+y^2)^2 = -6e-402, 0 in float64")
print("REPRODUCES" if math.isnan(fr) else "FIXED")
