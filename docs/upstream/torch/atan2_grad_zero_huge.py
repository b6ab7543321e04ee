"""torch.atan2: both partials are 0 at (1e200, -3e200), where x/(x^2+y^2) and -y/(x^2+y^2) are
representable (-3e-201, -1e-201): y*y + x*x overflows in the backward formula."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
y = torch.tensor(1e200, dtype=torch.float64, requires_grad=True)
x = torch.tensor(-3e200, dtype=torch.float64, requires_grad=True)
torch.atan2(y, x).backward()
# x/(x^2+y^2), -y/(x^2+y^2) with x^2+y^2 = 1e401: closed form
exact_y, exact_x = -3 / 10 * 1e-200, -1 / 10 * 1e-200
print("torch d/dy, d/dx:", y.grad.item(), x.grad.item())
print("exact d/dy, d/dx:", exact_y, exact_x)
print("REPRODUCES" if y.grad.item() == 0 or x.grad.item() == 0 else "FIXED")
