"""JAX's 64-bit mode, scoped: on inside gradcheck's calls into JAX, the caller's setting kept.

``jax.enable_x64(True)`` is a context manager that restores the previous setting on the way
out, so a check never switches ``jax_enable_x64`` on for the rest of the user's process.
:func:`x64` wraps one function; :func:`x64_methods` wraps every public method of a class and,
where a method returns a function (a compiled runner, a no-grad region), that function too, so
the harness calling it later still computes in float64.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import jax

_F = TypeVar("_F", bound=Callable[..., Any])
_C = TypeVar("_C", bound=type)


def x64(fn: _F, *, wrap_result: bool = False) -> _F:
    """``fn`` run with 64-bit mode on; with ``wrap_result`` a returned function is wrapped too."""

    @functools.wraps(fn)
    def scoped(*args: Any, **kwargs: Any) -> Any:
        with jax.enable_x64(True):
            out = fn(*args, **kwargs)
        if wrap_result and inspect.isfunction(out):
            return x64(out)
        return out

    return scoped  # type: ignore[return-value]


def x64_methods(cls: _C) -> _C:
    """Class decorator: every public method defined on ``cls`` runs in 64-bit mode."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") or not inspect.isfunction(member):
            continue
        setattr(cls, name, x64(member, wrap_result=True))
    return cls
