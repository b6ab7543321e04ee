"""Catalog ops written with TensorFlow (meanings: :mod:`.protocol_ops`).

``OPS`` maps a catalog op name to a function of ``tf.Tensor`` arguments; the TensorFlow adapter
returns them from :meth:`~gradcheck.backends.base.Backend.op`.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

OPS: dict[str, Callable] = {
    "sin": tf.sin,
    "cos": tf.cos,
    "tanh": tf.tanh,
    "exp": tf.exp,
    "log": tf.math.log,
    "sqrt": tf.sqrt,
    "square": tf.square,
    "neg": tf.negative,
    "sigmoid": tf.sigmoid,
    "add": tf.add,
    "sub": tf.subtract,
    "mul": tf.multiply,
    "div": tf.divide,
    "matmul": tf.matmul,
    "sum": tf.reduce_sum,
    "mean": tf.reduce_mean,
    "softmax": lambda x: tf.nn.softmax(x, axis=-1),
    "logsumexp_axis1": lambda x: tf.reduce_logsumexp(x, axis=-1),
}
