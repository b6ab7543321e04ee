"""torch.mvlgamma(x, p) in bfloat16 and float16 (CPU) is a composite run in the dtype: the p
lgamma(x - j/2) terms are each rounded to it, then summed in it.  mvlgamma(52.25, 3) in bfloat16
is 454 where the correctly rounded value is 456 (exact 455.996); float16 mvlgamma(91.4375, 3) is
954.5 where 955.5 (exact 955.333, 2 ulps).  float32 rounded once is right; p = 1 (plain lgamma)
is right."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")


def ulps(a, b, dtype):
    i = torch.tensor([a, b], dtype=dtype).view(torch.int16).tolist()
    k = [v if v >= 0 else -(v & 0x7FFF) for v in i]
    return k[0] - k[1]


p = 3
off = False
for dtype, x in ((torch.bfloat16, 52.25), (torch.float16, 91.4375)):
    got = torch.mvlgamma(torch.full((64,), x, dtype=dtype), p)[0].item()
    exact = p * (p - 1) / 4 * math.log(math.pi) + sum(math.lgamma(x - j / 2) for j in range(p))
    rounded = torch.tensor(exact, dtype=torch.float64).to(dtype).item()
    f32 = torch.mvlgamma(torch.tensor([x]), p).to(dtype).item()
    terms = torch.lgamma(torch.tensor([x - j / 2 for j in range(p)], dtype=dtype))
    print(f"{dtype} mvlgamma({x!r}, {p}) = {got!r}; exact {exact!r}, correctly rounded "
          f"{rounded!r} ({ulps(got, rounded, dtype):+d} ulps); float32 rounded: {f32!r}; "
          f"lgamma terms in {dtype}: {terms.tolist()}")
    off |= got != rounded
print("REPRODUCES" if off else "FIXED")
