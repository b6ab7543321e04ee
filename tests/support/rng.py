"""Snapshots of the global random generators, for the tests that assert a training step or an
audit leaves the caller's RNG as found (the audit's own forking is gradcheck/backends/_seeding.py).
"""

from __future__ import annotations

import random
import sys
from typing import Any

import numpy as np


def rng_states() -> tuple[Any, ...]:
    """A comparable snapshot of every global RNG state (Python, NumPy, torch if imported)."""
    torch = sys.modules.get("torch")
    t = None if torch is None else torch.random.get_rng_state().clone()
    return random.getstate(), np.random.get_state(), t


def same_rng_states(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two :func:`rng_states` snapshots are bitwise equal."""
    py = a[0] == b[0]
    npy = a[1][0] == b[1][0] and np.array_equal(a[1][1], b[1][1]) and a[1][2:] == b[1][2:]
    if a[2] is None or b[2] is None:
        return py and npy and a[2] is b[2]
    return py and npy and bool((a[2] == b[2]).all())
