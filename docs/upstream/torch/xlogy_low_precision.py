"""torch.xlogy in bfloat16 and float16 (CPU) rounds log(y) to the dtype before multiplying by x:
xlogy(-23.125, 7392) in bfloat16 is -207 where the correctly rounded value is -206 (exact
-206.001); float16 xlogy(3332, 10.65625) is 7880 where 7884 (exact 7884.0004).  x * (log(y)
rounded to the dtype), rounded, gives torch's values; float32 rounded once is right."""
import math
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")


def ulps(a, b, dtype):
    i = torch.tensor([a, b], dtype=dtype).view(torch.int16).tolist()
    k = [v if v >= 0 else -(v & 0x7FFF) for v in i]
    return k[0] - k[1]


off = False
for dtype, x, y in ((torch.bfloat16, -23.125, 7392.0), (torch.float16, 3332.0, 10.65625)):
    got = torch.xlogy(torch.full((64,), x, dtype=dtype), torch.full((64,), y, dtype=dtype))
    got = got[0].item()
    one = torch.xlogy(torch.tensor([x], dtype=dtype), torch.tensor([y], dtype=dtype)).item()
    exact = x * math.log(y)
    rounded = torch.tensor(exact, dtype=torch.float64).to(dtype).item()
    log_rounded = torch.tensor(math.log(y), dtype=torch.float64).to(dtype).item()
    twice = torch.tensor(x * log_rounded, dtype=torch.float64).to(dtype).item()
    print(f"{dtype} xlogy({x!r}, {y!r}) = {got!r} (one element: {one!r}); exact {exact!r}, "
          f"correctly rounded {rounded!r} ({ulps(got, rounded, dtype):+d} ulps); x * log(y) with "
          f"log(y) rounded to {dtype} first: {twice!r}")
    off |= got != rounded or one != rounded
print("REPRODUCES" if off else "FIXED")
