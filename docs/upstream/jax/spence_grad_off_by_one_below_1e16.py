"""jax.scipy.special.spence: the derivative log(x) / (1 - x) is off for small x, by exactly -1
from about 1e-17 down to the smallest normal number (the forward is right). scipy.special.spence
is int_1^x log(t) / (1 - t) dt, so its derivative is log(x) / (1 - x)."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import math  # noqa: E402

import jax.scipy.special as jss  # noqa: E402

bad = False
for x in (1e-8, 1e-16, 1e-17, 1e-20, 1e-100, 2.2250738585072014e-308):
    got = float(jax.grad(jss.spence)(x))
    exact = math.log(x) / (1 - x)  # closed form
    print(f"x = {x:.3g}: jax spence'(x) = {got!r}  exact log(x)/(1-x) = {exact!r}  "
          f"diff = {got - exact:.3g}")
    bad |= abs(got - exact) > 1e-9 * abs(exact)
print("REPRODUCES" if bad else "FIXED")
