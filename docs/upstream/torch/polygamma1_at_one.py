"""torch.special.polygamma(1, x) (trigamma, also digamma's derivative): at x = 1 it is
1.6449340676383 where pi^2/6 = 1.6449340668482, 4.8e-10 relative off (a truncated series);
scipy.special.polygamma and jax.scipy.special.polygamma give pi^2/6 to the last digit."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
tri = torch.special.polygamma(1, x).item()
torch.special.digamma(x).backward()
exact = math.pi ** 2 / 6  # closed form: trigamma(1) = zeta(2)
print("torch polygamma(1, 1), digamma'(1):", repr(tri), repr(x.grad.item()))
print("exact pi^2/6:                      ", repr(exact))
print(f"relative error: {abs(tri - exact) / exact:.2e}")
print("REPRODUCES" if abs(tri - exact) > 1e-13 * exact else "FIXED")
