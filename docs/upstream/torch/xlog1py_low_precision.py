"""torch.special.xlog1py in bfloat16 and float16 (CPU) rounds log1p(y) to the dtype before
multiplying by x: xlog1py(-1880, 4800) in bfloat16 is -16000 where the correctly rounded value is
-15936 (exact -15935.97); float16 xlog1py(-5.6836, 12.234) is -14.671875 where -14.6796875
(exact -14.679686).  x * (log1p(y) rounded to the dtype), rounded, gives torch's values; float32
rounded once is right."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")


def ulps(a, b, dtype):
    i = torch.tensor([a, b], dtype=dtype).view(torch.int16).tolist()
    k = [v if v >= 0 else -(v & 0x7FFF) for v in i]
    return k[0] - k[1]


f = torch.special.xlog1py
off = False
for dtype, x, y in ((torch.bfloat16, -1880.0, 4800.0), (torch.float16, -5.68359375, 12.234375)):
    got = f(torch.full((64,), x, dtype=dtype), torch.full((64,), y, dtype=dtype))[0].item()
    one = f(torch.tensor([x], dtype=dtype), torch.tensor([y], dtype=dtype)).item()
    exact = x * math.log1p(y)
    rounded = torch.tensor(exact, dtype=torch.float64).to(dtype).item()
    log_rounded = torch.tensor(math.log1p(y), dtype=torch.float64).to(dtype).item()
    twice = torch.tensor(x * log_rounded, dtype=torch.float64).to(dtype).item()
    print(f"{dtype} xlog1py({x!r}, {y!r}) = {got!r} (one element: {one!r}); exact {exact!r}, "
          f"correctly rounded {rounded!r} ({ulps(got, rounded, dtype):+d} ulps); x * log1p(y) "
          f"with log1p(y) rounded to {dtype} first: {twice!r}")
    off |= got != rounded or one != rounded
print("REPRODUCES" if off else "FIXED")
