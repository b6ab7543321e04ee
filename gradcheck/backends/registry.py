"""Finding backends by name: built-ins, ``"package.module:Attr"`` paths, instances, entry points.

``get_backend("torch")`` imports torch only then.  Third-party adapters register under the entry
point group ``gradcheck.backends`` (``name = "package.module:AdapterClass"``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from typing import Any

from gradcheck.backends.base import Backend
from gradcheck.core.errors import InvalidArgument

ENTRY_POINT_GROUP = "gradcheck.backends"

BUILTIN: dict[str, str] = {
    "numpy": "gradcheck.engines.numpy.backend:NumpyBackend",
    "torch": "gradcheck.engines.torch.backend:TorchBackend",
    "jax": "gradcheck.engines.jax.backend:JaxBackend",
    "autograd": "gradcheck.engines.autograd.backend:AutogradBackend",
    "tfjs": "gradcheck.engines.tfjs:TfjsBackend",
    "gorgonia": "gradcheck.engines.gorgonia:GorgoniaBackend",
    "tensorflow": "gradcheck.engines.tensorflow.backend:TensorflowBackend",
    "mlx": "gradcheck.engines.mlx.backend:MlxBackend",
    "tinygrad": "gradcheck.engines.tinygrad.backend:TinygradBackend",
    "candle": "gradcheck.engines.candle:CandleBackend",
}
_REQUIRES = {"torch": "torch", "jax": "jax", "numpy": "numpy", "autograd": "autograd",
             "tensorflow": "tensorflow", "mlx": "mlx", "tinygrad": "tinygrad"}
# engines that are not Python modules: a cheap ``() -> reason | None`` says whether they run here
_AVAILABILITY = {"tfjs": "gradcheck.engines.tfjs:unavailable_reason",
                 "gorgonia": "gradcheck.engines.gorgonia:unavailable_reason",
                 "candle": "gradcheck.engines.candle:unavailable_reason"}
_CACHE: dict[str, Backend] = {}


def _entry_points() -> dict[str, str]:
    try:
        eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception:  # pragma: no cover - broken metadata must not break the harness
        return {}
    return {ep.name: ep.value for ep in eps}


def known_backends() -> dict[str, str]:
    """Every backend name this process could resolve, mapped to its ``module:Attr`` path."""
    return {**BUILTIN, **_entry_points()}


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def unavailable_reason(name: str) -> str | None:
    """Why the non-Python engine ``name`` cannot run here (None: it can, or it is a Python one)."""
    if name not in _AVAILABILITY:
        return None
    module, _, attr = _AVAILABILITY[name].partition(":")
    return getattr(importlib.import_module(module), attr)()


def installed_backends() -> list[str]:
    """Names of the backends whose engine is importable here (no engine is imported)."""
    out = []
    for name, path in known_backends().items():
        if name in _AVAILABILITY:
            if unavailable_reason(name) is None:
                out.append(name)
            continue
        module = _REQUIRES.get(name, path.split(":")[0])
        try:
            if _importable(module.split(".")[0]):
                out.append(name)
        except (ImportError, ValueError):
            continue
    return out


def _load(path: str) -> Backend:
    module_name, _, attr = path.partition(":")
    if not attr:
        raise InvalidArgument(f"backend={path!r}: a path must look like 'package.module:Attr'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidArgument(f"backend={path!r} cannot be imported: {exc}") from exc
    except SystemExit as exc:  # an import that ends the process must not end the run, exit 0
        raise InvalidArgument(f"backend={path!r}: importing {module_name} called "
                              f"sys.exit({exc.code!r}); an adapter module must not exit"
                              ) from None
    try:
        obj = getattr(module, attr)
    except AttributeError as exc:
        raise InvalidArgument(f"backend={path!r}: {module_name} has no attribute {attr!r}") from exc
    if isinstance(obj, type) and not issubclass(obj, Backend):
        raise InvalidArgument(
            f"backend={path!r} is the class {obj.__name__}, not a gradcheck.Backend subclass")
    backend = _constructed(path, obj) if isinstance(obj, type) else obj
    if not isinstance(backend, Backend):
        raise InvalidArgument(
            f"backend={path!r} is a {type(backend).__name__}, not a gradcheck.Backend subclass"
        )
    return backend


def get_backend(spec: str | Backend | Any) -> Backend:
    """Resolve a backend from a name, a ``"module:Attr"`` path or an adapter instance."""
    if isinstance(spec, Backend):
        return spec
    if isinstance(spec, type) and issubclass(spec, Backend):
        return _constructed(spec.__name__, spec)
    if not isinstance(spec, str):
        raise InvalidArgument(f"backend={spec!r} must be a name, 'module:Attr' or a Backend")
    if spec in _CACHE:
        return _CACHE[spec]
    known = known_backends()
    if spec in known:
        module = _REQUIRES.get(spec)
        if module and not _importable(module):
            raise InvalidArgument(
                f"backend={spec!r} is not installed (pip install 'gradcheck[{spec}]'); "
                f"available: {', '.join(installed_backends())}"
            )
        reason = unavailable_reason(spec)
        if reason:
            raise InvalidArgument(f"backend={spec!r} is not available: {reason}")
        backend = _load(known[spec])
    elif ":" in spec:
        backend = _load(spec)
    else:
        raise InvalidArgument.choice("backend", spec, list(known) + ["'package.module:Attr'"])
    _CACHE[spec] = backend
    return backend


def _constructed(what: str, cls: type) -> Backend:
    """``cls()``; an adapter whose constructor fails (any ``Exception``, a ``MemoryError``)
    is a backend that cannot be used here: :class:`InvalidArgument` naming it and the error,
    like a backend that is not installed."""
    try:
        return cls()
    except Exception as exc:
        raise InvalidArgument(f"backend={what!r} cannot be constructed: "
                              f"{type(exc).__name__}: {exc}") from exc


def backend_devices(backend: Backend) -> list[str]:
    """``backend.devices()``, checked: a list (or tuple) of non-empty strings.  An adapter
    whose ``devices()`` raises or returns anything else cannot say where it runs:
    :class:`InvalidArgument` naming the adapter and what it did (never a raw traceback)."""
    try:
        found = backend.devices()
    except Exception as exc:
        raise InvalidArgument(f"backend={backend.name!r}: devices() raised "
                              f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(found, (list, tuple)) or not all(isinstance(d, str) and d for d in found):
        raise InvalidArgument(f"backend={backend.name!r}: devices() returned {found!r:.200}, "
                              "not a list of device names")
    return list(found)
