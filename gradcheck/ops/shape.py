"""Shape and indexing ops of the catalog: reshapes, joins, gathers, scatters, pads, slices.

All but ``sort_axis1`` are linear in their floating arguments, so their derivatives are exact
transposes of index maps: the bugs they catch are wrong adjoints (a scatter that sets instead of
adds on repeated indices, a pad whose gradient forgets the reflected entries, a broadcast whose
gradient does not sum).  Index arrays are int64 inputs (not differentiated); samplers draw them
with repeats on purpose.  Fixed parameters (axes, sizes, pad widths) are part of the op name.
"""

from __future__ import annotations

import numpy as np

from gradcheck.ops.spec import OpSpec, SpecialPoint, normal

FAMILY = "shape"


def _with_index(shape: tuple[int, ...], index_shape: tuple[int, ...], high: int):
    """A normal array and an int64 index array in ``[0, high)`` that repeats an entry."""

    def sample(rng):
        idx = rng.integers(0, high, index_shape)
        idx.flat[-1] = idx.flat[0]  # at least one repeated index
        return rng.standard_normal(shape), idx.astype(np.int64)

    return sample


def _index_add(shape, index_len, src_shape):
    def sample(rng):
        idx = rng.integers(0, shape[0], index_len).astype(np.int64)
        idx[-1] = idx[0]
        return rng.standard_normal(shape), idx, rng.standard_normal(src_shape)

    return sample


def _scatter_add(shape, src_shape):
    def sample(rng):
        idx = rng.integers(0, shape[1], src_shape).astype(np.int64)
        idx[:, -1] = idx[:, 0]
        return rng.standard_normal(shape), idx, rng.standard_normal(src_shape)

    return sample


def _where(shape):
    def sample(rng):
        return rng.random(shape) < 0.5, rng.standard_normal(shape), rng.standard_normal(shape)

    return sample


_TIES = np.array([[0.5, 0.5, -1.0, 2.0], [1.0, -0.3, 1.0, 0.2], [3.0, 3.0, 3.0, 0.0]])

QUICK: tuple[str, ...] = ("take_along_axis1", "index_add_axis0", "pad_reflect_2")

SPECS: tuple[OpSpec, ...] = (
    OpSpec("reshape_3x4_to_2x6", FAMILY, 1, normal((3, 4))),
    OpSpec("transpose", FAMILY, 1, normal((3, 4))),
    OpSpec("permute_201", FAMILY, 1, normal((2, 3, 4)), doc="axes (2, 0, 1)"),
    OpSpec("concatenate_axis1", FAMILY, 2, normal((2, 3), (2, 4))),
    OpSpec("stack_axis0", FAMILY, 3, normal((2, 3), (2, 3), (2, 3))),
    OpSpec("split_axis0", FAMILY, 1, normal((5, 2)),
           doc="split into pieces of 2, 3 rows: two outputs"),
    OpSpec("take_axis0", FAMILY, 2, _with_index((4, 3), (6,), 4), diff_args=(0,),
           doc="x[idx] along axis 0 (index_select), repeated indices"),
    OpSpec("take_along_axis1", FAMILY, 2, _with_index((3, 4), (3, 5), 4), diff_args=(0,),
           doc="take_along_axis / torch.gather along axis 1, repeated indices"),
    OpSpec("index_add_axis0", FAMILY, 3, _index_add((4, 3), 5, (5, 3)), diff_args=(0, 2),
           doc="x.at[idx].add(src) / index_add_ along axis 0, repeated indices"),
    OpSpec("scatter_add_axis1", FAMILY, 3, _scatter_add((3, 5), (3, 4)), diff_args=(0, 2),
           doc="torch.scatter_add along axis 1 with an index the shape of src"),
    OpSpec("where", FAMILY, 3, _where((3, 4)), diff_args=(1, 2),
           doc="where(cond, x, y) with a boolean cond", special=(
               SpecialPoint("equal_branches", (np.arange(12).reshape(3, 4) % 3 == 0,
                                               np.ones((3, 4)), np.ones((3, 4)))),
           )),
    OpSpec("pad_constant_1_2", FAMILY, 1, normal((3, 4)),
           doc="zero padding, (1, 2) on both axes"),
    OpSpec("pad_reflect_2", FAMILY, 1, normal((3, 5)),
           doc="reflect padding of 2 on the last axis (gradient folds back)"),
    OpSpec("slice_step2", FAMILY, 1, normal((4, 5)), doc="x[1:, ::2]"),
    OpSpec("flip_axis1", FAMILY, 1, normal((3, 4))),
    OpSpec("broadcast_to_4x3", FAMILY, 1, normal((3,)), doc="(3,) -> (4, 3)"),
    OpSpec("repeat_2_axis0", FAMILY, 1, normal((3, 2)), doc="np.repeat / repeat_interleave"),
    OpSpec("tile_2x3", FAMILY, 1, normal((2, 2))),
    OpSpec("roll_1_axis1", FAMILY, 1, normal((3, 4))),
    OpSpec("tril", FAMILY, 1, normal((4, 4))),
    OpSpec("sort_axis1", FAMILY, 1, normal((3, 4)),
           doc="sort along axis 1 (values): piecewise linear, a kink at ties", special=(
               SpecialPoint("ties", (_TIES,), expect="inconclusive"),
           )),
)
