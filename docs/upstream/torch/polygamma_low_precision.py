"""torch.polygamma(n, x) in float16 and bfloat16 (CPU) rounds zeta(n + 1, x) to the dtype before
multiplying by (-1)^(n+1) n!: polygamma(5, 12.4765625) in float16 is 9.298e-05 where the
correctly rounded value is 9.656e-05 (60 ulps: zeta(6, x) = 8.0e-07 falls in float16's subnormal
range first); polygamma(4, 18.65625) is 12 ulps off; bfloat16 polygamma(5, 4.21875) is 1 ulp off
(exact 0.0310059932, 0.001 ulp from the correctly rounded 0.031005859375).  Computing in float32
and rounding once gives the correctly rounded values."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")


def ulps(a, b, dtype):
    i = torch.tensor([a, b], dtype=dtype).view(torch.int16).tolist()
    k = [v if v >= 0 else -(v & 0x7FFF) for v in i]
    return k[0] - k[1]


off = False
for dtype, n, x in ((torch.float16, 5, 12.4765625), (torch.float16, 4, 18.65625),
                    (torch.bfloat16, 5, 4.21875)):
    got = torch.polygamma(n, torch.full((64,), x, dtype=dtype))[0].item()
    exact = torch.polygamma(n, torch.tensor(x, dtype=torch.float64)).item()
    rounded = torch.tensor(exact, dtype=torch.float64).to(dtype).item()
    f32 = torch.polygamma(n, torch.tensor([x])).to(dtype).item()
    zeta = torch.special.zeta(torch.tensor(n + 1.0), torch.tensor(x)).to(dtype).item()
    twice = torch.tensor((-1) ** (n + 1) * math.factorial(n) * zeta).to(dtype).item()
    print(f"{dtype} polygamma({n}, {x!r}) = {got!r}; float64 {exact!r}, correctly rounded "
          f"{rounded!r} ({ulps(got, rounded, dtype):+d} ulps); float32 rounded: {f32!r}; n! times "
          f"zeta(n + 1, x) rounded to {dtype}: {twice!r}")
    off |= got != rounded
print("REPRODUCES" if off else "FIXED")
