"""jax.numpy.expm1 in float16 (XLA CPU): two ulps off at ordinary points, e.g. expm1(0.22216796875)
is 0.2490234375 where e^0.22216796875 - 1 = 0.2487811 rounds to 0.248779296875 (and
expm1(-0.1296) in jax.nn.elu, selu, celu). XLA CPU evaluates expm1 in float16 itself (no
conversion to float32 in the compiled HLO); bfloat16 is converted to float32 and rounded once,
and is correctly rounded, as is the float32 call rounded to float16."""
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


POINTS = [0.22216796875, 0.055816650390625, -0.129638671875]
off = 0
for x in POINTS:
    got = jnp.expm1(jnp.asarray(x, dtype=jnp.float16))
    via32 = jnp.expm1(jnp.asarray(x, dtype=jnp.float32)).astype(jnp.float16)
    exact = float(np.expm1(np.float64(x)))
    rounded = np.float16(exact)
    u = ulps(got, rounded, np.float16)
    off += u != 0
    print(f"expm1({x}) float16: jax {float(got)!r}, float32 rounded {float(via32)!r}; exact "
          f"{exact!r}, correctly rounded {float(rounded)!r}: {u:+d} ulps")
print(f"{off} of {len(POINTS)} points off")
print("REPRODUCES" if off else "FIXED")
