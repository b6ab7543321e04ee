"""The cheap listing of ``gradcheck backends``: every known engine, whether it is installed and
the version of the package that provides it, read from package metadata
(:mod:`importlib.metadata`) without importing any engine.

Importing torch, JAX or TensorFlow takes seconds each; describing an adapter (devices,
semantics) needs the import, so that is ``gradcheck backends --probe``
(:func:`gradcheck.stream.environment.describe_backend`).

The engines outside Python (Candle, Gorgonia, TensorFlow.js) run as a child program built from
``adapters/<name>`` of the gradcheck checkout: the listing names each one even where its child
is not built, with the one command that builds it and the toolchain that needs
(:data:`CHILD_BUILDS`), and, for Candle and Gorgonia, where a user's own model is checked
(``gradcheck model --command ...``).  Whether the toolchain is on ``PATH`` is a lookup
(:func:`shutil.which`); no child is started.
"""

from __future__ import annotations

import importlib.metadata
import shutil
from dataclasses import asdict, dataclass, replace
from typing import Any

from gradcheck.backends import registry

#: the distribution whose version a built-in engine reports (its import name where they agree)
DISTRIBUTIONS = {"torch": "torch", "jax": "jax", "numpy": "numpy", "autograd": "autograd",
                 "tensorflow": "tensorflow", "mlx": "mlx", "tinygrad": "tinygrad"}


@dataclass(frozen=True)
class ChildBuild:
    """How the child program of an engine outside Python is built, and what a user runs to
    check a model of their own written with that engine."""

    command: str  # the one command that builds the child, run in the gradcheck checkout
    needs: str  # what the command needs, in words
    tools: tuple[str, ...]  # the executables it runs, looked up on PATH
    own_model: str = ""  # the command that checks a user's own model ("": none)
    guide: str = ""  # the user guide of that command


#: the engines whose child program is built from ``adapters/<name>`` (docs/engines/)
CHILD_BUILDS: dict[str, ChildBuild] = {
    "candle": ChildBuild("bash adapters/candle/install.sh", "cargo (Rust)", ("cargo",),
                         'gradcheck model --command "cargo run -q --release --example MODEL"',
                         "docs/engines/candle-user.md"),
    "gorgonia": ChildBuild("bash adapters/gorgonia/install.sh", "go (Go >= 1.21)", ("go",),
                           'gradcheck model --command "go run ./MODEL"',
                           "docs/engines/gorgonia-user.md"),
    "tfjs": ChildBuild("bash adapters/tfjs/install.sh", "node and npm (Node.js >= 18)",
                       ("node", "npm")),
}


@dataclass(frozen=True)
class BackendListing:
    """One engine as the listing shows it: ``installed`` False with ``reason`` where it cannot
    run here; ``version`` the providing distribution's, None where there is none (an engine
    outside Python, whose version its adapter reports under ``--probe``).  An engine outside
    Python also carries ``build`` (the one command that builds its child), ``needs`` (what that
    command needs), ``toolchain_found`` (whether those tools are on ``PATH``), and where there
    is one ``own_model`` (the command that checks a user's own model) with its ``guide``."""

    name: str
    source: str  # the adapter, "package.module:Attr"
    installed: bool
    distribution: str | None = None
    version: str | None = None
    reason: str = ""
    build: str = ""
    needs: str = ""
    toolchain_found: bool | None = None  # None: not an engine outside Python
    own_model: str = ""
    guide: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def toolchain_found(child: ChildBuild) -> bool:
    """Whether every tool the build of ``child`` runs is on ``PATH`` (a lookup, nothing run)."""
    return all(shutil.which(tool) is not None for tool in child.tools)


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
        row = BackendListing(name, source, name in installed, dist, version, reason)
        child = CHILD_BUILDS.get(name) if source == registry.BUILTIN.get(name) else None
        if child is not None:
            row = replace(row, build=child.command, needs=child.needs,
                          toolchain_found=toolchain_found(child), own_model=child.own_model,
                          guide=child.guide)
        out.append(row)
    return sorted(out, key=lambda b: not b.installed)
