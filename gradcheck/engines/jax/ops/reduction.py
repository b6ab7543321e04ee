"""Reductions and scans written for JAX."""

from __future__ import annotations

from gradcheck.engines.jax.ops._common import jax, jnp, jsp

OPS = {
    "sum": jnp.sum,
    "sum_axis1": lambda x: jnp.sum(x, axis=-1),
    "mean": jnp.mean,
    "mean_axis0": lambda x: jnp.mean(x, axis=0),
    "prod": jnp.prod,
    "prod_axis1": lambda x: jnp.prod(x, axis=-1),
    "logsumexp": jsp.logsumexp,
    "logsumexp_axis1": lambda x: jsp.logsumexp(x, axis=-1),
    "var": jnp.var,
    "var_axis1": lambda x: jnp.var(x, axis=-1, ddof=1),
    "std": lambda x: jnp.std(x, ddof=1),
    "norm": jnp.linalg.norm,
    "norm_axis1": lambda x: jnp.linalg.norm(x, axis=-1),
    "max": jnp.max,
    "min": jnp.min,
    "max_axis1": lambda x: jnp.max(x, axis=-1),
    "cumsum_axis1": lambda x: jnp.cumsum(x, axis=-1),
    "cumprod_axis1": lambda x: jnp.cumprod(x, axis=-1),
    "logcumsumexp_axis1": lambda x: jax.lax.cumlogsumexp(x, axis=x.ndim - 1),
}
