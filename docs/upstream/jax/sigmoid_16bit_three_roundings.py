"""jax.nn.sigmoid (lax.logistic) in bfloat16 and float16 (XLA CPU): two ulps off at ordinary
points (sigmoid(-5.59375) is 0.0037384 in bfloat16 where 1/(1 + e^5.59375) = 0.0037073 rounds to
0.0037079), and 0.0 in float16 for x <= -11.09375, where e^-x overflows float16 (65504):
sigmoid(-11.09375) = 1.52e-5 is representable (a float16 subnormal). JAX lowers logistic to
1 / (1 + exp(-x)) in the input's dtype (jax/_src/lax/lax.py, logistic_impl: three roundings and
the overflow); the same call in float32, rounded to the 16-bit type, is right at these points."""
import sys

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")


def ulps(a, b, dtype):
    """a - b in units in the last place of the 16-bit dtype."""
    i, j = (int(np.asarray(v, dtype).view(np.int16)) for v in (a, b))
    return (i if i >= 0 else -(i & 0x7FFF)) - (j if j >= 0 else -(j & 0x7FFF))


POINTS = [(jnp.bfloat16, -5.59375), (jnp.float16, -0.02935791015625), (jnp.float16, -11.09375)]
off = 0
for dtype, x in POINTS:
    got = jax.nn.sigmoid(jnp.asarray(x, dtype=dtype))
    via32 = jax.nn.sigmoid(jnp.asarray(x, dtype=jnp.float32)).astype(dtype)
    exact = float(1 / (1 + np.exp(-np.float64(x))))
    rounded = np.asarray(exact).astype(dtype)
    u = ulps(got, rounded, dtype)
    off += u != 0
    print(f"sigmoid({x}) {np.dtype(dtype).name}: jax {float(got)!r}, float32 rounded "
          f"{float(via32)!r}; exact {exact!r}, correctly rounded {float(rounded)!r}: {u:+d} ulps")
print(f"{off} of {len(POINTS)} points off")
print("REPRODUCES" if off else "FIXED")
