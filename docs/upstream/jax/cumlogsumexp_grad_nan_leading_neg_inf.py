"""jax.lax.cumlogsumexp: the gradient is nan at leading -inf entries, where it is 0 (exp(-inf)
has weight 0 in every partial sum): [-inf, -inf, 0] gives [nan, nan, 1]; a trailing or inner
-inf ([0, -inf, 1]) gives the right 0."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import numpy as np  # noqa: E402

x = jnp.array([-jnp.inf, -jnp.inf, 0.0])
g = np.asarray(jax.grad(lambda v: jax.lax.cumlogsumexp(v).sum())(x))
print("jax forward:", np.asarray(jax.lax.cumlogsumexp(x)).tolist(), " gradient:", g.tolist())
print("exact gradient: [0.0, 0.0, 1.0]"
      " (d/dx_i sum_k logsumexp(x_0..x_k) = sum_k>=i exp(x_i - y_k))")
print("REPRODUCES" if np.isnan(g).any() else "FIXED")
