"""jax.numpy.sinc: the derivative is wrong for |x| below ~1e-4: -inf below ~1e-155, then 0.0 or
huge positive values (1.4e134 at 1e-150, 1.9e24 at 1e-40) up to 1e-15, -1.5e-6 at 1e-10 (exact
-3.3e-10), 2.3e-7 relative off at 1e-5, 1.9e-9 at 1e-4; from 1e-3 up it is right to ~1e-11.
The exact value is -pi^2 x / 3 (1 - pi^2 x^2 / 10 + ...)."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import mpmath  # noqa: E402
import numpy as np  # noqa: E402

mpmath.mp.dps = 700  # the closed form below cancels to ~x^3: 700 digits cover x = 1e-300
xs = [1e-300, 1e-150, 1e-100, 1e-40, 1e-15, 1e-10, 1e-5, 1e-4, 1e-3]
got = np.asarray(jax.vmap(jax.grad(jnp.sinc))(jnp.array(xs)))
worst = 0.0
for x, g in zip(xs, got.tolist(), strict=True):
    X = mpmath.mpf(x)
    exact = float((mpmath.pi * X * mpmath.cos(mpmath.pi * X) - mpmath.sin(mpmath.pi * X))
                  / (mpmath.pi * X * X))
    rel = abs(g - exact) / abs(exact)
    worst = max(worst, rel)
    print(f"x = {x:g}: jax sinc' = {g!r}  exact = {exact!r}  relative error {rel:.2e}")
print("REPRODUCES" if worst > 1e-6 else "FIXED")
