"""Intent declared where it happens: markers for stopped and surrogate-gradient values.

A training loss sometimes *means* to differentiate something other than itself: a semi-gradient
TD target is a constant for the update although it depends on the same parameters, a gradient
reversal layer passes ``-g`` back through an identity, a straight-through estimator passes ``g``
through a rounding.  Finite differences of the loss measure the true derivative, so without a
declaration a correct design disagrees with FD and forgetting the stop looks like a pass.  The
markers say what is intended, at the line where it happens:

``stopped(value, label)``
    ``value`` is meant to carry no gradient (the user's code stops it: ``detach``,
    ``torch.no_grad``, ``lax.stop_gradient``).
``surrogate(value, gradient_of, label)``
    ``value``'s gradient is meant to be that of ``gradient_of`` (``-x`` for a reversal layer,
    ``x`` for a straight-through rounding of ``x``) while its value is ``value``.
``surrogate(value, vjp=fn, label=...)``
    ``value``'s backward is meant to map the incoming cotangent ``g`` to ``fn(g)`` (a custom VJP
    that clips: ``vjp=lambda g: clip(g, -1, 1)``).

Outside :func:`gradcheck.audit` both return ``value`` unchanged (no cost, no effect).  Inside, the
audit checks the code against the declaration both ways: it records each marker at the base point
of a float64 copy of the model, and its finite differences evaluate the *intended* function, with
each ``stopped`` value frozen to its recorded constant and each ``surrogate`` value replaced by
``value_0 + (gradient_of - gradient_of_0)``, or for a declared ``vjp`` by
``value_0 + g <fn(g), value - value_0> / <g, g>`` with ``g`` the cotangent reaching the value at
the base point (measured by one extra gradient pass): its derivative along any direction is
``<fn(g), d value>``, exactly what the declared backward passes on.  AD of the user's code must
then equal FD of the intended function: a declared stop that does not happen, a reversal that
does not reverse, or an undeclared detach on one path of a parameter (its AD misses the
FD-measured path) all disagree, and the message names the markers and cut points (file:line)
on the parameter's path.  On torch a ``stopped`` value that still requires grad is also reported
directly.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["stopped", "surrogate"]


@dataclass
class Declaration:
    """One marker call seen by the audit: ``kind`` ``"stopped"`` or ``"surrogate"``, ``label``,
    ``where`` (file:line), and on torch whether the value still required grad (``connected``)."""

    kind: str
    label: str
    where: str
    connected: bool | None = None
    base: Any = None
    base_gradient_of: Any = None
    vjp: Callable | None = None
    cotangent: Any = None
    mapped: Any = None
    norm2: float = 0.0

    def __str__(self) -> str:
        name = f" {self.label!r}" if self.label else ""
        return f"declared {self.kind}{name} at {self.where}"


@dataclass
class _Session:
    mode: str = "observe"  # observe | record | freeze
    seen: list[Declaration] = field(default_factory=list)
    index: int = 0
    overflow: bool = False
    zs: list = field(default_factory=list)


_ACTIVE: list[_Session] = []


def _where() -> str:
    frame: types.FrameType | None = sys._getframe(2)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame = frame.f_back
    if frame is None:
        return "?"
    path = frame.f_code.co_filename
    shown = path if path.startswith("<") else os.path.relpath(path)
    return f"{shown}:{frame.f_lineno}"


def _detached(x: Any) -> Any:
    d = getattr(x, "detach", None)
    return d().clone() if callable(d) and hasattr(x, "clone") else x


def _requires_grad(x: Any) -> bool | None:
    flag = getattr(x, "requires_grad", None)
    return None if flag is None else bool(flag)


def _mark(kind: str, value: Any, gradient_of: Any, label: str, vjp: Callable | None = None
          ) -> Any:
    if not _ACTIVE:
        return value
    s = _ACTIVE[-1]
    if s.mode == "observe":
        s.seen.append(Declaration(kind, label, _where(), _requires_grad(value)))
        return value
    if s.mode == "record":
        s.seen.append(Declaration(kind, label, _where(), None, _detached(value),
                                  None if gradient_of is None else _detached(gradient_of), vjp))
        return value
    if s.mode == "capture":  # value + a zero whose gradient is the cotangent reaching value
        if s.index >= len(s.zs):
            s.overflow = True
            return value
        z = s.zs[s.index]
        s.index += 1
        return value + z
    if s.index >= len(s.seen):  # control flow reached a marker the base point did not
        s.overflow = True
        return value
    d = s.seen[s.index]
    s.index += 1
    if d.kind == "stopped":
        return d.base
    if d.vjp is not None:
        if d.cotangent is None:
            return d.base
        return d.base + d.cotangent * ((d.mapped * (value - d.base)).sum() / d.norm2)
    return d.base + (gradient_of - d.base_gradient_of)


def stopped(value: Any, label: str = "") -> Any:
    """Declare that ``value`` is meant to carry no gradient (the code stops it itself); returns
    ``value``.  See the module doc for what :func:`gradcheck.audit` checks."""
    return _mark("stopped", value, None, label)


def surrogate(value: Any, gradient_of: Any = None, label: str = "", *,
              vjp: Callable[[Any], Any] | None = None) -> Any:
    """Declare that ``value``'s gradient is meant to be the gradient of ``gradient_of`` (same
    shape), or, with ``vjp``, that its backward maps the incoming cotangent ``g`` to ``vjp(g)``;
    returns ``value``.  See the module doc."""
    if (gradient_of is None) == (vjp is None):
        raise TypeError("surrogate() takes exactly one of gradient_of= and vjp=")
    return _mark("surrogate", value, gradient_of, label, vjp)


def capture_cotangents(hooks: Any, model: Any, loss_fn: Callable, inputs: tuple,
                       seen: list[Declaration]) -> None:
    """For declarations with a ``vjp``: the cotangent ``g`` reaching each marked value at the
    base point (one gradient pass with a zero added at every marker, taken by the engine's
    ``hooks.gradient_at_zeros``), ``vjp(g)`` and ``<g, g>``, stored on the declarations.  Torch
    and JAX values; other engines (no gradient at zeros) leave them unset."""
    if not any(d.vjp is not None for d in seen):
        return

    called = False

    def f(zs: list) -> Any:
        nonlocal called
        called = True
        with session("capture", seen) as s:
            s.zs = zs
            return loss_fn(model, *inputs)

    try:
        gs = hooks.gradient_at_zeros(f, [d.base for d in seen])
    except NotImplementedError:
        if called:  # the user's loss raised it, not a missing hook
            raise
        return
    for d, g in zip(seen, gs, strict=True):
        if d.vjp is None:
            continue
        norm2 = float((g * g).sum())
        if norm2 > 0:
            d.cotangent, d.mapped, d.norm2 = g, d.vjp(g), norm2


@contextmanager
def session(mode: str, seen: list[Declaration] | None = None) -> Iterator[_Session]:
    """Activate the markers (audit internal): ``observe`` (list them, note torch values that
    require grad), ``record`` (store base values) or ``freeze`` (replay ``seen``)."""
    s = _Session(mode, [] if seen is None else seen)
    _ACTIVE.append(s)
    try:
        yield s
    finally:
        _ACTIVE.remove(s)


def freezing(loss_fn: Callable, seen: list[Declaration]) -> Callable:
    """``loss_fn`` evaluating the intended function (markers replayed from ``seen``); a new
    function object, so engine caches keyed on the loss never mix it with the plain loss."""
    from gradcheck.backends.training import NumpyLoss

    def frozen(model: Any, *inputs: Any) -> Any:
        with session("freeze", seen):
            return loss_fn(model, *inputs)

    if isinstance(loss_fn, NumpyLoss):
        def value(params: Any, *inputs: Any) -> Any:
            with session("freeze", seen):
                return loss_fn.value(params, *inputs)

        return NumpyLoss(value, loss_fn.grad, loss_fn.name)
    frozen.__name__ = getattr(loss_fn, "__name__", "loss")
    return frozen
