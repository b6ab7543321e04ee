"""torch.cumprod: forward over forward gives an asymmetric Hessian at a row with a zero:
for f(z) = cumprod(z)[3] at [0.7, 0, -1.3, 1.1], d2f/dz0 dz1 is 0 in jacfwd(jacfwd(f)) where
it is z2 z3 = -1.43 (reverse over reverse gives it)."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
z = torch.tensor([0.7, 0.0, -1.3, 1.1], dtype=torch.float64)


def f(v):
    return torch.cumprod(v, 0)[3]


ff = torch.func.jacfwd(torch.func.jacfwd(f))(z)
rr = torch.func.hessian(f)(z)
exact = -1.3 * 1.1  # d2/dz0 dz1 of z0 z1 z2 z3 (closed form)
print("torch forward/forward H[0,1], H[1,0]:", ff[0, 1].item(), ff[1, 0].item())
print("torch reverse Hessian H[0,1]:        ", rr[0, 1].item())
print("exact:", exact)
print("REPRODUCES" if abs(ff[0, 1].item() - exact) > 1e-12 or abs(ff[1, 0].item() - exact) > 1e-12
      else "FIXED")
