"""The cheap listing of ``gradcheck backends``: every known engine, whether it is installed and
the version of the package that provides it, read from package metadata
(:mod:`importlib.metadata`) without importing any engine.

Importing torch, JAX or TensorFlow takes seconds each; describing an adapter (devices,
semantics) needs the import, so that is ``gradcheck backends --probe``
(:func:`gradcheck.stream.environment.describe_backend`).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import asdict, dataclass
from typing import Any

from gradcheck.backends import registry

#: the distribution whose version a built-in engine reports (its import name where they agree)
DISTRIBUTIONS = {"torch": "torch", "jax": "jax", "numpy": "numpy", "autograd": "autograd",
                 "tensorflow": "tensorflow", "mlx": "mlx", "tinygrad": "tinygrad"}


@dataclass(frozen=True)
class BackendListing:
    """One engine as the listing shows it: ``installed`` False with ``reason`` where it cannot
    run here; ``version`` the providing distribution's, None where there is none (an engine
    outside Python, whose version its adapter reports under ``--probe``)."""

    name: str
    source: str  # the adapter, "package.module:Attr"
    installed: bool
    distribution: str | None = None
    version: str | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _entry_point_distributions() -> dict[str, tuple[str, str]]:
    """name -> (distribution, version) of each adapter registered by an entry point."""
    out = {}
    try:
        eps = importlib.metadata.entry_points(group=registry.ENTRY_POINT_GROUP)
    except Exception:  # pragma: no cover - broken metadata must not break the listing
        return {}
    for ep in eps:
        dist = getattr(ep, "dist", None)
        if dist is not None:
            out[ep.name] = (str(dist.metadata["Name"]), str(dist.version))
    return out


def list_backends() -> list[BackendListing]:
    """Every known backend (built-in and entry point), installed ones first, in the order of
    :func:`gradcheck.backends.known_backends`; no engine is imported."""
    installed = set(registry.installed_backends())
    plugins = _entry_point_distributions()
    out = []
    for name, source in registry.known_backends().items():
        dist: str | None = DISTRIBUTIONS.get(name)
        version = _version(dist) if dist else None
        if name in plugins:
            dist, version = plugins[name]
        reason = ""
        if name not in installed:
            reason = registry.unavailable_reason(name) or (
                f"not installed (pip install 'gradcheck[{name}]')" if name in DISTRIBUTIONS
                else f"{source.split(':')[0]} is not importable")
        out.append(BackendListing(name, source, name in installed, dist, version, reason))
    return sorted(out, key=lambda b: not b.installed)
