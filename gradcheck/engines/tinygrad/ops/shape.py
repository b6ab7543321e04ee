"""The ``shape`` catalog family written for tinygrad."""

from __future__ import annotations

from collections.abc import Callable

from tinygrad import Tensor


def _take_axis0(x, idx):
    return x[idx]


def _index_add_axis0(x, idx, src):
    index = idx.reshape(-1, 1).expand(*src.shape)
    return x.scatter_reduce(0, index, src, reduce="sum")


OPS: dict[str, Callable] = {
    "reshape_3x4_to_2x6": lambda x: x.reshape(2, 6),
    "transpose": lambda x: x.transpose(0, 1),
    "permute_201": lambda x: x.permute(2, 0, 1),
    "concatenate_axis1": lambda x, y: x.cat(y, dim=1),
    "stack_axis0": lambda x, y, z: Tensor.stack(x, y, z),
    "split_axis0": lambda x: tuple(x.split([2, 3], dim=0)),
    "take_axis0": _take_axis0,
    "take_along_axis1": lambda x, idx: x.gather(1, idx),
    "index_add_axis0": _index_add_axis0,
    "scatter_add_axis1": lambda x, idx, src: x.scatter_reduce(1, idx, src, reduce="sum"),
    "where": Tensor.where,
    "pad_constant_1_2": lambda x: x.pad(((1, 2), (1, 2))),
    "pad_reflect_2": lambda x: x.pad((2, 2), mode="reflect"),
    "slice_step2": lambda x: x[1:, ::2],
    "flip_axis1": lambda x: x.flip(1),
    "broadcast_to_4x3": lambda x: x.expand(4, 3),
    "repeat_2_axis0": lambda x: x.repeat_interleave(2, dim=0),
    "tile_2x3": lambda x: x.repeat(2, 3),
    "roll_1_axis1": lambda x: x.roll(1, dims=1),
    "tril": Tensor.tril,
    "sort_axis1": lambda x: x.sort(dim=1)[0],
}
