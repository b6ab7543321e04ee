"""jax.scipy.special.gammaincc (lax.igammac): the regularized upper incomplete gamma Q(a, x) is
above 1 at a = x = 1e12..1e15 (8.40 at 1e12, 25.2 at 1e13, 186 at 1e15) where
Q(a, a) = 1/2 - 1/(3 sqrt(2 pi a)) + O(a^-3/2); at a = x = 1e10 it is 0.934."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import math  # noqa: E402

import jax.scipy.special as jss  # noqa: E402

bad = False
for a in (1e10, 1e12, 1e13):
    got = float(jss.gammaincc(a, a))
    exact = 0.5 - 1 / (3 * math.sqrt(2 * math.pi * a))  # asymptotic, error O(a^-1.5) < 1e-14
    print(f"a = x = {a:g}: jax gammaincc = {got!r}  exact = {exact!r}")
    bad |= abs(got - exact) > 1e-9
print("REPRODUCES" if bad else "FIXED")
