"""torch.special.erfcx: the derivative 2 x erfcx(x) - 2/sqrt(pi) cancels for large x: it is 0.0
at x = 1e10 where it is -1/(sqrt(pi) x^2) (1 + O(1/x^2)) = -5.64e-21, and its second derivative
is 1.1e-10 where it is ~2/(sqrt(pi) x^3) = 1.1e-30 (the forward, 5.64e-11, is right)."""
import sys

import mpmath
import torch

mpmath.mp.dps = 50
print(f"python {sys.version.split()[0]}  torch {torch.__version__}  mpmath {mpmath.__version__}")
x = torch.tensor(1e10, dtype=torch.float64, requires_grad=True)
(g,) = torch.autograd.grad(torch.special.erfcx(x), x, create_graph=True)
(g2,) = torch.autograd.grad(g, x)
X = mpmath.mpf(10) ** 10
exact = 2 * X * mpmath.exp(X * X) * mpmath.erfc(X) - 2 / mpmath.sqrt(mpmath.pi)
print("torch erfcx(1e10), erfcx'(1e10), erfcx''(1e10):", torch.special.erfcx(x).item(), g.item(),
      g2.item())
print("exact erfcx'(1e10):", mpmath.nstr(exact, 17))
print("REPRODUCES" if g.item() == 0 else "FIXED")
