"""torch.nn.functional.gelu (approximate='none'): at x = -10 the forward is -0.0 where
x * Phi(x) = -7.62e-23, and the derivative is 1% off: 0.5 * (1 + erf(x / sqrt 2)) cancels for
x << 0 (erfc would not). jax.nn.gelu(approximate=False) gets both right."""
import sys

import mpmath
import torch

mpmath.mp.dps = 50
print(f"python {sys.version.split()[0]}  torch {torch.__version__}  mpmath {mpmath.__version__}")
x = torch.tensor(-10.0, dtype=torch.float64, requires_grad=True)
y = torch.nn.functional.gelu(x)
y.backward()
X = mpmath.mpf(-10)
exact_y = X * mpmath.ncdf(X)
exact_g = mpmath.ncdf(X) + X * mpmath.npdf(X)
print("torch value, derivative:", y.item(), x.grad.item())
print("exact value, derivative:", mpmath.nstr(exact_y, 17), mpmath.nstr(exact_g, 17))
rel = abs(x.grad.item() - float(exact_g)) / abs(float(exact_g))
print(f"derivative relative error: {rel:.2e}")
print("REPRODUCES" if y.item() == 0 or rel > 1e-6 else "FIXED")
