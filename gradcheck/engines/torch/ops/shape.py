"""The ``shape`` catalog family written for PyTorch."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F


def _sort(x: torch.Tensor) -> torch.Tensor:
    return torch.sort(x, dim=1, stable=True).values


OPS: dict[str, Callable] = {
    "reshape_3x4_to_2x6": lambda x: torch.reshape(x, (2, 6)),
    "transpose": lambda x: torch.transpose(x, 0, 1),
    "permute_201": lambda x: torch.permute(x, (2, 0, 1)),
    "concatenate_axis1": lambda x, y: torch.cat([x, y], dim=1),
    "stack_axis0": lambda x, y, z: torch.stack([x, y, z]),
    "split_axis0": lambda x: tuple(torch.split(x, [2, 3], dim=0)),
    "take_axis0": lambda x, idx: torch.index_select(x, 0, idx),
    "take_along_axis1": lambda x, idx: torch.gather(x, 1, idx),
    "index_add_axis0": lambda x, idx, src: torch.index_add(x, 0, idx, src),
    "scatter_add_axis1": lambda x, idx, src: torch.scatter_add(x, 1, idx, src),
    "where": torch.where,
    "pad_constant_1_2": lambda x: F.pad(x, (1, 2, 1, 2)),
    "pad_reflect_2": lambda x: F.pad(x, (2, 2), mode="reflect"),
    "slice_step2": lambda x: x[1:, ::2],
    "flip_axis1": lambda x: torch.flip(x, dims=(1,)),
    "broadcast_to_4x3": lambda x: torch.broadcast_to(x, (4, 3)),
    "repeat_2_axis0": lambda x: torch.repeat_interleave(x, 2, dim=0),
    "tile_2x3": lambda x: torch.tile(x, (2, 3)),
    "roll_1_axis1": lambda x: torch.roll(x, 1, dims=1),
    "tril": torch.tril,
    "sort_axis1": _sort,
}
