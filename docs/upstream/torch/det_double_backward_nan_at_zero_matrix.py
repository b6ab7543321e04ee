"""torch.linalg.det: the second derivative (reverse over reverse) at the zero 3x3 matrix is all
nan, where det is a cubic polynomial whose Hessian at 0 is exactly 0."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
a = torch.zeros(3, 3, dtype=torch.float64, requires_grad=True)
(g,) = torch.autograd.grad(torch.linalg.det(a), a, create_graph=True)
(h,) = torch.autograd.grad(g.sum(), a)
print("torch first derivative (the adjugate, 0):", g.tolist())
print("torch d/da sum(d det/da):", h.tolist())
print("exact: all 0 (every entry of the Hessian of a cubic at 0 vanishes)")
print("REPRODUCES" if bool(h.isnan().any()) else "FIXED")
