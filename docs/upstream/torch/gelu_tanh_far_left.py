"""torch.nn.functional.gelu(approximate='tanh') and its backward in float32, bfloat16 and float16
(CPU, 64 elements) in the negative tail: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
cancels as tanh(u) -> -1.  float32 gelu(-3.84) is ~2900 ulps off (-1.4740e-04 where -1.4736e-04)
and gelu(-5.0625) is -0.0 where -1.50e-07; bfloat16 gelu(-6.40625) is -0.0 where -1.66e-12; in
float16 the derivative at -5.0625 is 0.0 where -1.03e-06 (gelu: -0.0, 3 ulps).  The exact values
use the same function without the cancellation: x sigmoid(2u), and s + 2 x u' s (1 - s) for the
derivative, with s = sigmoid(2u)."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")


def ulps(a, b, dtype):
    bits, mask = {4: (torch.int32, 0x7FFFFFFF), 2: (torch.int16, 0x7FFF)}[dtype.itemsize]
    i = torch.tensor([a, b], dtype=dtype).view(bits).tolist()
    k = [v if v >= 0 else -(v & mask) for v in i]
    return k[0] - k[1]


def exact(x):
    c = math.sqrt(2 / math.pi)
    u, du = c * (x + 0.044715 * x**3), c * (1 + 3 * 0.044715 * x * x)
    s, s_minus = 1 / (1 + math.exp(-2 * u)), 1 / (1 + math.exp(2 * u))  # sigmoid(2u), 1 - it
    return x * s, s + 2 * x * du * s * s_minus


off = False
for dtype, x in ((torch.float32, -3.84), (torch.float32, -5.0625), (torch.bfloat16, -6.40625),
                 (torch.float16, -5.0625)):
    t = torch.full((64,), x, dtype=dtype)
    fwd = torch.nn.functional.gelu(t, approximate="tanh")[0].item()
    bwd = torch.ops.aten.gelu_backward(torch.ones_like(t), t, approximate="tanh")[0].item()
    x = t[0].item()
    e, de = exact(x)
    r, dr = (torch.tensor(v, dtype=torch.float64).to(dtype).item() for v in (e, de))
    print(f"{dtype} x = {x}: gelu {fwd!r}, exact {e!r}, correctly rounded {r!r} "
          f"({ulps(fwd, r, dtype):+d} ulps); gelu' {bwd!r}, exact {de!r}, correctly rounded "
          f"{dr!r} ({ulps(bwd, dr, dtype):+d} ulps)")
    off |= fwd != r or bwd != dr
print("REPRODUCES" if off else "FIXED")
