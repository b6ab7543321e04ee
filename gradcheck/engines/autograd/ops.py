"""Catalog ops written with HIPS autograd's ``autograd.numpy`` (meanings: :mod:`.protocol_ops`).

``OPS`` maps a catalog op name to a function of ``autograd.numpy`` arrays; the autograd adapter
returns them from :meth:`~gradcheck.backends.base.Backend.op`.  autograd has no ``sigmoid`` or
``softmax`` primitive: they are composed here from primitives it differentiates.
"""

from __future__ import annotations

from collections.abc import Callable

import autograd.numpy as anp
from autograd.scipy.special import logsumexp as _logsumexp


def _sigmoid(x):
    return 1.0 / (1.0 + anp.exp(-x))


def _softmax(x):
    z = anp.exp(x - anp.max(x, axis=-1, keepdims=True))
    return z / anp.sum(z, axis=-1, keepdims=True)


OPS: dict[str, Callable] = {
    "sin": anp.sin,
    "cos": anp.cos,
    "tanh": anp.tanh,
    "exp": anp.exp,
    "log": anp.log,
    "sqrt": anp.sqrt,
    "square": anp.square,
    "neg": anp.negative,
    "sigmoid": _sigmoid,
    "add": anp.add,
    "sub": anp.subtract,
    "mul": anp.multiply,
    "div": anp.divide,
    "matmul": anp.matmul,
    "sum": anp.sum,
    "mean": anp.mean,
    "softmax": _softmax,
    "logsumexp_axis1": lambda x: _logsumexp(x, axis=-1),
}
