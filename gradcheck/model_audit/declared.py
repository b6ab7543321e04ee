"""What the user's own objects already declare, read instead of asked for again.

* **Rows without gradient by design** (:func:`stopped_rows`): ``nn.Embedding(padding_idx=i)``
  and ``nn.EmbeddingBag(padding_idx=i)`` give row ``i`` of their weight no gradient although the
  loss depends on it (pad positions in the loss); ``stop_gradient`` entries ``"name[i]"`` declare
  the same for any engine.  The audit then measures the rest of the weight with finite
  differences and checks the rows both ways: a declared row that gets a gradient, or another
  row that gets none while the loss depends on it, fails with the row named.
* **An elementwise clip** (:func:`recording_clip_value`): the ``clip_value`` a step passes to
  ``torch.nn.utils.clip_grad_value_`` (called through ``torch.nn.utils``, its ``clip_grad``
  module, or a name bound to it in the step's globals), recorded while the audit runs the step.
* **Scheduler steps** (:func:`scheduler_epochs`): each LR scheduler's ``last_epoch``, read before
  and after every audited step; more than one advance per training step is a scheduler stepped
  too often, invisible in the live ``lr`` the optimizer model reads.

``requires_grad`` (``hooks.trainable``), optimizer param groups and their hyper-parameters are
read where they are used (:mod:`gradcheck.model_audit.optimizers`).  Nothing here imports an
engine: torch is looked up in ``sys.modules`` (if the user's objects are torch objects, it is
there).
"""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from gradcheck.core.errors import InvalidArgument

_ROW = re.compile(r"^(?P<name>.+)\[(?P<rows>\s*-?\d+\s*(?:,\s*-?\d+\s*)*)\]$")


def split_rows(entries: Sequence[str], names: Sequence[str]) -> tuple[list[str], dict[str, set]]:
    """``stop_gradient`` entries split into whole names/prefixes and declared rows
    (``"emb.weight[0]"``, ``"emb.weight[0, 3]"``: rows along the first axis)."""
    plain: list[str] = []
    rows: dict[str, set[int]] = {}
    for entry in entries:
        m = _ROW.match(entry)
        if m is None:
            plain.append(entry)
            continue
        name = m.group("name").strip()
        if name not in names:
            raise InvalidArgument(f"stop_gradient entry {entry!r}: {name!r} names no "
                                  f"parameter; parameters: {', '.join(names)}")
        rows.setdefault(name, set()).update(int(r) for r in m.group("rows").split(","))
    return plain, rows


def stopped_rows(model: Any) -> dict[str, set[int]]:
    """``{"<module>.weight": {padding_idx}}`` of every embedding module of a torch model that
    declares a ``padding_idx``; ``{}`` for anything else."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(model, torch.nn.Module):
        return {}
    kinds = (torch.nn.Embedding, torch.nn.EmbeddingBag)
    out: dict[str, set[int]] = {}
    for prefix, mod in model.named_modules():
        pad = getattr(mod, "padding_idx", None)
        if isinstance(mod, kinds) and pad is not None:
            name = f"{prefix}.weight" if prefix else "weight"
            out.setdefault(name, set()).add(int(pad) % int(mod.weight.shape[0]))
    return out


def normalised_rows(rows: Mapping[str, set[int]], shapes: Mapping[str, tuple[int, ...]]
                    ) -> dict[str, tuple[int, ...]]:
    """Rows as sorted non-negative indices, checked against the parameter's first axis."""
    out = {}
    for name, rs in rows.items():
        shape = shapes[name]
        if not shape:
            raise InvalidArgument(f"stop_gradient {name!r}[...]: the parameter is a scalar")
        n = shape[0]
        bad = [r for r in rs if not -n <= r < n]
        if bad:
            raise InvalidArgument(f"stop_gradient {name!r}{bad}: rows out of range for shape "
                                  f"{shape}")
        out[name] = tuple(sorted({r % n for r in rs}))
    return out


# -- clip_grad_value_ ----------------------------------------------------------------------

@contextmanager
def recording_clip_value(step: Any) -> Iterator[list[float]]:
    """Within the block, calls of ``torch.nn.utils.clip_grad_value_`` append their
    ``clip_value`` to the yielded list (and clip as usual)."""
    seen: list[float] = []
    torch = sys.modules.get("torch")
    if torch is None:
        yield seen
        return
    utils = torch.nn.utils
    original = utils.clip_grad_value_

    def recorded(parameters: Any, clip_value: float, *args: Any, **kw: Any) -> Any:
        seen.append(float(clip_value))
        return original(parameters, clip_value, *args, **kw)

    patched: list[tuple[Any, str]] = [(utils, "clip_grad_value_")]
    clip_mod = getattr(utils, "clip_grad", None)
    if clip_mod is not None and getattr(clip_mod, "clip_grad_value_", None) is original:
        patched.append((clip_mod, "clip_grad_value_"))
    for g in _globals_of(step):
        for k, v in list(g.items()):
            if v is original:
                patched.append((g, k))
    try:
        for where, key in patched:
            _set(where, key, recorded)
        yield seen
    finally:
        for where, key in patched:
            _set(where, key, original)


def _set(where: Any, key: str, value: Any) -> None:
    if isinstance(where, dict):
        where[key] = value
    else:
        setattr(where, key, value)


def _globals_of(fn: Any, depth: int = 3) -> list[dict]:
    """The globals dicts of the functions reachable from ``fn`` (closures, bound methods,
    callable objects), each once."""
    out: list[dict] = []
    seen: set[int] = set()

    def walk(obj: Any, d: int) -> None:
        if d > depth or id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, types.MethodType):
            walk(obj.__func__, d)
            return
        if isinstance(obj, types.FunctionType):
            if all(obj.__globals__ is not g for g in out):
                out.append(obj.__globals__)
            for cell in obj.__closure__ or ():
                try:
                    walk(cell.cell_contents, d + 1)
                except ValueError:
                    pass
            return
        inner = getattr(obj, "fn", None)
        if inner is not None:
            walk(inner, d + 1)
        elif callable(obj) and not isinstance(obj, type):
            walk(type(obj).__call__, d)

    walk(fn, 0)
    return out


# -- schedulers ----------------------------------------------------------------------------

def schedulers(objs: Iterable[Any]) -> list[Any]:
    """The LR schedulers among ``objs`` (anything with an integer ``last_epoch`` and an
    ``optimizer``)."""
    return [o for o in objs if isinstance(getattr(o, "last_epoch", None), int)
            and hasattr(o, "optimizer") and hasattr(o, "state_dict")]


def scheduler_epochs(objs: Iterable[Any]) -> list[int]:
    """Each scheduler's ``last_epoch``, in order."""
    return [int(o.last_epoch) for o in objs]
