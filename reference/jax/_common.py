"""Shared setup of the JAX reference modules: 64-bit mode on before any array is made."""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import jax.scipy.special as jsp  # noqa: E402

__all__ = ["jax", "jnp", "jsp"]
