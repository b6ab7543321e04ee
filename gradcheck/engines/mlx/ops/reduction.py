"""Reductions and scans written for MLX."""

from __future__ import annotations

import mlx.core as mx

OPS = {
    "sum": mx.sum,
    "sum_axis1": lambda x: mx.sum(x, axis=-1),
    "mean": mx.mean,
    "mean_axis0": lambda x: mx.mean(x, axis=0),
    "prod": mx.prod,
    "prod_axis1": lambda x: mx.prod(x, axis=-1),
    "logsumexp": mx.logsumexp,
    "logsumexp_axis1": lambda x: mx.logsumexp(x, axis=-1),
    "var": mx.var,
    "var_axis1": lambda x: mx.var(x, axis=-1, ddof=1),
    "std": lambda x: mx.std(x, ddof=1),
    "norm": lambda x: mx.linalg.norm(mx.reshape(x, (-1,))),
    "norm_axis1": lambda x: mx.linalg.norm(x, axis=-1),
    "max": mx.max,
    "min": mx.min,
    "max_axis1": lambda x: mx.max(x, axis=-1),
    "cumsum_axis1": lambda x: mx.cumsum(x, axis=-1),
    "cumprod_axis1": lambda x: mx.cumprod(x, axis=-1),
    "logcumsumexp_axis1": lambda x: mx.logcumsumexp(x, axis=-1),
}
