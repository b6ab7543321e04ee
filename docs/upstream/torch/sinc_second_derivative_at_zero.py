"""torch.sinc: the second derivative at x = 0 is nan in reverse over reverse and 0 in forward
over forward, where sinc''(0) = -pi^2/3 (the first derivative at 0, 0, is right)."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
x = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
(g,) = torch.autograd.grad(torch.sinc(x), x, create_graph=True)
(rr,) = torch.autograd.grad(g, x)
ff = torch.func.jacfwd(torch.func.jacfwd(torch.sinc))(torch.tensor(0.0, dtype=torch.float64))
exact = -math.pi ** 2 / 3  # closed form: sinc(x) = 1 - (pi x)^2 / 6 + ...
print("torch sinc'(0):", g.item(), " sinc''(0) reverse/reverse:", rr.item(),
      " forward/forward:", ff.item())
print("exact sinc''(0):", exact)
print("REPRODUCES" if not (abs(rr.item() - exact) < 1e-9 and abs(ff.item() - exact) < 1e-9)
      else "FIXED")
