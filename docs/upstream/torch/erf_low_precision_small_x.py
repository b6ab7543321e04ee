"""torch.erf in bfloat16 and float16 (CPU) loses its relative accuracy near 0: in bfloat16
erf(1e-10) is 0.0 where 1.128e-10 (0.0 for every positive x up to 1.8e-07) and erf(1.2666e-6) is
1.192e-06, 32 ulps below the correctly rounded 1.431e-06 (erf(x) ~ 2x/sqrt(pi)); erf(3.4392e-5)
in float16 is 5 ulps off.  At these points the values are those of a float32 evaluation of the
Abramowitz-Stegun 7.1.26 form sign(x) (1 - p(t) exp(-x^2)), whose 1.5e-7 error is absolute
(printed: the form in numpy float32); float32 torch.erf is right (one element or 64)."""
import math
import sys

import numpy as np
import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}  numpy {np.__version__}")


def ulps(a, b, dtype):
    i = torch.tensor([a, b], dtype=dtype).view(torch.int16).tolist()
    k = [v if v >= 0 else -(v & 0x7FFF) for v in i]
    return k[0] - k[1]


def as26(x):  # A&S 7.1.26 in float32
    f = np.float32
    t = f(1) / (f(1) + f(0.3275911) * f(abs(x)))
    p = f(0)
    for c in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592):
        p = (p + f(c)) * t
    return math.copysign(float(f(1) - p * np.exp(-f(x) * f(x))), x)


off = False
for dtype, x in ((torch.bfloat16, 1.000444171950221e-10), (torch.bfloat16, 1.2665987014770508e-06),
                 (torch.float16, 3.439188003540039e-05)):
    got = torch.erf(torch.full((64,), x, dtype=dtype))[0].item()
    one = torch.erf(torch.tensor([x], dtype=dtype)).item()
    exact = math.erf(x)
    rounded = torch.tensor(exact, dtype=torch.float64).to(dtype).item()
    f32 = torch.erf(torch.tensor([x])).to(dtype).item()
    emulated = torch.tensor(as26(x)).to(dtype).item()
    print(f"{dtype}: erf({x!r}) = {got!r} (one element: {one!r}); exact {exact!r}, correctly "
          f"rounded {rounded!r}: {ulps(got, rounded, dtype):+d} ulps; float32 erf rounded: "
          f"{f32!r}; A&S 7.1.26 in float32 rounded: {emulated!r}")
    off |= got != rounded or one != rounded
print("REPRODUCES" if off else "FIXED")
