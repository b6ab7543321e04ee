"""jax.scipy.special.log_ndtr: at x = -30 the derivative is 30.0332596722 where
phi(x)/Phi(x) = 30.0332596674 (1.6e-10 relative off) and the second derivative -0.998896371727
where it is -0.998896228488 (1.4e-7 off): below x = -20 log_ndtr uses an asymptotic series of
a documented fixed order (series_order=3), accurate to ~1e-10 at -30. Borderline: the
truncation is documented; a higher order (or an erfcx form) would fix it."""
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jaxlib  # noqa: E402

print(f"python {sys.version.split()[0]}  jax {jax.__version__}  jaxlib {jaxlib.__version__}")

import jax.scipy.special as jss  # noqa: E402
import mpmath  # noqa: E402

mpmath.mp.dps = 50
X = mpmath.mpf(-30)
d1 = mpmath.diff(lambda t: mpmath.log(mpmath.ncdf(t)), X)
d2 = mpmath.diff(lambda t: mpmath.log(mpmath.ncdf(t)), X, 2)
g1 = float(jax.grad(jss.log_ndtr)(-30.0))
g2 = float(jax.grad(jax.grad(jss.log_ndtr))(-30.0))
print(f"mpmath {mpmath.__version__}")
print("jax   d/dx, d2/dx2 log_ndtr(-30):", repr(g1), repr(g2))
print("exact d/dx, d2/dx2 log_ndtr(-30):", mpmath.nstr(d1, 15), mpmath.nstr(d2, 15))
print("REPRODUCES" if abs(g1 - float(d1)) > 1e-13 * abs(float(d1)) else "FIXED")
