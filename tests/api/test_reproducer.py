"""The reproducer script's building blocks (gradcheck/_reproducer.py); the scripts themselves,
as a failure message prints them, are tested in test_messages.py."""

from __future__ import annotations

import numpy as np

from gradcheck._reproducer import array_literal


def test_float32_and_nonfinite_values_are_inlined_exactly():
    a = np.array([1.1, np.inf, -np.inf, np.nan, -0.0, 3e-39], dtype=np.float32)
    text, note = array_literal(a, 0, 0)
    back = eval(text, {"np": np})
    assert note == "" and back.dtype == np.float32
    assert np.array_equal(back, a, equal_nan=True) and np.signbit(back[4])
