"""torch.linalg.vector_norm: the 2-norm of [1e200, 1e200] is inf (and its gradient 0), where
sqrt(2) * 1e200 is representable: the sum of squares is not scaled (as BLAS nrm2 or
numpy.hypot do)."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
x = torch.tensor([1e200, 1e200], dtype=torch.float64, requires_grad=True)
n = torch.linalg.vector_norm(x)
n.backward()
exact = 2 ** 0.5 * 1e200  # closed form; gradient x/||x|| = [0.7071, 0.7071]
print("torch value, gradient:", n.item(), x.grad.tolist())
print("exact value, gradient:", exact, [2 ** -0.5] * 2)
print("REPRODUCES" if n.item() == float("inf") else "FIXED")
