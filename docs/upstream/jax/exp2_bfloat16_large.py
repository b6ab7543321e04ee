"""jax.numpy.exp2 in bfloat16 (XLA, CPU): exp2(117.5) is 1.506e35 where 2^117.5 = 2.350e35
(its bfloat16 rounding 2.350e35 is representable: bfloat16 reaches 3.4e38); float32 is right.
2^117.5 is exact in closed form: 2^117 * sqrt(2). float16 too: exp2(15.9609375) is 64224 where
2^15.9609375 = 63785.35 rounds to 63776 (14 ulps). JAX lowers exp2(x) to exp(log(2) * x) with
log(2) and the product rounded to the input's dtype (jax/_src/lax/lax.py, _exp2_lower)."""
import sys

import jax
import jax.numpy as jnp
import jaxlib

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import math  # noqa: E402

import numpy as np  # noqa: E402

x = jnp.array(117.5, dtype=jnp.bfloat16)
got = float(jnp.exp2(x))
exact = 2.0 ** 117 * math.sqrt(2)
rounded = float(jnp.array(exact, dtype=jnp.float32).astype(jnp.bfloat16))
print("jax exp2(117.5) bfloat16:", got, " float32:", float(jnp.exp2(np.float32(117.5))))
print("exact:", exact, " correctly rounded to bfloat16:", rounded)
h = jnp.array(15.9609375, dtype=jnp.float16)
got16 = float(jnp.exp2(h))
exact16 = float(np.exp2(np.float64(15.9609375)))
print("jax exp2(15.9609375) float16:", got16, " float32:", float(jnp.exp2(np.float32(15.9609375))))
print("exact:", exact16, " correctly rounded to float16:", float(np.float16(exact16)))
print("REPRODUCES" if got != rounded or got16 != float(np.float16(exact16)) else "FIXED")
