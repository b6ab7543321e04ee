"""The ``shape`` catalog family written for MLX."""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx


def _scatter_add_axis1(x, idx, src):
    rows = mx.broadcast_to(mx.arange(idx.shape[0])[:, None], idx.shape)
    return x.at[rows, idx].add(src)


OPS: dict[str, Callable] = {
    "reshape_3x4_to_2x6": lambda x: mx.reshape(x, (2, 6)),
    "transpose": lambda x: mx.transpose(x, (1, 0)),
    "permute_201": lambda x: mx.transpose(x, (2, 0, 1)),
    "concatenate_axis1": lambda x, y: mx.concatenate([x, y], axis=1),
    "stack_axis0": lambda x, y, z: mx.stack([x, y, z]),
    "split_axis0": lambda x: tuple(mx.split(x, [2], axis=0)),
    "take_axis0": lambda x, idx: mx.take(x, idx, axis=0),
    "take_along_axis1": lambda x, idx: mx.take_along_axis(x, idx, axis=1),
    "index_add_axis0": lambda x, idx, src: x.at[idx].add(src),
    "scatter_add_axis1": _scatter_add_axis1,
    "where": mx.where,
    "pad_constant_1_2": lambda x: mx.pad(x, [(1, 2), (1, 2)]),
    "pad_reflect_2": lambda x: mx.pad(x, [(0, 0), (2, 2)], mode="reflect"),
    "slice_step2": lambda x: x[1:, ::2],
    "flip_axis1": lambda x: mx.flip(x, axis=1),
    "broadcast_to_4x3": lambda x: mx.broadcast_to(x, (4, 3)),
    "repeat_2_axis0": lambda x: mx.repeat(x, 2, axis=0),
    "tile_2x3": lambda x: mx.tile(x, (2, 3)),
    "roll_1_axis1": lambda x: mx.roll(x, 1, axis=1),  # type: ignore[call-arg]  # stub lacks axis
    "tril": mx.tril,
    "sort_axis1": lambda x: mx.sort(x, axis=1),
}
