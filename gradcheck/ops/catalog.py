"""The op catalog registry: every :class:`OpSpec`, and each backend's implementations, by name.

Specs live in per-family modules ``gradcheck/ops/<family>.py`` (``SPECS``).  Implementations
live in per-family modules of three packages, each exporting ``OPS: dict[str, Callable]``:

* ``gradcheck.reference.numpy.<family>``: :class:`gradcheck.NumpyFunction` (forward +
  hand-derived VJP/JVP),
* ``gradcheck.engines.jax.ops.<family>``: the op written with ``jax.numpy`` / ``jax.lax``,
* ``gradcheck.engines.torch.ops.<family>``: the op written for PyTorch (likewise
  ``mlx_ops`` and ``tinygrad_ops`` for MLX and tinygrad).

A family module may also export ``MISSING: dict[str, str]``: ops it deliberately lacks and why
(the suites skip them with that reason).  Everything is imported lazily, one family at a time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache, lru_cache
from typing import Any

from gradcheck.core.errors import InvalidArgument
from gradcheck.ops.engine_known import attach
from gradcheck.ops.spec import OpSpec

FAMILIES: tuple[str, ...] = ("unary", "binary", "reduction", "special", "linalg", "shape", "nn")

# Backend name -> package holding its per-family op modules.
IMPLEMENTATIONS: dict[str, str] = {
    "numpy": "gradcheck.reference.numpy",
    "jax": "gradcheck.engines.jax.ops",
    "torch": "gradcheck.engines.torch.ops",
    "mlx": "gradcheck.engines.mlx.ops",
    "tinygrad": "gradcheck.engines.tinygrad.ops",
}


@cache
def _family_specs(family: str) -> tuple[OpSpec, ...]:
    module = importlib.import_module(f"{__package__}.{family}")
    specs = attach(tuple(module.SPECS))  # entries of the engines kept in engine_known
    for s in specs:
        if s.family != family:
            raise ValueError(f"op {s.name!r} is listed in family {family!r} but says {s.family!r}")
    return specs


@lru_cache(maxsize=1)
def _index() -> dict[str, OpSpec]:
    out: dict[str, OpSpec] = {}
    for family in FAMILIES:
        for s in _family_specs(family):
            if s.name in out:
                raise ValueError(f"op {s.name!r} is defined twice in the catalog")
            out[s.name] = s
    return out


def all_specs(families: tuple[str, ...] | None = None) -> tuple[OpSpec, ...]:
    """Every spec of the catalog (or of the given families), in catalog order."""
    fams = FAMILIES if families is None else families
    return tuple(s for f in fams for s in _family_specs(f))


def quick_names() -> tuple[str, ...]:
    """The ops of the ``quick`` profile: each family module's ``QUICK`` tuple (default: its
    first three ops)."""
    out: list[str] = []
    for family in FAMILIES:
        module = importlib.import_module(f"{__package__}.{family}")
        out.extend(getattr(module, "QUICK", [s.name for s in _family_specs(family)[:3]]))
    return tuple(out)


def names() -> tuple[str, ...]:
    """Every op name, in catalog order."""
    return tuple(_index())


def get_spec(name: str) -> OpSpec:
    """The spec of op ``name``; :class:`InvalidArgument` with close matches if unknown."""
    try:
        return _index()[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, _index(), n=5)
        hint = f"; did you mean: {', '.join(close)}" if close else ""
        raise InvalidArgument(f"op={name!r} is not in the catalog{hint}") from None


def load_family_ops(package: str, family: str) -> tuple[dict[str, Any], dict[str, str]]:
    """``(OPS, MISSING)`` of ``package.family``; a family module that does not exist yet
    counts as empty (a package may implement a subset of the families)."""
    return _load_family(package, family)


@cache
def _load_family(package: str, family: str) -> tuple[dict[str, Any], dict[str, str]]:
    module_name = f"{package}.{family}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        return {}, {}
    return dict(module.OPS), dict(getattr(module, "MISSING", {}))


def _families_for(name: str) -> tuple[str, ...]:
    spec = _index().get(name)
    return (spec.family,) if spec is not None else FAMILIES


def package_op(package: str, name: str) -> Callable | None:
    """The implementation of op ``name`` in ``package`` (one of :data:`IMPLEMENTATIONS`), or
    None.  Only the op's own family module is imported."""
    for family in _families_for(name):
        ops, _ = load_family_ops(package, family)
        if name in ops:
            return ops[name]
    return None


def missing_reason(backend: str, name: str) -> str:
    """Why ``backend`` has no implementation of op ``name`` (for skip messages)."""
    package = IMPLEMENTATIONS.get(backend)
    if package is not None:
        for family in _families_for(name):
            reason = load_family_ops(package, family)[1].get(name)
            if reason:
                return f"backend {backend!r} lacks op {name!r}: {reason}"
    return f"backend {backend!r} has no implementation of op {name!r}"
