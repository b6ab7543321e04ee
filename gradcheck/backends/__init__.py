"""What a backend is, and the machinery around one: the adapter contract (:mod:`.base`), the
guarded adapter boundary, the registry of engines, the child-process protocol and the training
hooks.  The engines themselves live in :mod:`gradcheck.engines`, imported on demand by the registry.
"""

from gradcheck.backends.base import Accumulation, Backend, Semantics
from gradcheck.backends.registry import get_backend, installed_backends, known_backends

__all__ = [
    "Accumulation",
    "Backend",
    "Semantics",
    "get_backend",
    "installed_backends",
    "known_backends",
]
