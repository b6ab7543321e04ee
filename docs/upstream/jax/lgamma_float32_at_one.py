"""jax.scipy.special.gammaln (lax.lgamma) in float32 (XLA CPU): lgamma(1) is 4.76837158e-07
(2^-21) where it is exactly 0, and lgamma(-2.610048770904541) is -0.11862874 where -0.11862754
(161 ulps, 1.0e-5 relative). bfloat16 and float16 are computed in float32 and rounded once, so
lgamma(1) is 2^-21 in them too (exact 0)."""
import math
import sys

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
from jax.scipy.special import gammaln

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")


def ulps32(a, b):
    """a - b in units in the last place of float32."""
    i, j = (int(np.asarray(v, np.float32).view(np.int32)) for v in (a, b))
    return (i if i >= 0 else -(i & 0x7FFFFFFF)) - (j if j >= 0 else -(j & 0x7FFFFFFF))


off = 0
for dtype in (jnp.float32, jnp.bfloat16, jnp.float16):
    got = float(gammaln(jnp.asarray(1.0, dtype=dtype)))
    off += got != 0.0
    print(f"gammaln(1.0) {np.dtype(dtype).name}: jax {got!r}; exact 0.0")
x = -2.610048770904541  # a float32 value
got = gammaln(jnp.asarray(x, dtype=jnp.float32))
exact = math.lgamma(x)
rounded = np.float32(exact)
u = ulps32(got, rounded)
off += abs(u) > 8
print(f"gammaln({x}) float32: jax {float(got)!r}; exact {exact!r}, correctly rounded "
      f"{float(rounded)!r}: {u:+d} ulps")
print("REPRODUCES" if off else "FIXED")
