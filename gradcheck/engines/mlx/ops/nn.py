"""The ``nn`` catalog family written for MLX (``mlx.nn``, ``mlx.nn.losses``, ``mlx.core.fast``).

Arguments arrive channels-first (the catalog's layout); MLX convolutions and pools are
channels-last, so these ops transpose in and out.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import mlx.core as mx
import mlx.nn as nn

L = nn.losses


def _conv(dims: int, stride: int, pad: int) -> Callable:
    conv = mx.conv1d if dims == 1 else mx.conv2d
    to_last = (0, 2, 1) if dims == 1 else (0, 2, 3, 1)
    to_first = (0, 2, 1) if dims == 1 else (0, 3, 1, 2)

    def f(x, w, b):
        y = conv(mx.transpose(x, to_last), mx.transpose(w, to_last), stride=stride, padding=pad)
        return mx.transpose(y + b, to_first)

    return f


def _pool(layer: nn.Module, dims: int) -> Callable:
    to_last = (0, 2, 1) if dims == 1 else (0, 2, 3, 1)
    to_first = (0, 2, 1) if dims == 1 else (0, 3, 1, 2)
    return lambda x: mx.transpose(layer(mx.transpose(x, to_last)), to_first)


def _attention(causal: bool) -> Callable:
    """``mx.fast.scaled_dot_product_attention`` wants (batch, heads, length, width): one head."""

    def f(q, k, v):
        scale = 1.0 / math.sqrt(q.shape[-1])
        out = mx.fast.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None],
                                                   scale=scale, mask="causal" if causal else None)
        return out[:, 0]

    return f


def _batch_norm_train(x, w, b, eps=1e-5):
    """No functional batch norm in MLX (``nn.BatchNorm`` is a stateful layer): the batch
    statistics written out."""
    mu = mx.mean(x, axis=0, keepdims=True)
    var = mx.var(x, axis=0, keepdims=True)
    return (x - mu) * mx.rsqrt(var + eps) * w + b


OPS: dict[str, Callable] = {
    "softmax": lambda x: mx.softmax(x, axis=-1),
    "log_softmax": lambda x: nn.log_softmax(x, axis=-1),
    "cross_entropy": lambda x, t: L.cross_entropy(x, t, reduction="mean"),
    "bce_with_logits": lambda x, t: L.binary_cross_entropy(x, t, with_logits=True,
                                                           reduction="mean"),
    "mse_loss": lambda a, b: L.mse_loss(a, b, reduction="mean"),
    "huber_loss": lambda a, b: L.huber_loss(a, b, delta=1.0, reduction="mean"),
    "layer_norm": lambda x, w, b: mx.fast.layer_norm(x, w, b, 1e-5),
    "rms_norm": lambda x, w: mx.fast.rms_norm(x, w, 1e-6),
    "batch_norm_train": _batch_norm_train,
    "linear": lambda x, w, b: mx.addmm(b, x, mx.transpose(w)),
    "conv1d": _conv(1, 1, 0),
    "conv1d_stride2_pad1": _conv(1, 2, 1),
    "conv2d": _conv(2, 1, 0),
    "conv2d_stride2_pad1": _conv(2, 2, 1),
    "max_pool2d": _pool(nn.MaxPool2d(2, 2), 2),
    "max_pool1d_k3s1": _pool(nn.MaxPool1d(3, 1), 1),
    "avg_pool2d": _pool(nn.AvgPool2d(2, 2), 2),
    "attention": _attention(False),
    "attention_causal": _attention(True),
    "embedding": lambda idx, w: mx.take(w, idx, axis=0),
    "gelu_tanh": nn.gelu_approx,
}
