"""What a run ran on: gradcheck version, git revision, Python, platform, package versions.

Collected without importing any autodiff engine (package versions come from the installed
metadata); the devices of a backend are known only once that backend has been used, so
:func:`backend_records` describes the adapters this process actually instantiated.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gradcheck._version import __version__

_PACKAGES = ("numpy", "scipy", "torch", "jax", "jaxlib", "tensorflow", "autograd", "pytest",
             "pytest-xdist", "hypothesis")


def _package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


@functools.lru_cache(maxsize=1)
def git_revision() -> dict[str, Any] | None:
    """``{"commit", "dirty", "path"}`` of the gradcheck checkout this code runs from, or None."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, errors="replace", timeout=5, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                 "--untracked-files=no"], capture_output=True, text=True,
                                errors="replace", timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(status), "path": str(root)}


def environment_record(role: str) -> dict[str, Any]:
    """The body of an ``environment`` record for this process."""
    return {
        "role": role,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gradcheck": __version__,
        "git": git_revision(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "packages": _package_versions(),
    }


def describe_backend(backend: Any) -> dict[str, Any]:
    """Name, version, devices, dtypes and declared semantics of one adapter (never raises)."""
    out: dict[str, Any] = {"name": str(getattr(backend, "name", "?"))}
    try:
        out["version"] = str(backend.version())
    except Exception as exc:  # a broken adapter is described, not fatal
        out["version"] = f"unavailable ({type(exc).__name__}: {exc})"
    try:
        devices = backend.devices()
    except Exception as exc:
        devices = f"unavailable ({type(exc).__name__}: {exc})"
    if isinstance(devices, (list, tuple)) and all(isinstance(d, str) for d in devices):
        out["devices"] = list(devices)
    else:  # what the stream's readers accept (a list of names), and what the adapter said
        out["devices"] = []
        out["devices_error"] = (devices if isinstance(devices, str)
                                else f"devices() returned {devices!r:.200}")
    out["dtypes"] = list(getattr(backend, "dtypes", ()))
    sem = getattr(backend, "semantics", None)
    if sem is not None:
        out["semantics"] = {
            "accumulation": getattr(sem.accumulation, "value", str(sem.accumulation)),
            "stop_gradient": sem.stop_gradient,
            "forward_mode_respects_no_grad": sem.forward_mode_respects_no_grad,
            "notes": sem.notes,
        }
    out["supports_jvp"] = bool(getattr(backend, "supports_jvp", False))
    out["supports_order2"] = bool(getattr(backend, "supports_order2", False))
    return out


def backend_records() -> list[dict[str, Any]]:
    """Descriptions of every backend adapter this process has instantiated."""
    registry = sys.modules.get("gradcheck.backends.registry")
    if registry is None:
        return []
    seen: dict[str, dict[str, Any]] = {}
    for backend in list(getattr(registry, "_CACHE", {}).values()):
        desc = describe_backend(backend)
        seen.setdefault(desc["name"], desc)
    return list(seen.values())
