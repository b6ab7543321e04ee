"""Hand-derived reference rules for the ``nn`` catalog family (NumPy/SciPy only).

Conventions are those of :mod:`gradcheck.ops.nn`.  Notation: ``g`` cotangent, ``d`` tangent,
``mean`` over the normalized axis.  Convolutions and pooling live in :mod:`._conv`, normalizations,
``linear``, attention and embedding in :mod:`._nn_blocks`.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from gradcheck.core.rules import NumpyFunction

from ._conv import avg_pool2d_op, conv_op, max_pool_op
from ._nn_blocks import BLOCKS

_GELU_C = float(np.sqrt(2.0 / np.pi))

# -- tanh-GELU: y = x (1 + tanh(c (x + k x^3))) / 2, elementwise ------------------------------


def _gelu_tanh(x):
    c = np.asarray(_GELU_C, dtype=x.dtype)
    return 0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x**3)))


def _gelu_tanh_d(x):
    """(1 + t)/2 + x (1 - t^2) c (1 + 3 k x^2) / 2 with t = tanh(c (x + k x^3))."""
    c = np.asarray(_GELU_C, dtype=x.dtype)
    t = np.tanh(c * (x + 0.044715 * x**3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x)


# -- softmax family (last axis) ----------------------------------------------------------------


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _log_softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _softmax_vjp(args, cts):
    """dy = y (dx - <y, dx>): self-adjoint, gx = y (g - <y, g>)."""
    y = _softmax(args[0])
    g = cts[0]
    return (y * (g - (g * y).sum(axis=-1, keepdims=True)),)


def _log_softmax_vjp(args, cts):
    """dy = dx - <softmax, dx>, so gx = g - softmax * sum(g)."""
    g = cts[0]
    return (g - _softmax(args[0]) * g.sum(axis=-1, keepdims=True),)


def _log_softmax_jvp(args, tans):
    d = tans[0]
    return (d - (_softmax(args[0]) * d).sum(axis=-1, keepdims=True),)


def _cross_entropy(x, t):
    return -np.mean(np.take_along_axis(_log_softmax(x), t[:, None], axis=1))


def _onehot(t, c, dtype):
    return np.eye(c, dtype=dtype)[t]


def _cross_entropy_vjp(args, cts):
    """L = mean(lse(x_n) - x_n[t_n]): gx = g (softmax(x) - onehot(t)) / N."""
    x, t = args
    return cts[0] * (_softmax(x) - _onehot(t, x.shape[1], x.dtype)) / x.shape[0], None


def _cross_entropy_jvp(args, tans):
    x, t = args
    p = _softmax(x) - _onehot(t, x.shape[1], x.dtype)
    return (np.sum(p * tans[0]) / x.shape[0],)


def _bce(x, t):
    """mean(softplus(x) - t x), softplus(x) = max(x, 0) + log1p(exp(-|x|))."""
    return np.mean(np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x))) - t * x)


def _bce_vjp(args, cts):
    x, t = args
    k = cts[0] / x.size
    return k * (special.expit(x) - t), -k * x


def _bce_jvp(args, tans):
    x, t = args
    dx, dt = tans
    return (np.sum((special.expit(x) - t) * dx - x * dt) / x.size,)


def _mse_vjp(args, cts):
    a, b = args
    ga = cts[0] * 2.0 * (a - b) / a.size
    return ga, -ga


def _huber(a, b):
    d = np.abs(a - b)
    return np.mean(np.where(d < 1.0, 0.5 * d * d, d - 0.5))


def _huber_vjp(args, cts):
    """dL/da = clip(a - b, -1, 1) / N."""
    a, b = args
    ga = cts[0] * np.clip(a - b, -1.0, 1.0) / a.size
    return ga, -ga


def _huber_jvp(args, tans):
    a, b = args
    return (np.sum(np.clip(a - b, -1.0, 1.0) * (tans[0] - tans[1])) / a.size,)


OPS: dict[str, NumpyFunction] = {
    "softmax": NumpyFunction(_softmax, _softmax_vjp,
                             lambda a, t: _softmax_vjp(a, t), name="softmax"),
    "log_softmax": NumpyFunction(_log_softmax, _log_softmax_vjp, _log_softmax_jvp,
                                 name="log_softmax"),
    "cross_entropy": NumpyFunction(_cross_entropy, _cross_entropy_vjp, _cross_entropy_jvp,
                                   name="cross_entropy"),
    "bce_with_logits": NumpyFunction(_bce, _bce_vjp, _bce_jvp, name="bce_with_logits"),
    "mse_loss": NumpyFunction(lambda a, b: np.mean((a - b) ** 2), _mse_vjp,
                              lambda a, t: (2.0 * np.sum((a[0] - a[1]) * (t[0] - t[1]))
                                            / a[0].size,), name="mse_loss"),
    "huber_loss": NumpyFunction(_huber, _huber_vjp, _huber_jvp, name="huber_loss"),
    **BLOCKS,
    "conv1d": conv_op("conv1d", 1, 1, 0),
    "conv1d_stride2_pad1": conv_op("conv1d_stride2_pad1", 1, 2, 1),
    "conv2d": conv_op("conv2d", 2, 1, 0),
    "conv2d_stride2_pad1": conv_op("conv2d_stride2_pad1", 2, 2, 1),
    "max_pool2d": max_pool_op("max_pool2d", 2, 2, 2),
    "max_pool1d_k3s1": max_pool_op("max_pool1d_k3s1", 3, 1, 1),
    "avg_pool2d": avg_pool2d_op("avg_pool2d", 2),
    "gelu_tanh": NumpyFunction(_gelu_tanh, lambda a, c: (c[0] * _gelu_tanh_d(a[0]),),
                               lambda a, t: (t[0] * _gelu_tanh_d(a[0]),), name="gelu_tanh"),
}
