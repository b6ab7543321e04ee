"""jax.numpy.exp2 in bfloat16 (XLA, CPU): exp2(117.5) is 1.506e35 where 2^117.5 = 2.350e35
(its bfloat16 rounding 2.350e35 is representable: bfloat16 reaches 3.4e38); float32 is right.
2^117.5 is exact in closed form: 2^117 * sqrt(2)."""
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
print("REPRODUCES" if got != rounded else "FIXED")
