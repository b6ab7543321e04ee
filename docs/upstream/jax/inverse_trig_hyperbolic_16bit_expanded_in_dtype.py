"""jax.numpy.arccos, arcsin, arcsinh, arctanh, arccosh in bfloat16 and float16 (XLA CPU): one or
two ulps off the correctly rounded value at ordinary points, e.g. arcsinh(1.046875) is 0.91796875
in bfloat16 where asinh(1.046875) = 0.9141339 rounds to 0.9140625, arccosh(1.53125) two ulps high.
Their CHLO decompositions (sqrt, log1p, atan2, divisions) run in the 16-bit type, each step
rounded to it (lgamma and digamma are computed in float32 and rounded once); the same call in
float32, rounded to the 16-bit type, is correctly rounded at every point below."""
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


BF16, F16 = jnp.bfloat16, jnp.float16
POINTS = [  # (function, bfloat16 point, float16 point)
    ("arccos", 0.97265625, 0.703125), ("arcsin", 0.322265625, 0.193115234375),
    ("arcsinh", 1.046875, 478.25), ("arctanh", 0.435546875, 0.1177978515625),
    ("arccosh", 1.53125, 1.447265625),
]
off = 0
for name, xb, xh in POINTS:
    f, exact_f = getattr(jnp, name), getattr(np, name)
    for dtype, x in ((BF16, xb), (F16, xh)):
        got = f(jnp.asarray(x, dtype=dtype))
        via32 = f(jnp.asarray(x, dtype=jnp.float32)).astype(dtype)
        exact = float(exact_f(np.float64(x)))
        rounded = np.asarray(exact).astype(dtype)
        u = ulps(got, rounded, dtype)
        off += u != 0
        print(f"{name}({x}) {np.dtype(dtype).name}: jax {float(got)!r}, float32 rounded "
              f"{float(via32)!r}; exact {exact!r}, correctly rounded {float(rounded)!r}: "
              f"{u:+d} ulps")
print(f"{off} of {2 * len(POINTS)} points off")
print("REPRODUCES" if off else "FIXED")
