"""Special functions written for PyTorch (``torch.special``)."""

from __future__ import annotations

import torch

S = torch.special


def _betaln(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch has no betaln: ``lgamma(a) + lgamma(b) - lgamma(a + b)``."""
    return torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)


OPS = {
    "betaln": _betaln,
    "polygamma1": lambda x: S.polygamma(1, x),
    "polygamma2": lambda x: S.polygamma(2, x),
    "xlogy": S.xlogy,
    "xlog1py": S.xlog1py,
    "log_ndtr": S.log_ndtr,
    "ndtri": S.ndtri,
    "ndtr": S.ndtr,
    "i0e": S.i0e,
    "i1": S.i1,
    "i1e": S.i1e,
    "entr": S.entr,
    "logit": S.logit,
    "multigammaln": lambda a: S.multigammaln(a, 3),
    "gammainc": S.gammainc,
    "gammaincc": S.gammaincc,
}
