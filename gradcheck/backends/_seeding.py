"""Controlled randomness for audits: every evaluation of a user's loss or step sees the same RNG.

A forward with dropout (or any draw from a global RNG) is a different function at every call, so
finite differences of it measure noise.  :func:`controlled_rng` forks the global generators the
user's code can draw from (Python ``random``, NumPy's legacy global ``np.random``, and torch's CPU
and CUDA generators when torch is imported), seeds them identically, runs the body, and puts the
original states back: each evaluation sees the same masks, and the caller's RNG is left as found.
JAX has no global generator (keys are explicit arguments), so a JAX loss is deterministic given
its inputs.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np


@contextmanager
def controlled_rng(seed: int) -> Iterator[None]:
    """Run the body with every global RNG seeded with ``seed``; restore their states after."""
    torch = sys.modules.get("torch")
    py_state = random.getstate()
    np_state = np.random.get_state()
    fork: Any = nullcontext() if torch is None else torch.random.fork_rng(
        devices=list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else [])
    with fork:
        random.seed(seed)
        np.random.seed(seed % (2 ** 32))
        if torch is not None:
            torch.manual_seed(seed)
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
