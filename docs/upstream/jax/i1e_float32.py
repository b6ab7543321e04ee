"""jax.scipy.special.i1e (lax.bessel_i1e) in float32 (XLA CPU): i1e(-7.806293964385986) is
-0.13561456 where e^-|x| I1(x) = -0.1356144108 rounds to -0.13561441: 10 ulps (1.1e-6
relative) where i1e is well conditioned (x i1e'(x) / i1e(x) is about -0.4). A dense float32
scan of [-20, 20] finds relative errors above 8 eps (2^-24) only for 4.7 <= |x| <= 8, the
range of the |x| <= 8 branch's Chebyshev series next to the switch to the large-x one."""
import sys

import jax
import jax.numpy as jnp
import jaxlib
import mpmath
import numpy as np
from jax.scipy.special import i1e

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")
mpmath.mp.dps = 50


def ulps32(a, b):
    """a - b in units in the last place of float32."""
    i, j = (int(np.asarray(v, np.float32).view(np.int32)) for v in (a, b))
    return (i if i >= 0 else -(i & 0x7FFFFFFF)) - (j if j >= 0 else -(j & 0x7FFFFFFF))


x = -7.806293964385986  # a float32 value
got = i1e(jnp.asarray(x, dtype=jnp.float32))
exact = mpmath.besseli(1, x) * mpmath.exp(-abs(mpmath.mpf(x)))
rounded = np.float32(float(exact))
slope = mpmath.exp(-abs(mpmath.mpf(x))) * (mpmath.besseli(0, x) - mpmath.besseli(1, x) / x) + exact
cond = float(x * slope / exact)  # i1e' = e^-|x| I1'(x) - sign(x) i1e(x), I1' = I0 - I1/x
u = ulps32(got, rounded)
print(f"i1e({x}) float32: jax {float(got)!r}; exact {mpmath.nstr(exact, 15)}, correctly "
      f"rounded {float(rounded)!r}: {u:+d} ulps; condition number {cond:.2f}")
print("REPRODUCES" if abs(u) > 2 else "FIXED")
