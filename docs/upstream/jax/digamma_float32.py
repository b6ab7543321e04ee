"""jax.scipy.special.digamma (lax.digamma) in float32 (XLA CPU): digamma(1.5654525756835938) is
0.09596413 where psi(1.5654525756835938) = 0.0959631887 rounds to 0.09596319: 127 ulps
(9.8e-6 relative) where the function's condition number there (x psi'(x) / psi(x)) is about 14,
so a backward-stable float32 result would be within about 15 ulps. A dense float32 scan of
[0.5, 8] finds errors above 8 eps (2^-24) of |psi| + |x psi'| at scattered points between 1.004
and 3.34 (up to 13 eps, 1276 of 2 million points)."""
import sys

import jax
import jax.numpy as jnp
import jaxlib
import mpmath
import numpy as np
from jax.scipy.special import digamma

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")
mpmath.mp.dps = 50


def ulps32(a, b):
    """a - b in units in the last place of float32."""
    i, j = (int(np.asarray(v, np.float32).view(np.int32)) for v in (a, b))
    return (i if i >= 0 else -(i & 0x7FFFFFFF)) - (j if j >= 0 else -(j & 0x7FFFFFFF))


x = 1.5654525756835938  # a float32 value
got = digamma(jnp.asarray(x, dtype=jnp.float32))
exact = mpmath.digamma(mpmath.mpf(x))
rounded = np.float32(float(exact))
cond = float(x * mpmath.psi(1, x) / exact)
u = ulps32(got, rounded)
print(f"digamma({x}) float32: jax {float(got)!r}; exact {mpmath.nstr(exact, 15)}, correctly "
      f"rounded {float(rounded)!r}: {u:+d} ulps; condition number {cond:.1f}")
print("REPRODUCES" if abs(u) > 2 * (abs(cond) + 1) else "FIXED")
