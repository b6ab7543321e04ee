"""jax.numpy.hypot: the Hessian at (1e200, 3e200) has d2/da db = +1.054e-201 and d2/db2 = 0, where
they are -ab/r^3 = -9.49e-202 and a^2/r^3 = 3.16e-202 (d2/da2 = b^2/r^3 = 2.85e-201 is right)."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")


(haa, hab), (_, hbb) = jax.hessian(jnp.hypot, argnums=(0, 1))(1e200, 3e200)
r3 = 10 ** 1.5  # r^3 = 10^1.5 * 1e600; closed form partials b^2/r^3, -ab/r^3, a^2/r^3
exact = (9 / r3 * 1e-200, -3 / r3 * 1e-200, 1 / r3 * 1e-200)
got = (float(haa), float(hab), float(hbb))
print("jax   d2/da2, d2/dadb, d2/db2:", got)
print("exact d2/da2, d2/dadb, d2/db2:", exact)
bad = any(abs(g - e) > 1e-9 * abs(e) for g, e in zip(got, exact, strict=True))
print("REPRODUCES" if bad else "FIXED")
