"""torch.special.i1e in float32 (CPU) is up to 10 ulps off for |x| <= 8, the range of its first
Chebyshev series (6 ulps below 2, 9-10 from 6 to 8; at most 3 beyond 8): i1e(7.9982705) and
i1e(7.8062940) are 10 ulps off (0.13561456 where exp(-|x|) I1(x) = 0.13561441, 1.1e-6
relative).  One element or 64, the same.  The float64 i1e used as the exact value agrees with
mpmath to 1e-15 relative at both points."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")


def ulps(a, b):
    i = torch.tensor([a, b], dtype=torch.float32).view(torch.int32).tolist()
    k = [v if v >= 0 else -(v & 0x7FFFFFFF) for v in i]
    return k[0] - k[1]


off = False
for x in (7.998270511627197, 7.806293964385986, 3.0):
    got = torch.special.i1e(torch.full((64,), x))[0].item()
    one = torch.special.i1e(torch.tensor([x])).item()
    exact = torch.special.i1e(torch.tensor(x, dtype=torch.float64)).item()
    rounded = torch.tensor(exact, dtype=torch.float64).to(torch.float32).item()
    print(f"float32 i1e({x!r}) = {got!r} (one element: {one!r}); float64 {exact!r}, correctly "
          f"rounded {rounded!r} ({ulps(got, rounded):+d} ulps)")
    off |= abs(ulps(got, rounded)) > 2
print("REPRODUCES" if off else "FIXED")
