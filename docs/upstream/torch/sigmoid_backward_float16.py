"""torch.sigmoid's backward (aten.sigmoid_backward, grad * y * (1 - y) for y = sigmoid(x)) in
float16 (CPU) computes with float16 intermediates, 1 - y rounded first: at y = 0.499755859375,
1 - y = 0.500244140625 (a tie) becomes 0.5 and the gradient 0.2498779296875, one ulp below the
correctly rounded 0.25 (exact 0.24999994); at grad 3.80078125, y = 0.347412109375 it is 2 ulps
off.  bfloat16, and float32 rounded once to float16, are right."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")


def ulps(a, b, dtype):
    i = torch.tensor([a, b], dtype=dtype).view(torch.int16).tolist()
    k = [v if v >= 0 else -(v & 0x7FFF) for v in i]
    return k[0] - k[1]


off = False
for dtype, g, y in ((torch.float16, 1.0, 0.499755859375),
                    (torch.float16, 3.80078125, 0.347412109375),
                    (torch.bfloat16, 1.0, 0.498046875)):
    gt, yt = torch.full((64,), g, dtype=dtype), torch.full((64,), y, dtype=dtype)
    got = torch.ops.aten.sigmoid_backward(gt, yt)[0].item()
    y = yt[0].item()
    exact = g * y * (1 - y)
    rounded = torch.tensor(exact, dtype=torch.float64).to(dtype).item()
    one_minus = (1 - torch.tensor(y, dtype=dtype)).item()
    print(f"{dtype} sigmoid_backward(grad={g!r}, y={y!r}) = {got!r}; exact {exact!r}, correctly "
          f"rounded {rounded!r} ({ulps(got, rounded, dtype):+d} ulps); 1 - y in {dtype}: "
          f"{one_minus!r}")
    off |= dtype == torch.float16 and got != rounded
print("REPRODUCES" if off else "FIXED")
