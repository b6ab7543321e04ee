"""The ``nn`` catalog family written for JAX (``jax.nn`` and ``jax.lax`` where they exist)."""

from __future__ import annotations

from collections.abc import Callable

from gradcheck.engines.jax.ops._common import jax, jnp


def _layer_norm(x, w, b, axis=-1, eps=1e-5):
    mu = jnp.mean(x, axis=axis, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=axis, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * w + b


def _rms_norm(x, w, eps=1e-6):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _cross_entropy(x, t):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(x, axis=-1), t[:, None], axis=1))


def _bce(x, t):
    return jnp.mean(jax.nn.softplus(x) - t * x)


def _huber(a, b):
    d = jnp.abs(a - b)
    return jnp.mean(jnp.where(d < 1.0, 0.5 * d * d, d - 0.5))


def _conv(dims: int, stride: int, pad: int) -> Callable:
    spec = ("NCH", "OIH", "NCH") if dims == 1 else ("NCHW", "OIHW", "NCHW")

    def conv(x, w, b):
        y = jax.lax.conv_general_dilated(x, w, (stride,) * dims, [(pad, pad)] * dims,
                                         dimension_numbers=spec)
        return y + b.reshape((1, -1) + (1,) * dims)

    return conv


def _max_pool(k: int, stride: int, dims: int) -> Callable:
    def pool(x):
        window = (1, 1) + (k,) * dims
        strides = (1, 1) + (stride,) * dims
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, window, strides, "VALID")

    return pool


def _avg_pool2d(x):
    s = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    return s / 4.0


def _attention(causal: bool) -> Callable:
    """softmax(q k^T / sqrt(d)) v, written out (jax.nn.dot_product_attention needs the value
    width to equal the key width; the catalog's does not)."""

    def attention(q, k, v):
        s = jnp.einsum("btd,bsd->bts", q, k) / jnp.sqrt(jnp.asarray(q.shape[-1], q.dtype))
        if causal:
            s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], dtype=bool)), s, -jnp.inf)
        return jnp.einsum("bts,bse->bte", jax.nn.softmax(s, axis=-1), v)

    return attention


OPS: dict[str, Callable] = {
    "softmax": lambda x: jax.nn.softmax(x, axis=-1),
    "log_softmax": lambda x: jax.nn.log_softmax(x, axis=-1),
    "cross_entropy": _cross_entropy,
    "bce_with_logits": _bce,
    "mse_loss": lambda a, b: jnp.mean((a - b) ** 2),
    "huber_loss": _huber,
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "batch_norm_train": lambda x, w, b: _layer_norm(x, w, b, axis=0),
    "linear": lambda x, w, b: x @ w.T + b,
    "conv1d": _conv(1, 1, 0),
    "conv1d_stride2_pad1": _conv(1, 2, 1),
    "conv2d": _conv(2, 1, 0),
    "conv2d_stride2_pad1": _conv(2, 2, 1),
    "max_pool2d": _max_pool(2, 2, 2),
    "max_pool1d_k3s1": _max_pool(3, 1, 1),
    "avg_pool2d": _avg_pool2d,
    "attention": _attention(False),
    "attention_causal": _attention(True),
    "embedding": lambda idx, w: jnp.take(w, idx, axis=0),
    "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
}
