"""torch.asinh: the derivative is 0 for |x| above ~1.34e154, where 1/sqrt(1 + x^2) ~ 1/|x| is
representable (x * x overflows to inf inside the backward formula)."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
x = torch.tensor([1e100, 1.3e154, 1.4e154, 1e200], dtype=torch.float64, requires_grad=True)
torch.asinh(x).sum().backward()
exact = 1 / x.detach()  # 1/sqrt(1 + x^2) = 1/x to 1e-200 relative at these x
print("x        ", x.detach().tolist())
print("torch    ", x.grad.tolist())
print("exact 1/x", exact.tolist())
print("REPRODUCES" if bool((x.grad == 0).any()) else "FIXED")
