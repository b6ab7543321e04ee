"""Backend adapters: the contract (:mod:`.base`), the registry and the built-in adapters.

Built-in adapters for torch and jax live in their own modules and are imported on demand.
"""

from .base import Accumulation, Backend, Semantics
from .numpy_backend import NumpyBackend, NumpyFunction
from .registry import get_backend, installed_backends, known_backends

__all__ = [
    "Accumulation",
    "Backend",
    "NumpyBackend",
    "NumpyFunction",
    "Semantics",
    "get_backend",
    "installed_backends",
    "known_backends",
]
