"""torch.atan2: both partials are 0 at (1e-200, 3e-200), where x/(x^2+y^2) = 3e199 and
-y/(x^2+y^2) = -1e199 are representable: y*y + x*x underflows to 0 and the backward's guard for
the (0, 0) point (denominator == 0 -> 0) zeroes the gradient of every input whose squares
underflow."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
y = torch.tensor(1e-200, dtype=torch.float64, requires_grad=True)
x = torch.tensor(3e-200, dtype=torch.float64, requires_grad=True)
torch.atan2(y, x).backward()
# closed form with x^2 + y^2 = 1e-399: d/dy = x/(x^2+y^2), d/dx = -y/(x^2+y^2)
exact_y, exact_x = 3 / 10 * 1e200, -1 / 10 * 1e200
print("torch d/dy, d/dx:", y.grad.item(), x.grad.item())
print("exact d/dy, d/dx:", exact_y, exact_x)
print("REPRODUCES" if y.grad.item() == 0 or x.grad.item() == 0 else "FIXED")
