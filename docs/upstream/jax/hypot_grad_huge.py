"""jax.numpy.hypot: at (a, b) = (1e200, 3e200) d/db is 1.0541 = r/b where it is b/r = 0.9487
(d/da = a/r = 0.3162 is right); torch.hypot is right there."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import math  # noqa: E402

da, db = jax.grad(jnp.hypot, argnums=(0, 1))(1e200, 3e200)
r = math.sqrt(10)  # r = hypot(1, 3) * 1e200; the partials are a/r, b/r (closed form)
print("jax d/da, d/db:", float(da), float(db))
print("exact a/r, b/r:", 1 / r, 3 / r)
print("REPRODUCES" if abs(float(db) - 3 / r) > 1e-12 else "FIXED")
