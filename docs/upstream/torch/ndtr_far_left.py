"""torch.special.ndtr: ndtr(-20) is 0.0 where Phi(-20) = 2.75e-89 is representable (computed
as 0.5 * (1 + erf(x / sqrt 2)), which cancels for x << 0; its derivative, 5.52e-88, is right).
jax.scipy.special.ndtr(-20) gives 2.75e-89."""
import sys

import mpmath
import torch

mpmath.mp.dps = 50
print(f"python {sys.version.split()[0]}  torch {torch.__version__}  mpmath {mpmath.__version__}")
x = torch.tensor([-20.0, -10.0], dtype=torch.float64)
got = torch.special.ndtr(x).tolist()
exact = [float(mpmath.ncdf(v)) for v in (-20, -10)]
print("torch ndtr(-20), ndtr(-10):", got)
print("exact:                     ", exact)
print("REPRODUCES" if got[0] == 0 else "FIXED")
