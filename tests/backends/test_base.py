"""The adapter contract's defaults (gradcheck/backends/base.py): what an adapter inherits."""

from __future__ import annotations

import pytest

from gradcheck.backends.registry import get_backend


def test_user_function_is_the_identity_for_numpy() -> None:
    def fn(x: float) -> float:
        return 2.0 * x

    assert get_backend("numpy").user_function(fn) is fn


def test_user_function_turns_64_bit_mode_on_for_jax() -> None:
    pytest.importorskip("jax")
    import jax
    import jax.numpy as jnp

    def new_array_dtype() -> str:
        return str(jnp.zeros(1).dtype)

    before = jax.config.jax_enable_x64
    wrapped = get_backend("jax").user_function(new_array_dtype)
    assert wrapped is not new_array_dtype and wrapped.__name__ == "new_array_dtype"
    with jax.enable_x64(False):
        assert new_array_dtype() == "float32"
        assert wrapped() == "float64"  # on inside the user's function
        assert new_array_dtype() == "float32"  # and the caller's setting back afterwards
    assert jax.config.jax_enable_x64 == before
