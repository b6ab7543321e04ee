"""jax.numpy.expm1, jax.nn.elu, jax.nn.selu: the derivative at x = -100 is 0.0 where it is
exp(-100) = 3.72e-44 (times alpha, scale for elu/selu): computed from the saved output, which
cancels (torch.nn.functional.elu is right)."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import math  # noqa: E402

got = [float(jax.grad(f)(-100.0)) for f in (jnp.expm1, jax.nn.elu, jax.nn.selu)]
alpha, scale = 1.6732632423543772, 1.0507009873554805
exact = [math.exp(-100.0), math.exp(-100.0), scale * alpha * math.exp(-100.0)]
print("jax expm1', elu', selu' at -100:", got)
print("exact:                          ", exact)
print("REPRODUCES" if 0.0 in got else "FIXED")
