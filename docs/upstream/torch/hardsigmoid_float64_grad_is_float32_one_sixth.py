"""torch.nn.functional.hardsigmoid: in float64 the derivative on (-3, 3) is
0.1666666716337204, the float32 rounding of 1/6 (3.0e-8 relative off), while the float64
forward is exact ((x + 3) / 6). In float32 the derivative is the correctly rounded 1/6: the
float64 backward uses a single-precision constant."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
got = {}
for dtype in (torch.float32, torch.float64):
    x = torch.tensor([0.3, -1.2, 2.0], dtype=dtype, requires_grad=True)
    y = torch.nn.functional.hardsigmoid(x)
    (g,) = torch.autograd.grad(y.sum(), x)
    got[dtype] = g.tolist()
    print(f"{str(dtype):14} forward == (x + 3) / 6: {torch.equal(y, (x + 3) / 6)}  "
          f"derivative: {g.tolist()}")
exact64 = 1 / 6
exact32 = torch.tensor(1 / 6, dtype=torch.float32).item()
print("exact 1/6 in float64:", repr(exact64), " in float32:", repr(exact32))
assert got[torch.float32] == [exact32] * 3  # float32 is right
print("REPRODUCES" if got[torch.float64] != [exact64] * 3 else "FIXED")
