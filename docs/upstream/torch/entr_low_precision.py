"""torch.special.entr in bfloat16 and float16 (CPU) rounds log(x) to the dtype before multiplying
by -x: entr(8896) in bfloat16 is -80384, 1 ulp from the correctly rounded -80896 (exact
-80894.5, 0.01 ulp from it); float16 entr(0.52197) is 0.339111 where 0.339355 (exact 0.3393553).
-x * (log(x) rounded to the dtype), rounded, gives torch's values; float32 rounded once is right."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")


def ulps(a, b, dtype):
    i = torch.tensor([a, b], dtype=dtype).view(torch.int16).tolist()
    k = [v if v >= 0 else -(v & 0x7FFF) for v in i]
    return k[0] - k[1]


off = False
for dtype, x in ((torch.bfloat16, 8896.0), (torch.float16, 0.52197265625)):
    got = torch.special.entr(torch.full((64,), x, dtype=dtype))[0].item()
    one = torch.special.entr(torch.tensor([x], dtype=dtype)).item()
    exact = -x * math.log(x)
    rounded = torch.tensor(exact, dtype=torch.float64).to(dtype).item()
    log_rounded = torch.tensor(math.log(x), dtype=torch.float64).to(dtype).item()
    twice = torch.tensor(-x * log_rounded, dtype=torch.float64).to(dtype).item()
    print(f"{dtype} entr({x!r}) = {got!r} (one element: {one!r}); exact {exact!r}, correctly "
          f"rounded {rounded!r} ({ulps(got, rounded, dtype):+d} ulps); -x * log(x) with log(x) "
          f"rounded to {dtype} first: {twice!r}")
    off |= got != rounded or one != rounded
print("REPRODUCES" if off else "FIXED")
