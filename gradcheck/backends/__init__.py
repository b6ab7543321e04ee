"""Backend adapters: the contract (:mod:`.base`), the registry and the built-in adapters.

Built-in adapters for torch and jax live in their own modules and are imported on demand.
"""

from gradcheck.backends.base import Accumulation, Backend, Semantics
from gradcheck.backends.numpy_backend import NumpyBackend, NumpyFunction
from gradcheck.backends.registry import get_backend, installed_backends, known_backends

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
