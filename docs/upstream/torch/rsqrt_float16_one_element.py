"""torch.rsqrt in float16 (CPU), the twin of T22 (bfloat16): on a one-element tensor
rsqrt(7.8142e-05) is 113.0625, one float16 ulp below the correctly rounded 113.125
(x^-1/2 = 113.1250026, 0.00004 ulp from it), which the vectorized path (32 elements) gives.
x ** -0.5 goes the same way in bfloat16 (pow's -0.5 case calls rsqrt)."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")


def ulps(a, b, dtype):
    i = torch.tensor([a, b], dtype=dtype).view(torch.int16).tolist()
    k = [v if v >= 0 else -(v & 0x7FFF) for v in i]
    return k[0] - k[1]


off = False
for dtype, x in ((torch.float16, 7.814168930053711e-05), (torch.bfloat16, 4.75)):
    one = torch.rsqrt(torch.tensor([x], dtype=dtype)).item()
    many = torch.rsqrt(torch.full((32,), x, dtype=dtype))[0].item()
    power = (torch.tensor([x], dtype=dtype) ** -0.5).item()
    exact = x**-0.5
    rounded = torch.tensor(exact, dtype=torch.float64).to(dtype).item()
    print(f"{dtype} rsqrt({x!r}): one element {one!r} ({ulps(one, rounded, dtype):+d} ulps), "
          f"32 elements {many!r}, x ** -0.5 on one element {power!r}; exact {exact!r}, "
          f"correctly rounded {rounded!r}")
    off |= dtype == torch.float16 and one != rounded
print("REPRODUCES" if off else "FIXED")
