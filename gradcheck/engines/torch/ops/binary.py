"""Elementwise binary catalog ops written for PyTorch."""

from __future__ import annotations

import torch

OPS = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "pow": torch.pow,
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "logaddexp": torch.logaddexp,
    "add_bcast": torch.add,
    "mul_bcast": torch.mul,
    "div_bcast": torch.div,
    "mul_scalar": torch.mul,
}
