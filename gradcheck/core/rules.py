"""Hand-derived derivative rules as data: :class:`NumpyFunction`.

A rule is a NumPy forward with its hand-written VJP (and optionally JVP).  It lives at the bottom
of the package (NumPy only, nothing of gradcheck imported), so the hand-derived references in
``reference/numpy`` depend on nothing above it; the ``numpy`` backend
(:mod:`gradcheck.engines.numpy.backend`) is what evaluates and differentiates rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["NumpyFunction"]


@dataclass(frozen=True)
class NumpyFunction:
    """A NumPy function with hand-derived derivatives.

    ``forward(*args)`` returns an array or a tuple of arrays.
    ``vjp(args, cotangents)`` returns one gradient per argument (None for non-differentiable
    ones); ``cotangents`` has one array per output.
    ``jvp(args, tangents)`` (optional) returns one output tangent per output; ``tangents`` has one
    array per argument (zeros for arguments not being differentiated).

    Order 2: ``vjp`` may itself be a :class:`NumpyFunction` whose ``forward(*args, *cotangents)``
    returns the gradients and whose own ``vjp``/``jvp`` are the hand-derived second-order rules
    (the VJP as a function of the arguments and the cotangents).
    """

    forward: Callable[..., Any]
    vjp: Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], Sequence[Any]]
    jvp: Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], Sequence[Any]] | None = None
    name: str = ""

    def __call__(self, *args: Any) -> Any:
        return self.forward(*args)

    @property
    def __name__(self) -> str:  # so reproducers can name it
        return self.name or getattr(self.forward, "__name__", "numpy_function")
