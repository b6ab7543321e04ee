"""Elementwise unary catalog ops written for tinygrad (``Tensor`` methods)."""

from __future__ import annotations

from tinygrad import Tensor

T = Tensor

OPS = {
    "sin": T.sin,
    "cos": T.cos,
    "tan": T.tan,
    "tanh": T.tanh,
    "sinh": T.sinh,
    "cosh": T.cosh,
    "arcsin": T.asin,
    "arccos": T.acos,
    "arctan": T.atan,
    "arcsinh": T.asinh,
    "arccosh": T.acosh,
    "arctanh": T.atanh,
    "neg": T.neg,  # a protocol name (gradcheck/backends/protocol_ops.py)
    "exp": T.exp,
    "exp2": T.exp2,
    "log": T.log,
    "log2": T.log2,
    "log10": T.log10,
    "sqrt": T.sqrt,
    "rsqrt": T.rsqrt,
    "sigmoid": T.sigmoid,
    "logsigmoid": T.logsigmoid,
    "softplus": T.softplus,
    "silu": T.silu,
    "gelu": lambda x: x.gelu(approximate="none"),
    "elu": T.elu,
    "erf": T.erf,
    "abs": T.abs,
    "square": T.square,
    "reciprocal": T.reciprocal,
    "relu": T.relu,
}

_NONE = "tinygrad 0.14 has no {} function"
MISSING = {name: _NONE.format(name) for name in (
    "expm1", "log1p", "erfc", "erfinv", "lgamma", "digamma", "sinc", "i0")}
