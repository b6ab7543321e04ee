"""torch.special.i0e in bfloat16 and float16 (CPU): the one-element (scalar) path computes in the
dtype.  i0e(0.0078735) on one bfloat16 element is 0.9765625, 4 ulps below the correctly rounded
0.9921875 that 64 elements give; float16 i0e(0.036163) on one element is 6 ulps off.  The tail
of a longer tensor (past the last full vector) takes the same path."""
import sys

import numpy as np
import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}  numpy {np.__version__}")


def ulps(a, b, dtype):
    i = torch.tensor([a, b], dtype=dtype).view(torch.int16).tolist()
    k = [v if v >= 0 else -(v & 0x7FFF) for v in i]
    return k[0] - k[1]


off = False
for dtype, x in ((torch.bfloat16, 0.00787353515625), (torch.float16, 0.036163330078125)):
    one = torch.special.i0e(torch.tensor([x], dtype=dtype)).item()
    many = torch.special.i0e(torch.full((64,), x, dtype=dtype))[0].item()
    tail = torch.special.i0e(torch.full((65,), x, dtype=dtype))[-1].item()
    exact = float(np.exp(-abs(x)) * np.i0(x))
    rounded = torch.tensor(exact, dtype=torch.float64).to(dtype).item()
    print(f"{dtype} i0e({x!r}): one element {one!r} ({ulps(one, rounded, dtype):+d} ulps), "
          f"64 elements {many!r}, last of 65 {tail!r}; exact {exact!r}, correctly rounded "
          f"{rounded!r}")
    off |= one != rounded
print("REPRODUCES" if off else "FIXED")
