"""Elementwise unary catalog ops written for MLX (``mlx.core`` and ``mlx.nn`` activations)."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn

OPS = {
    "sin": mx.sin,
    "cos": mx.cos,
    "tan": mx.tan,
    "tanh": mx.tanh,
    "sinh": mx.sinh,
    "cosh": mx.cosh,
    "arcsin": mx.arcsin,
    "arccos": mx.arccos,
    "arctan": mx.arctan,
    "arcsinh": mx.arcsinh,
    "arccosh": mx.arccosh,
    "arctanh": mx.arctanh,
    "neg": mx.negative,  # a protocol name (gradcheck/backends/protocol_ops.py)
    "exp": mx.exp,
    "exp2": lambda x: mx.power(2.0, x),  # no exp2 function: the power primitive, base 2
    "expm1": mx.expm1,
    "log": mx.log,
    "log2": mx.log2,
    "log10": mx.log10,
    "log1p": mx.log1p,
    "sqrt": mx.sqrt,
    "rsqrt": mx.rsqrt,
    "sigmoid": mx.sigmoid,
    "logsigmoid": nn.log_sigmoid,
    "softplus": nn.softplus,
    "silu": nn.silu,
    "gelu": nn.gelu,
    "elu": nn.elu,
    "erf": mx.erf,
    "erfinv": mx.erfinv,
    "abs": mx.abs,
    "square": mx.square,
    "reciprocal": mx.reciprocal,
    "relu": nn.relu,
}

MISSING = {
    "erfc": "MLX 0.32 has no erfc (1 - erf cancels in the tail the op is checked at)",
    "lgamma": "MLX 0.32 has no lgamma",
    "digamma": "MLX 0.32 has no digamma",
    "sinc": "MLX 0.32 has no sinc",
    "i0": "MLX 0.32 has no Bessel functions",
}
