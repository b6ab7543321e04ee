"""x ** -2 (lax.integer_pow) in bfloat16 and float16 (XLA CPU): 0.0 in float16 at x = 256 where
256^-2 = 1.52587890625e-05 is representable (x * x = 65536 overflows float16 first), 4 ulps low
at x = 0.003910064697265625 (x * x is a float16 subnormal), one ulp off in bfloat16
(0.5546875^-2 is 3.234375 where 3.2501488 rounds to 3.25). JAX lowers integer_pow to repeated
products and a reciprocal in the input's dtype (jax/_src/lax/lax.py, _integer_pow), each rounded
to it; the same power in float32, rounded to the 16-bit type, is right at these points (it is
also in the backward of 1/x, x ** 3 and jnp.cbrt)."""
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


POINTS = [(jnp.float16, 256.0), (jnp.float16, 0.003910064697265625), (jnp.bfloat16, 0.5546875)]
off = 0
for dtype, x in POINTS:
    got = jnp.asarray(x, dtype=dtype) ** -2
    via32 = (jnp.asarray(x, dtype=jnp.float32) ** -2).astype(dtype)
    exact = float(np.float64(x) ** -2)
    rounded = np.asarray(exact).astype(dtype)
    u = ulps(got, rounded, dtype)
    off += u != 0
    print(f"{x} ** -2 {np.dtype(dtype).name}: jax {float(got)!r}, float32 rounded "
          f"{float(via32)!r}; exact {exact!r}, correctly rounded {float(rounded)!r}: {u:+d} ulps")
print(f"{off} of {len(POINTS)} points off")
print("REPRODUCES" if off else "FIXED")
