"""A NumPy backend that counts its VJP calls (the exact comparisons' tests count how often the
judging side re-evaluates)."""

from __future__ import annotations

from gradcheck.engines.numpy.backend import NumpyBackend


class CountingNumpyBackend(NumpyBackend):
    """A NumPy backend that counts its VJP calls."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def vjp(self, fn, args, diff, cotangents, device):
        self.calls += 1
        return super().vjp(fn, args, diff, cotangents, device)
