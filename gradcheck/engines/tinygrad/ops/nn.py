"""The ``nn`` catalog family written for tinygrad (``Tensor`` methods; NCHW like the catalog)."""

from __future__ import annotations

from collections.abc import Callable


def _huber(a, b):
    d = (a - b).abs()
    return (d < 1.0).where(0.5 * d * d, d - 0.5).mean()


def _layer_norm(x, w, b):
    return x.layernorm(axis=-1, eps=1e-5) * w + b


def _rms_norm(x, w):
    """No rms-norm method in tinygrad 0.14 (``nn.RMSNorm`` writes it out the same way)."""
    return x * (x.square().mean(axis=-1, keepdim=True) + 1e-6).rsqrt() * w


def _batch_norm_train(x, w, b):
    mean = x.mean(axis=0)
    invstd = (x.var(axis=0, correction=0) + 1e-5).rsqrt()
    return x.batchnorm(w, b, mean, invstd, axis=1)


def _conv1d(stride: int, pad: int) -> Callable:
    """tinygrad's ``conv2d`` is N-dimensional: a 3-D input is a 1-D convolution."""
    return lambda x, w, b: x.conv2d(w, b, stride=stride, padding=pad)


def _attention(causal: bool) -> Callable:
    return lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=causal)


OPS: dict[str, Callable] = {
    "softmax": lambda x: x.softmax(axis=-1),
    "log_softmax": lambda x: x.log_softmax(axis=-1),
    "cross_entropy": lambda x, t: x.cross_entropy(t),
    "bce_with_logits": lambda x, t: x.binary_crossentropy_logits(t),
    "mse_loss": lambda a, b: (a - b).square().mean(),
    "huber_loss": _huber,
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "batch_norm_train": _batch_norm_train,
    "linear": lambda x, w, b: x.linear(w.transpose(), b),
    "conv1d": _conv1d(1, 0),
    "conv1d_stride2_pad1": _conv1d(2, 1),
    "conv2d": lambda x, w, b: x.conv2d(w, b),
    "conv2d_stride2_pad1": lambda x, w, b: x.conv2d(w, b, stride=2, padding=1),
    "max_pool2d": lambda x: x.max_pool2d((2, 2), stride=2),
    "max_pool1d_k3s1": lambda x: x.max_pool2d((3,), stride=1),
    "avg_pool2d": lambda x: x.avg_pool2d((2, 2), stride=2),
    "attention": _attention(False),
    "attention_causal": _attention(True),
    "embedding": lambda idx, w: w[idx],
    "gelu_tanh": lambda x: x.gelu(approximate="tanh"),
}
