"""torch.pow: the mixed second partial d/db (d/da a**b) is 0 at b = 0, where it is
a**(b-1) + b a**(b-1) log(a) = 1/a. The other order, d/da (d/db a**b), is right: the Hessian
comes out asymmetric. The backward w.r.t. the base masks b * a**(b-1) to 0 where b == 0, and
that mask cuts the derivative w.r.t. b."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
a = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
b = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
(da,) = torch.autograd.grad(a ** b, a, create_graph=True)
(da_db,) = torch.autograd.grad(da, b)
(db,) = torch.autograd.grad(a ** b, b, create_graph=True)
(db_da,) = torch.autograd.grad(db, a)
exact = 1 / 2.0  # d2/da db a**b at b = 0: a**(b-1) (1 + b log a) = 1/a
print("d/db (d/da a**b) at a=2, b=0:", da_db.item())
print("d/da (d/db a**b) at a=2, b=0:", db_da.item())
print("exact 1/a:                   ", exact)
print("REPRODUCES" if da_db.item() != exact else "FIXED")
