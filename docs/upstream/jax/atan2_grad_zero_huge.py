"""jax.numpy.arctan2: both partials are 0 at (1e200, -3e200), where x/(x^2+y^2) = -3e-201 and
-y/(x^2+y^2) = -1e-201 are representable (x^2 + y^2 overflows in the JVP rule)."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

dy, dx = jax.grad(jnp.arctan2, argnums=(0, 1))(1e200, -3e200)
exact = (-3 / 10 * 1e-200, -1 / 10 * 1e-200)  # closed form, x^2 + y^2 = 1e401
print("jax d/dy, d/dx:  ", float(dy), float(dx))
print("exact d/dy, d/dx:", exact)
print("REPRODUCES" if float(dy) == 0 or float(dx) == 0 else "FIXED")
