"""torch.logit and its backward (logit_backward) in bfloat16 and float16 (CPU) compute with
intermediates rounded to the dtype.  Forward: 1 - x is rounded first (1 - 0.498046875 =
0.501953125 becomes 0.5 in bfloat16), so logit(0.498046875) is -0.00390625, half the correctly
rounded -0.0078125 (128 ulps); float16 logit(0.499755859375) is 1024 ulps off.  Backward,
grad / (x (1 - x)) with each step rounded: 2 ulps at x = 0.00206 (bfloat16), 0.000248 (float16).
float32 computation rounded once to the dtype gives the correctly rounded values."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")


def ulps(a, b, dtype):
    i = torch.tensor([a, b], dtype=dtype).view(torch.int16).tolist()
    k = [v if v >= 0 else -(v & 0x7FFF) for v in i]
    return k[0] - k[1]


def rounded(v, dtype):
    return torch.tensor(v, dtype=torch.float64).to(dtype).item()


off = False
for dtype, x, xb in ((torch.bfloat16, 0.498046875, 0.0020599365234375),
                     (torch.float16, 0.499755859375, 0.0002484321594238281)):
    got = torch.logit(torch.full((64,), x, dtype=dtype))[0].item()
    exact = math.log(x / (1 - x))
    one_minus = (1 - torch.tensor(x, dtype=dtype)).item()
    print(f"{dtype}: logit({x!r}) = {got!r}; exact {exact!r}, correctly rounded "
          f"{rounded(exact, dtype)!r} ({ulps(got, rounded(exact, dtype), dtype):+d} ulps); "
          f"1 - x in {dtype}: {one_minus!r}")
    t = torch.full((64,), xb, dtype=dtype)
    gb = torch.ops.aten.logit_backward(torch.ones_like(t), t)[0].item()
    dexact = 1 / (xb * (1 - xb))
    print(f"{dtype}: logit'({xb!r}) = {gb!r}; exact {dexact!r}, correctly rounded "
          f"{rounded(dexact, dtype)!r} ({ulps(gb, rounded(dexact, dtype), dtype):+d} ulps)")
    off |= got != rounded(exact, dtype) or gb != rounded(dexact, dtype)
print("REPRODUCES" if off else "FIXED")
