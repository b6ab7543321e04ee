"""Elementwise unary catalog ops written for PyTorch."""

from __future__ import annotations

import torch
import torch.nn.functional as F

OPS = {
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "tanh": torch.tanh,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "arcsin": torch.asin,
    "arccos": torch.acos,
    "arctan": torch.atan,
    "arcsinh": torch.asinh,
    "arccosh": torch.acosh,
    "arctanh": torch.atanh,
    "exp": torch.exp,
    "exp2": torch.exp2,
    "expm1": torch.expm1,
    "log": torch.log,
    "log2": torch.log2,
    "log10": torch.log10,
    "log1p": torch.log1p,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "sigmoid": torch.sigmoid,
    "logsigmoid": F.logsigmoid,
    "softplus": F.softplus,
    "silu": F.silu,
    "gelu": F.gelu,
    "elu": F.elu,
    "erf": torch.erf,
    "erfc": torch.erfc,
    "erfinv": torch.erfinv,
    "lgamma": torch.lgamma,
    "digamma": torch.digamma,
    "sinc": torch.sinc,
    "i0": torch.i0,
    "abs": torch.abs,
    "square": torch.square,
    "reciprocal": torch.reciprocal,
    "relu": torch.relu,
}
