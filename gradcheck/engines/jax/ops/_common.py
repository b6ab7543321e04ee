"""Shared imports of the JAX reference modules.

The ops are plain functions of ``jax.numpy``; the jax backend calls them inside its scoped
64-bit mode (``gradcheck.engines.jax.x64``), so importing them changes no JAX setting.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp

__all__ = ["jax", "jnp", "jsp"]
