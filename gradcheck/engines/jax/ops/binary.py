"""Elementwise binary catalog ops written for JAX."""

from __future__ import annotations

from gradcheck.engines.jax.ops._common import jnp

OPS = {
    "add": jnp.add,
    "sub": jnp.subtract,
    "mul": jnp.multiply,
    "div": jnp.divide,
    "pow": jnp.power,
    "atan2": jnp.arctan2,
    "hypot": jnp.hypot,
    "maximum": jnp.maximum,
    "minimum": jnp.minimum,
    "logaddexp": jnp.logaddexp,
    "add_bcast": jnp.add,
    "mul_bcast": jnp.multiply,
    "div_bcast": jnp.divide,
    "mul_scalar": jnp.multiply,
}
