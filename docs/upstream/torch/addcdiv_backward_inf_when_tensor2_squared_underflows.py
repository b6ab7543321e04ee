"""torch.addcdiv: reverse mode w.r.t. tensor2 is -inf where the derivative
-value * tensor1 / tensor2**2 is finite: tensor2**2 underflows to 0 in the backward formula.
Forward mode (torch.func.jvp) and plain division get it right."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
s = torch.tensor([1.0], dtype=torch.float64)
t1 = torch.tensor([1e-300], dtype=torch.float64)
t2 = torch.tensor([3e-300], dtype=torch.float64, requires_grad=True)
torch.addcdiv(s, t1, t2, value=1.0).sum().backward()
exact = -1e-300 / 3e-300 / 3e-300  # -t1 / t2^2 = -1.111e299 (closed form, finite)
_, fwd = torch.func.jvp(lambda b: torch.addcdiv(s, t1, b), (t2.detach(),),
                        (torch.ones(1, dtype=torch.float64),))
t2d = t2.detach().clone().requires_grad_(True)
(s + t1 / t2d).sum().backward()
print("addcdiv reverse mode d/dtensor2:", t2.grad.item())
print("addcdiv forward mode d/dtensor2:", fwd.item())
print("s + t1 / t2, reverse mode:      ", t2d.grad.item())
print("exact -t1/t2^2:                 ", exact)
print("REPRODUCES" if t2.grad.item() != exact and not abs(t2.grad.item()) < float("inf")
      else "FIXED")
