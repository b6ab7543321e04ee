"""torch.pow (x ** 3, x ** -2) in bfloat16 (CPU) rounds x * x to bfloat16 before the next step:
728 ** 3 = 385828352 exactly, whose correctly rounded bfloat16 value is 385875968; torch gives
383778816, one ulp off on an exact value 0.02 ulp from the correct one ((728 * 728 rounded to
bfloat16 = 528384) * 728, rounded).  17 ** -2 is 0.00347900390625 where 0.0034637451171875.
float16, and float32 rounded once to bfloat16, give the correctly rounded values."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")


def ulps(a, b, dtype):
    i = torch.tensor([a, b], dtype=dtype).view(torch.int16).tolist()
    k = [v if v >= 0 else -(v & 0x7FFF) for v in i]
    return k[0] - k[1]


bf = torch.bfloat16
off = False
for x, n in ((728.0, 3), (17.0, -2)):
    got = (torch.full((64,), x, dtype=bf) ** n)[0].item()
    one = (torch.tensor([x], dtype=bf) ** n).item()
    exact = x**n
    rounded = torch.tensor(exact, dtype=torch.float64).to(bf).item()
    f32 = (torch.tensor([x]) ** n).to(bf).item()
    square = (torch.tensor(x, dtype=bf) * torch.tensor(x, dtype=bf)).item()
    print(f"bfloat16 {x} ** {n} = {got!r} (one element: {one!r}); exact {exact!r}, correctly "
          f"rounded {rounded!r} ({ulps(got, rounded, bf):+d} ulps); float32 rounded: {f32!r}; "
          f"x * x in bfloat16: {square!r}")
    off |= got != rounded or one != rounded
print("REPRODUCES" if off else "FIXED")
