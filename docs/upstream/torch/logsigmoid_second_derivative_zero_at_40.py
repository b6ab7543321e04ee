"""torch.nn.functional.logsigmoid: the second derivative at x = 40 is 0.0 where
-sigmoid(x) sigmoid(-x) = -4.25e-18 (at x = -40 it is right)."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
got = []
for v in (40.0, -40.0):
    x = torch.tensor(v, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(torch.nn.functional.logsigmoid(x), x, create_graph=True)
    (h,) = torch.autograd.grad(g, x)
    got.append(h.item())
exact = -math.exp(-40.0) / (1 + math.exp(-40.0)) ** 2  # closed form, even in x
print("torch logsigmoid''(40), logsigmoid''(-40):", got)
print("exact:", exact)
print("REPRODUCES" if got[0] == 0 else "FIXED")
