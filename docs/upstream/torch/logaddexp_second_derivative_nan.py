"""torch.logaddexp: reverse over reverse is nan at (800, -5): the derivatives of d/db
logaddexp(a, b) = 1/(1 + exp(a - b)) are nan where they are +-sigmoid(a-b) sigmoid(b-a) =
+-exp(-805), 0 in float64 (exp(a - b) overflows to inf and inf/inf appears in the double
backward)."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
a = torch.tensor(800.0, dtype=torch.float64, requires_grad=True)
b = torch.tensor(-5.0, dtype=torch.float64, requires_grad=True)
(gb,) = torch.autograd.grad(torch.logaddexp(a, b), b, create_graph=True)
hba, hbb = torch.autograd.grad(gb, (a, b))
print("torch d/db, d2/db da, d2/db2 logaddexp(800, -5):", gb.item(), hba.item(), hbb.item())
print("exact: exp(-805) = 0.0, +exp(-805) = 0.0, -exp(-805) = 0.0 in float64")
print("REPRODUCES" if math.isnan(hba.item()) or math.isnan(hbb.item()) else "FIXED")
