"""Hand-derived reference rules for the ``shape`` catalog family (NumPy only).

Every op but ``sort_axis1`` is linear in its floating arguments jointly: its JVP is the op
applied to the tangents (:func:`linear_op`) and its VJP is the adjoint index map written out by
hand below (a gather's adjoint is a scatter-*add*, a broadcast's adjoint a sum, a reflect pad's
adjoint folds the reflected border back).
"""

from __future__ import annotations

import numpy as np

from gradcheck.core.rules import NumpyFunction

from ._linear import linear_op


def _reflect_pad_adjoint(g: np.ndarray, p: int) -> np.ndarray:
    """Adjoint of ``np.pad(x, ((0, 0), (p, p)), mode="reflect")`` on the last axis."""
    core = g[:, p:-p].copy()
    n = core.shape[1]
    for k in range(1, p + 1):
        core[:, k] += g[:, p - k]  # left border mirrors x[:, k]
        core[:, n - 1 - k] += g[:, p + n - 1 + k]  # right border mirrors x[:, n-1-k]
    return core


def _take_axis0_adjoint(args, g):
    x, idx = args
    gx = np.zeros_like(x)
    np.add.at(gx, idx, g)
    return gx, None


def _take_along_adjoint(args, g):
    x, idx = args
    gx = np.zeros_like(x)
    rows = np.arange(x.shape[0])[:, None]
    np.add.at(gx, (rows, idx), g)
    return gx, None


def _index_add(x, idx, src):
    out = x.copy()
    np.add.at(out, idx, src)
    return out


def _scatter_add(x, idx, src):
    out = x.copy()
    rows = np.arange(x.shape[0])[:, None]
    np.add.at(out, (np.broadcast_to(rows, idx.shape), idx), src)
    return out


def _scatter_add_adjoint(args, g):
    _, idx, _ = args
    return g, None, np.take_along_axis(g, idx, axis=1)


def _sort_vjp(args, cts):
    """sort(x) = x[perm]: the VJP scatters the cotangent back through the permutation."""
    x = args[0]
    perm = np.argsort(x, axis=1, kind="stable")
    gx = np.zeros_like(x)
    np.put_along_axis(gx, perm, cts[0], axis=1)
    return (gx,)


def _sort_jvp(args, tans):
    perm = np.argsort(args[0], axis=1, kind="stable")
    return (np.take_along_axis(tans[0], perm, axis=1),)


def _slice_step2_adjoint(args, g):
    gx = np.zeros_like(args[0])
    gx[1:, ::2] = g
    return (gx,)


def _split(x):
    return x[:2], x[2:]


def _unstack(g, n):
    return tuple(g[k] for k in range(n))


def _repeat_adjoint(args, g):
    return (g.reshape(args[0].shape[0], 2, -1).sum(axis=1),)


def _tile_adjoint(args, g):
    r, c = args[0].shape
    return (g.reshape(2, r, 3, c).sum(axis=(0, 2)),)


OPS: dict[str, NumpyFunction] = {
    "reshape_3x4_to_2x6": linear_op(
        "reshape_3x4_to_2x6", lambda x: x.reshape(2, 6), lambda a, g: (g.reshape(3, 4),)),
    "transpose": linear_op("transpose", lambda x: x.T, lambda a, g: (g.T,)),
    "permute_201": linear_op("permute_201", lambda x: np.transpose(x, (2, 0, 1)),
                             lambda a, g: (np.transpose(g, (1, 2, 0)),)),
    "concatenate_axis1": linear_op(
        "concatenate_axis1", lambda x, y: np.concatenate([x, y], axis=1),
        lambda a, g: (g[:, : a[0].shape[1]], g[:, a[0].shape[1]:])),
    "stack_axis0": linear_op("stack_axis0", lambda *xs: np.stack(xs), lambda a, g: _unstack(g, 3)),
    "split_axis0": linear_op("split_axis0", _split,
                             lambda a, g: (np.concatenate([g[0], g[1]]),)),
    "take_axis0": linear_op("take_axis0", lambda x, idx: x[idx], _take_axis0_adjoint),
    "take_along_axis1": linear_op(
        "take_along_axis1", lambda x, idx: np.take_along_axis(x, idx, axis=1),
        _take_along_adjoint),
    "index_add_axis0": linear_op("index_add_axis0", _index_add,
                                 lambda a, g: (g, None, g[a[1]])),
    "scatter_add_axis1": linear_op("scatter_add_axis1", _scatter_add, _scatter_add_adjoint),
    "where": linear_op("where", np.where, lambda a, g: (None, np.where(a[0], g, 0.0),
                                                         np.where(a[0], 0.0, g))),
    "pad_constant_1_2": linear_op("pad_constant_1_2", lambda x: np.pad(x, ((1, 2), (1, 2))),
                                  lambda a, g: (g[1:-2, 1:-2],)),
    "pad_reflect_2": linear_op(
        "pad_reflect_2", lambda x: np.pad(x, ((0, 0), (2, 2)), mode="reflect"),
        lambda a, g: (_reflect_pad_adjoint(g, 2),)),
    "slice_step2": linear_op("slice_step2", lambda x: x[1:, ::2], _slice_step2_adjoint),
    "flip_axis1": linear_op("flip_axis1", lambda x: x[:, ::-1], lambda a, g: (g[:, ::-1],)),
    "broadcast_to_4x3": linear_op("broadcast_to_4x3", lambda x: np.broadcast_to(x, (4, 3)),
                                  lambda a, g: (g.sum(axis=0),)),
    "repeat_2_axis0": linear_op("repeat_2_axis0", lambda x: np.repeat(x, 2, axis=0),
                                _repeat_adjoint),
    "tile_2x3": linear_op("tile_2x3", lambda x: np.tile(x, (2, 3)), _tile_adjoint),
    "roll_1_axis1": linear_op("roll_1_axis1", lambda x: np.roll(x, 1, axis=1),
                              lambda a, g: (np.roll(g, -1, axis=1),)),
    "tril": linear_op("tril", np.tril, lambda a, g: (np.tril(g),)),
    "sort_axis1": NumpyFunction(lambda x: np.sort(x, axis=1, kind="stable"), _sort_vjp,
                                _sort_jvp, name="sort_axis1"),
}
