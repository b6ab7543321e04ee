"""Reductions and scans written for tinygrad."""

from __future__ import annotations

OPS = {
    "sum": lambda x: x.sum(),
    "sum_axis1": lambda x: x.sum(axis=-1),
    "mean": lambda x: x.mean(),
    "mean_axis0": lambda x: x.mean(axis=0),
    "prod": lambda x: x.prod(),
    "prod_axis1": lambda x: x.prod(axis=-1),
    "logsumexp": lambda x: x.logsumexp(),
    "logsumexp_axis1": lambda x: x.logsumexp(axis=-1),
    "var": lambda x: x.var(correction=0),
    "var_axis1": lambda x: x.var(axis=-1, correction=1),
    "std": lambda x: x.std(correction=1),
    "max": lambda x: x.max(),
    "min": lambda x: x.min(),
    "max_axis1": lambda x: x.max(axis=-1),
    "cumsum_axis1": lambda x: x.cumsum(axis=-1),
    "cumprod_axis1": lambda x: x.cumprod(axis=-1),
    "logcumsumexp_axis1": lambda x: x.logcumsumexp(axis=-1),
}

MISSING = {"norm": "tinygrad 0.14 has no vector norm function",
           "norm_axis1": "tinygrad 0.14 has no vector norm function"}


