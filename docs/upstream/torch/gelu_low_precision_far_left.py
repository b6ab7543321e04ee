"""torch.nn.functional.gelu (approximate='none') and its backward in float32, bfloat16 and
float16 (CPU, 64 elements) in the negative tail: 0.5 x (1 + erf(x/sqrt 2)) cancels, as T13 shows
in float64.  float32 gelu(-5.5) is -1.64e-07 where -1.044e-07 (57% off) and gelu(-7.5) is -0.0
where -2.39e-13; bfloat16 gelu(-6) is -0.0 where -5.91e-09; float16 gelu(-4.0898) is 2 ulps off.
The exact values use erfc: 0.5 x erfc(-x/sqrt 2), and Phi(x) + x phi(x) for the derivative."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")


def ulps(a, b, dtype):
    bits, mask = {4: (torch.int32, 0x7FFFFFFF), 2: (torch.int16, 0x7FFF)}[dtype.itemsize]
    i = torch.tensor([a, b], dtype=dtype).view(bits).tolist()
    k = [v if v >= 0 else -(v & mask) for v in i]
    return k[0] - k[1]


def rounded(v, dtype):
    return torch.tensor(v, dtype=torch.float64).to(dtype).item()


off = False
for dtype, x in ((torch.float32, -5.5), (torch.float32, -7.5), (torch.bfloat16, -6.0),
                 (torch.float16, -4.08984375)):
    t = torch.full((64,), x, dtype=dtype)
    fwd = torch.nn.functional.gelu(t)[0].item()
    bwd = torch.ops.aten.gelu_backward(torch.ones_like(t), t)[0].item()
    exact = 0.5 * x * math.erfc(-x / math.sqrt(2))
    dexact = 0.5 * math.erfc(-x / math.sqrt(2)) + x * math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    r, dr = rounded(exact, dtype), rounded(dexact, dtype)
    print(f"{dtype} x = {x}: gelu {fwd!r}, exact {exact!r}, correctly rounded {r!r} "
          f"({ulps(fwd, r, dtype):+d} ulps); gelu' {bwd!r}, exact {dexact!r}, correctly rounded "
          f"{dr!r} ({ulps(bwd, dr, dtype):+d} ulps)")
    off |= fwd != r
print("REPRODUCES" if off else "FIXED")
