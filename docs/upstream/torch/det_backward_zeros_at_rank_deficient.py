"""torch.linalg.det: the tape .backward() at a 3x3 matrix of rank 2 (two equal rows) returns
all zeros, where the gradient is the adjugate (cofactors, e.g. 11 at [0, 0]);
torch.func.grad gets it right."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
a = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.5, 1.0, 7.0]], dtype=torch.float64,
                 requires_grad=True)
torch.linalg.det(a).backward()
func = torch.func.grad(torch.linalg.det)(a.detach())
print("torch .backward():", a.grad.tolist())
print("torch.func.grad:  ", func.tolist())
print("exact (adjugate^T) [0, 0] = 2*7 - 3*1 = 11")
print("REPRODUCES" if bool((a.grad == 0).all()) else "FIXED")
