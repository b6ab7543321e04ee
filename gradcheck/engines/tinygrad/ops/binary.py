"""Elementwise binary catalog ops written for tinygrad."""

from __future__ import annotations

from tinygrad import Tensor

T = Tensor

OPS = {
    "add": T.add,
    "sub": T.sub,
    "mul": T.mul,
    "div": T.div,
    "pow": T.pow,
    "maximum": T.maximum,
    "minimum": T.minimum,
    "logaddexp": T.logaddexp,
    "add_bcast": T.add,
    "mul_bcast": T.mul,
    "div_bcast": T.div,
    "mul_scalar": T.mul,
}

MISSING = {"atan2": "tinygrad 0.14 has no atan2 function",
           "hypot": "tinygrad 0.14 has no hypot function"}
