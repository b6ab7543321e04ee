"""Leave the user's objects as found: discover the optimizer, LR scheduler and gradient scaler a
training step uses, and snapshot / restore their state around every probe.

A training step usually closes over its optimizer (``opt = SGD(..., momentum=0.9)`` outside,
``opt.step()`` inside), so running it twice from the same parameters also advances momentum
buffers, Adam moments, a scheduler's epoch and a scaler's scale: the second run is *meant* to
differ.  The audit finds these objects in the step (closure cells, the globals it names, the
attributes of a bound method's object or a callable object, ``functools.partial`` arguments, and
recursively in the functions it reaches; plus whatever ``TrainStep(optimizer=, scheduler=,
scaler=)`` declares), snapshots them before a probe and restores them after, so each probe runs
the step from the same state.  Optimizer state is copied tensor by tensor (keys stay the live
parameters); schedulers and scalers through their ``state_dict``.
"""

from __future__ import annotations

import copy
import functools
import sys
import types
from collections.abc import Iterable
from typing import Any

_DEPTH = 3


def _kinds() -> tuple[tuple[type, ...], tuple[type, ...], tuple[type, ...]]:
    torch = sys.modules.get("torch")
    if torch is None:
        return (), (), ()
    sched = [torch.optim.lr_scheduler.LRScheduler]
    plateau = getattr(torch.optim.lr_scheduler, "ReduceLROnPlateau", None)
    if plateau is not None:
        sched.append(plateau)
    return (torch.optim.Optimizer,), tuple(sched), (torch.amp.GradScaler,)


def discover(fn: Any, declared: Iterable[Any] = ()) -> list[Any]:
    """Optimizers, schedulers and scalers reachable from ``fn`` (see module doc), declared ones
    first, each once."""
    kinds = sum(_kinds(), ())
    found: list[Any] = [d for d in declared if d is not None]
    if not kinds:
        return found
    seen: set[int] = set()

    def add(obj: Any) -> None:
        if isinstance(obj, kinds) and all(obj is not f for f in found):
            found.append(obj)

    def walk(obj: Any, depth: int) -> None:
        if depth > _DEPTH or id(obj) in seen:
            return
        seen.add(id(obj))
        add(obj)
        if isinstance(obj, kinds):
            return
        if isinstance(obj, functools.partial):
            for a in (obj.func, *obj.args, *obj.keywords.values()):
                walk(a, depth + 1)
            return
        if isinstance(obj, types.MethodType):
            walk(obj.__func__, depth)
            walk(obj.__self__, depth + 1)
            return
        if isinstance(obj, types.FunctionType):
            for cell in obj.__closure__ or ():
                try:
                    walk(cell.cell_contents, depth + 1)
                except ValueError:  # empty cell
                    pass
            g = obj.__globals__
            for n in _names(obj.__code__):
                if n in g:
                    walk(g[n], depth + 1)
            return
        if isinstance(obj, (list, tuple)):
            for o in obj:
                walk(o, depth + 1)
            return
        if isinstance(obj, dict):
            for o in obj.values():
                walk(o, depth + 1)
            return
        if _is_module(obj):  # e.g. a step written as a method of the model: its attributes
            for k, o in vars(obj).items():
                if k not in ("_parameters", "_buffers", "_modules"):
                    walk(o, depth + 1)
            return
        if callable(obj) and hasattr(obj, "__dict__") and not isinstance(obj, type) \
                and not isinstance(obj, types.ModuleType):
            walk(type(obj).__call__, depth)
            for o in vars(obj).values():
                walk(o, depth + 1)

    walk(fn, 0)
    return found


def _is_module(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def _names(code: types.CodeType) -> set[str]:
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


def optimizers(objs: Iterable[Any]) -> list[Any]:
    """The optimizers among ``objs``."""
    kind = _kinds()[0]
    return [o for o in objs if kind and isinstance(o, kind)]


def _clone(v: Any) -> Any:
    return v.detach().clone() if hasattr(v, "detach") and hasattr(v, "clone") else \
        copy.deepcopy(v)


def snapshot(objs: Iterable[Any]) -> list[tuple[Any, Any]]:
    """The state of each object, to :func:`restore` bitwise."""
    opt_kind = _kinds()[0]
    out: list[tuple[Any, Any]] = []
    for o in list[Any](objs):
        if opt_kind and isinstance(o, opt_kind):
            o = _as_any(o)
            state = {p: {k: _clone(v) for k, v in s.items()} for p, s in o.state.items()}
            groups = [{k: copy.deepcopy(v) for k, v in g.items() if k != "params"}
                      for g in o.param_groups]
            out.append((o, ("optimizer", state, groups)))
        else:
            out.append((o, ("state_dict", copy.deepcopy(o.state_dict()))))
    return out


def _as_any(o: Any) -> Any:
    return o


def restore(snap: list[tuple[Any, Any]]) -> None:
    """Put back a :func:`snapshot`."""
    for o, saved in snap:
        if saved[0] == "optimizer":
            _, state, groups = saved
            o.state.clear()
            for p, s in state.items():
                o.state[p] = {k: _clone(v) for k, v in s.items()}
            for g, h in zip(o.param_groups, groups, strict=True):
                g.update(copy.deepcopy(h))
        else:
            o.load_state_dict(copy.deepcopy(saved[1]))


def describe(objs: Iterable[Any]) -> str:
    """``"SGD, LambdaLR"``: what was found (shown in messages)."""
    return ", ".join(type(o).__name__ for o in objs) or "none"
