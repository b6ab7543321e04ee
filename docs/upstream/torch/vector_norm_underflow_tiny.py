"""torch.linalg.vector_norm: the 2-norm of [1e-200, 3e-200] is 0 (and its gradient 0), where
sqrt(10) * 1e-200 is a normal number: the squares underflow (no scaling)."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
x = torch.tensor([1e-200, 3e-200], dtype=torch.float64, requires_grad=True)
n = torch.linalg.vector_norm(x)
n.backward()
r = 10 ** 0.5
exact, exact_grad = r * 1e-200, [1 / r, 3 / r]  # closed form
print("torch value, gradient:", n.item(), x.grad.tolist())
print("exact value, gradient:", exact, exact_grad)
print("REPRODUCES" if n.item() == 0 else "FIXED")
