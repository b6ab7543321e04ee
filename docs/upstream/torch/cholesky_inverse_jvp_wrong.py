"""torch.cholesky_inverse: forward mode (torch.func.jvp) is wrong at an ordinary lower-triangular
factor, while reverse mode is right; the exact JVP is that of inv(L L^T)."""
import sys

import torch

print(f"python {sys.version.split()[0]}  torch {torch.__version__}")
torch.manual_seed(0)
L = torch.tril(torch.randn(4, 4, dtype=torch.float64)) + 4 * torch.eye(4, dtype=torch.float64)
T = torch.tril(torch.randn(4, 4, dtype=torch.float64))
exact = torch.func.jvp(lambda m: torch.linalg.inv(m @ m.T), (L,), (T,))[1]
got = torch.func.jvp(torch.cholesky_inverse, (L,), (T,))[1]
err = (got - exact).abs().max().item() / exact.abs().max().item()
print(f"torch.func.jvp(cholesky_inverse) vs the JVP of inv(L L^T): max error {err:.3g} "
      "of the scale")
print("REPRODUCES" if err > 1e-9 else "FIXED")
