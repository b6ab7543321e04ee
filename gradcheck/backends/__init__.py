"""What a backend is, and the machinery around one: the adapter contract (:mod:`.base`), the
guarded adapter boundary, the registry of engines, the child-process protocol and the training
hooks.  The engines themselves live in :mod:`gradcheck.engines`, imported on demand by the registry.
"""

import importlib
import warnings
from typing import Any

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


#: names this package re-exported before 0.2, now at their own homes (resolved on access, with a
#: DeprecationWarning; imported by name so that backends/ keeps no import of an engine)
_MOVED_NAMES = {"NumpyBackend": "gradcheck.engines.numpy.backend",
                "NumpyFunction": "gradcheck.core.rules"}


def __getattr__(name: str) -> Any:
    home = _MOVED_NAMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"gradcheck.backends.{name} moved to {home}.{name} (gradcheck.{name} for "
                  "NumpyFunction); the old name goes away in gradcheck 0.2",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(home), name)
