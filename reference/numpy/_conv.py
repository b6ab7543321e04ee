"""Hand-derived convolution and pooling rules (NumPy only), for :mod:`gradcheck.reference.numpy.nn`.

A convolution is computed on patches: ``cols[n, c, i, j, h, w] = xpad[n, c, h*s + i, w*s + j]``
and ``y = einsum("ncijhw,ocij->nohw", cols, w) + b``.  It is bilinear in ``(x, w)``, so
``dy = conv(dx, w) + conv(x, dw) + db``; the VJP contracts the cotangent back onto the patches
and scatter-adds every patch into the (padded) input, so overlapping patches accumulate.  A 1-d
convolution is a 2-d one of height 1 (padded along the width only).

Max pooling routes each window's cotangent to its arg-max (ties are kinks: the catalog marks
them inconclusive); average pooling spreads it evenly.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from gradcheck.core.rules import NumpyFunction


def _patches(x: np.ndarray, kh: int, kw: int, stride: int, pad: tuple[int, int]) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    n, c, hp, wp = xp.shape
    ho, wo = (hp - kh) // stride + 1, (wp - kw) // stride + 1
    cols = np.empty((n, c, kh, kw, ho, wo), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i:i + stride * ho:stride, j:j + stride * wo:stride]
    return cols


def _patches_adjoint(cols: np.ndarray, shape: tuple[int, ...], stride: int,
                     pad: tuple[int, int]) -> np.ndarray:
    n, c, h, w = shape
    _, _, kh, kw, ho, wo = cols.shape
    xp = np.zeros((n, c, h + 2 * pad[0], w + 2 * pad[1]), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            xp[:, :, i:i + stride * ho:stride, j:j + stride * wo:stride] += cols[:, :, i, j]
    return xp[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w]


def _conv2d(x, w, b, stride, pad):
    cols = _patches(x, w.shape[2], w.shape[3], stride, pad)
    return np.einsum("ncijhw,ocij->nohw", cols, w) + b[None, :, None, None]


def _conv2d_vjp(x, w, g, stride, pad):
    gx = _patches_adjoint(np.einsum("nohw,ocij->ncijhw", g, w), x.shape, stride, pad)
    gw = np.einsum("nohw,ncijhw->ocij", g, _patches(x, w.shape[2], w.shape[3], stride, pad))
    return gx, gw, g.sum(axis=(0, 2, 3))


def conv_op(name: str, dims: int, stride: int, pad: int) -> NumpyFunction:
    """``conv{dims}d(x, w, b)`` with ``dims`` 1 (NCW) or 2 (NCHW)."""
    pads = (pad, pad) if dims == 2 else (0, pad)

    def up(a):  # 1-d arrays get a unit height axis
        return a[:, :, None] if dims == 1 else a

    def down(a):
        return a[:, :, 0] if dims == 1 else a

    def forward(x, w, b):
        return down(_conv2d(up(x), up(w), b, stride, pads))

    def jvp(args, tans):
        x, w, b = args
        dx, dw, db = tans
        return (forward(dx, w, np.zeros_like(b)) + forward(x, dw, db),)

    def vjp(args, cts):
        x, w, _ = args
        gx, gw, gb = _conv2d_vjp(up(x), up(w), up(cts[0]), stride, pads)
        return down(gx), down(gw), gb

    return NumpyFunction(forward, vjp, jvp, name=name)


# -- pooling ------------------------------------------------------------------------------------


def _windows(x: np.ndarray, k: int, stride: int, axes: tuple[int, ...]) -> np.ndarray:
    """Views of the pooling windows: window axes last, strided along ``axes``."""
    v = sliding_window_view(x, (k,) * len(axes), axis=axes)
    index = [slice(None)] * x.ndim
    for a in axes:
        index[a] = slice(None, None, stride)
    return v[tuple(index)]


def max_pool_op(name: str, k: int, stride: int, dims: int) -> NumpyFunction:
    """Max pooling over the last ``dims`` axes, windows of ``k`` with ``stride``."""
    axes = tuple(range(-dims, 0))

    def argmax_index(x):
        """For every output: the flat input index of its window's maximum (first on ties)."""
        idx = np.arange(x.size).reshape(x.shape)
        win = _windows(x, k, stride, axes)
        win_idx = _windows(idx, k, stride, axes)
        shape = win.shape[: x.ndim]
        flat = win.reshape(shape + (-1,))
        pos = np.argmax(flat, axis=-1)[..., None]
        return np.take_along_axis(win_idx.reshape(shape + (-1,)), pos, axis=-1)[..., 0]

    def forward(x):
        win = _windows(x, k, stride, axes)
        return win.max(axis=tuple(range(x.ndim, win.ndim)))

    def vjp(args, cts):
        x = args[0]
        gx = np.zeros(x.size, dtype=x.dtype)
        np.add.at(gx, argmax_index(x).ravel(), cts[0].ravel())  # overlapping windows add
        return (gx.reshape(x.shape),)

    def jvp(args, tans):
        return (tans[0].ravel()[argmax_index(args[0])],)

    return NumpyFunction(forward, vjp, jvp, name=name)


def avg_pool2d_op(name: str, k: int) -> NumpyFunction:
    """Average pooling over non-overlapping ``k x k`` windows (stride ``k``), linear."""

    def forward(x):
        n, c, h, w = x.shape
        return x.reshape(n, c, h // k, k, w // k, k).mean(axis=(3, 5))

    def vjp(args, cts):
        g = cts[0] / (k * k)
        return (np.repeat(np.repeat(g, k, axis=2), k, axis=3),)

    return NumpyFunction(forward, vjp, lambda a, t: (forward(t[0]),), name=name)
