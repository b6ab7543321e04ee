"""torch.expm1: the derivative at x = -100 is 0.0 where exp(-100) = 3.72e-44 (computed from the
saved output as expm1(x) + 1, which cancels)."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
x = torch.tensor(-100.0, dtype=torch.float64, requires_grad=True)
torch.expm1(x).backward()
print("torch expm1'(-100):", x.grad.item(), " exact exp(-100):", math.exp(-100.0))
print("REPRODUCES" if x.grad.item() == 0 else "FIXED")
