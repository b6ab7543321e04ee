"""torch.rsqrt in bfloat16 (CPU): on a one-element tensor rsqrt(4.75) is 0.4609375, one bfloat16
ulp above the correctly rounded 0.458984375 (4.75^-1/2 = 0.45883...), which the vectorized
path (32 elements) gives."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")

x = 4.75
one = torch.rsqrt(torch.tensor([x], dtype=torch.bfloat16)).item()
many = torch.rsqrt(torch.full((32,), x, dtype=torch.bfloat16))[0].item()
exact = x ** -0.5
rounded = torch.tensor(exact, dtype=torch.float64).to(torch.bfloat16).item()
print("one element:", one, " 32 elements:", many)
print("exact:", exact, " correctly rounded to bfloat16:", rounded)
print("REPRODUCES" if one != rounded else "FIXED")
