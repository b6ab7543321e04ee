"""Reductions and scans written for PyTorch."""

from __future__ import annotations

import torch

OPS = {
    "sum": torch.sum,
    "sum_axis1": lambda x: torch.sum(x, dim=-1),
    "mean": torch.mean,
    "mean_axis0": lambda x: torch.mean(x, dim=0),
    "prod": torch.prod,
    "prod_axis1": lambda x: torch.prod(x, dim=-1),
    "logsumexp": lambda x: torch.logsumexp(x, dim=tuple(range(x.ndim))),
    "logsumexp_axis1": lambda x: torch.logsumexp(x, dim=-1),
    "var": lambda x: torch.var(x, correction=0),
    "var_axis1": lambda x: torch.var(x, dim=-1, correction=1),
    "std": lambda x: torch.std(x, correction=1),
    "norm": torch.linalg.vector_norm,
    "norm_axis1": lambda x: torch.linalg.vector_norm(x, dim=-1),
    "max": torch.amax,
    "min": torch.amin,
    "max_axis1": lambda x: torch.amax(x, dim=-1),
    "cumsum_axis1": lambda x: torch.cumsum(x, dim=-1),
    "cumprod_axis1": lambda x: torch.cumprod(x, dim=-1),
    "logcumsumexp_axis1": lambda x: torch.logcumsumexp(x, dim=-1),
}
