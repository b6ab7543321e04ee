"""Division by a constant in float16 (XLA CPU): x / 6 at x = 1.5009765625 is 0.25 where
1.5009765625 / 6 = 0.25016276 rounds to 0.250244140625 (0.33 ulp away; 0.25 is 0.67 ulp away).
XLA's algebraic simplifier rewrites x / c as x * (1 / c) and rounds 1 / c to float16 (0.16663
for 1/6), so the quotient takes two roundings; the same division with the divisor passed as an
argument is correctly rounded (IEEE division). jax.nn.hard_sigmoid (relu6(x + 3) / 6) and
jnp.log2 (log(x) / log(2)) inherit it; bfloat16 is computed in float32 and is right here."""
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


f16 = jnp.float16
x = jnp.full(4, 1.5009765625, dtype=f16)  # (eager x / 6 on one element divides: right)
exact = 1.5009765625 / 6
rounded = np.asarray(exact).astype(f16)
results = {
    "x / 6 (eager)": x / 6,
    "jax.jit(lambda x: x / 6)(x)": jax.jit(lambda x: x / 6)(x),
    "jax.nn.hard_sigmoid(x - 3)": jax.nn.hard_sigmoid(jnp.full(4, 1.5009765625 - 3, dtype=f16)),
    "jax.jit(lambda x, y: x / y)(x, 6) (divisor an argument)":
        jax.jit(lambda x, y: x / y)(x, jnp.full(4, 6, dtype=f16)),
    "bfloat16 x / 6": jnp.full(4, 1.5009765625, dtype=jnp.bfloat16) / 6,
}
print(f"exact {exact!r}, correctly rounded to float16 {float(rounded)!r}; float16(1/6) = "
      f"{float(np.float16(1 / 6))!r}")
off = 0
for what, got in list(results.items())[:4]:
    got = got[0]
    u = ulps(got, rounded, f16)
    off += u != 0 and "argument" not in what
    print(f"{what}: {float(got)!r} ({u:+d} ulps)")
b = np.asarray(exact).astype(jnp.bfloat16)
print(f"bfloat16 x / 6: {float(results['bfloat16 x / 6'][0])!r}, correctly rounded {float(b)!r}")
print("REPRODUCES" if off else "FIXED")
