"""The ``nn`` catalog family written for PyTorch (``torch.nn.functional``)."""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F


def _batch_norm_train(x, w, b):
    return F.batch_norm(x, None, None, w, b, training=True, eps=1e-5)


OPS: dict[str, Callable] = {
    "softmax": lambda x: F.softmax(x, dim=-1),
    "log_softmax": lambda x: F.log_softmax(x, dim=-1),
    "cross_entropy": F.cross_entropy,
    "bce_with_logits": F.binary_cross_entropy_with_logits,
    "mse_loss": F.mse_loss,
    "huber_loss": lambda a, b: F.huber_loss(a, b, delta=1.0),
    "layer_norm": lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5),
    "rms_norm": lambda x, w: F.rms_norm(x, (x.shape[-1],), w, eps=1e-6),
    "batch_norm_train": _batch_norm_train,
    "linear": F.linear,
    "conv1d": F.conv1d,
    "conv1d_stride2_pad1": lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1),
    "conv2d": F.conv2d,
    "conv2d_stride2_pad1": lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
    "max_pool2d": lambda x: F.max_pool2d(x, 2, 2),
    "max_pool1d_k3s1": lambda x: F.max_pool1d(x, 3, 1),
    "avg_pool2d": lambda x: F.avg_pool2d(x, 2, 2),
    "attention": F.scaled_dot_product_attention,
    "attention_causal": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "embedding": F.embedding,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}
