"""jax.scipy.special.gammainc (lax.igamma): the regularized lower incomplete gamma P(a, x) is
wrong at a = x = 1e12..1e15 (0.5009 at 1e12, 0.4766 at 1e13, 0.675 at 1e14, 0.352 at 1e15)
where P(a, a) = 1/2 + 1/(3 sqrt(2 pi a)) + O(a^-3/2) (scipy.special.gammainc(1e15, 1e15):
0.5000000042); the run time grows with a (seconds at 1e15)."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import math  # noqa: E402

import jax.scipy.special as jss  # noqa: E402

bad = False
for a in (1e12, 1e13):
    got = float(jss.gammainc(a, a))
    exact = 0.5 + 1 / (3 * math.sqrt(2 * math.pi * a))  # asymptotic, error O(a^-1.5) < 1e-17
    print(f"a = x = {a:g}: jax gammainc = {got!r}  exact = {exact!r}")
    bad |= abs(got - exact) > 1e-9
print("REPRODUCES" if bad else "FIXED")
