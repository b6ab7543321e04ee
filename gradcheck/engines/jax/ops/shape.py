"""The ``shape`` catalog family written for JAX."""

from __future__ import annotations

from collections.abc import Callable

from gradcheck.engines.jax.ops._common import jnp


def _scatter_add(x, idx, src):
    rows = jnp.broadcast_to(jnp.arange(x.shape[0])[:, None], idx.shape)
    return x.at[rows, idx].add(src)


OPS: dict[str, Callable] = {
    "reshape_3x4_to_2x6": lambda x: jnp.reshape(x, (2, 6)),
    "transpose": jnp.transpose,
    "permute_201": lambda x: jnp.transpose(x, (2, 0, 1)),
    "concatenate_axis1": lambda x, y: jnp.concatenate([x, y], axis=1),
    "stack_axis0": lambda x, y, z: jnp.stack([x, y, z]),
    "split_axis0": lambda x: tuple(jnp.split(x, [2], axis=0)),
    "take_axis0": lambda x, idx: jnp.take(x, idx, axis=0),
    "take_along_axis1": lambda x, idx: jnp.take_along_axis(x, idx, axis=1),
    "index_add_axis0": lambda x, idx, src: x.at[idx].add(src),
    "scatter_add_axis1": _scatter_add,
    "where": jnp.where,
    "pad_constant_1_2": lambda x: jnp.pad(x, ((1, 2), (1, 2))),
    "pad_reflect_2": lambda x: jnp.pad(x, ((0, 0), (2, 2)), mode="reflect"),
    "slice_step2": lambda x: x[1:, ::2],
    "flip_axis1": lambda x: jnp.flip(x, axis=1),
    "broadcast_to_4x3": lambda x: jnp.broadcast_to(x, (4, 3)),
    "repeat_2_axis0": lambda x: jnp.repeat(x, 2, axis=0),
    "tile_2x3": lambda x: jnp.tile(x, (2, 3)),
    "roll_1_axis1": lambda x: jnp.roll(x, 1, axis=1),
    "tril": jnp.tril,
    "sort_axis1": lambda x: jnp.sort(x, axis=1),
}
