"""The reproducer of a :func:`gradcheck.check` call: a Python script that runs as printed.

It imports the function back (from its module by name, or, where that module is not on the
path, from the file that defines it with :func:`runpy.run_path`), keeps a
:class:`~gradcheck.NumpyFunction`'s hand-written rules (the object itself where it is a
module-level name, else rebuilt from its importable parts), binds ``Function.apply`` to its
class, and defines the inputs: inline at full precision (``np.array(..., dtype=...)``) up to
:data:`INLINE_MAX` elements each, larger ones as a random stand-in of the same shape and dtype
that the script says is not the checked point (with the checked bytes' SHA-256 to compare a
replacement against).  What cannot be imported (a lambda, a function defined inside another)
makes the script stop at once with a message saying what to define.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gradcheck.core.rules import NumpyFunction
from gradcheck.oracle.error_model import ErrorModel

INLINE_MAX = 128  # elements of one input written out in the script
_WIDTH = 88  # an input longer than this on one line gets one row per line
_ML_PREFIXES = ("bfloat16", "float8_", "float6_", "float4_", "int4", "uint4", "int2", "uint2")


def _resolve(namespace: Mapping[str, Any], path: str) -> Any:
    head, *rest = path.split(".")
    obj = namespace.get(head)
    for part in rest:
        obj = getattr(obj, part, None)
    return obj


def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or (hasattr(a, "__self__") and bool(a == b))  # bound methods: equal
    except Exception:
        return False


def _namespaces(obj: Any) -> list[tuple[str, dict[str, Any]]]:
    """(module name, module namespace) where ``obj`` may be defined: its module, and the
    globals of the function (or a NumpyFunction's forward), which also covers modules loaded
    from a file (``runpy.run_path``) that are not in ``sys.modules``."""
    out = []
    holders = [obj] + [getattr(obj, k, None) for k in ("forward", "vjp", "jvp")]
    for holder in filter(None, holders):
        module = getattr(holder, "__module__", None)
        mod = sys.modules.get(module) if isinstance(module, str) else None
        if mod is not None:
            out.append((str(module), vars(mod)))
        space = getattr(holder, "__globals__", None)
        if isinstance(space, dict):
            out.append((str(space.get("__name__", module)), space))
    return out


def _location(obj: Any) -> tuple[str, str, str | None] | None:
    """``(module, attribute path, file)`` under which ``obj`` can be found again, or None."""
    owner = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", None)
    if isinstance(owner, type) and isinstance(name, str):  # MyFunction.apply
        where = _location(owner)
        return (where[0], f"{where[1]}.{name}", where[2]) if where else None
    for module, space in _namespaces(obj):
        file = space.get("__file__")
        for path in (getattr(obj, "__qualname__", None), name):
            if isinstance(path, str) and "<" not in path and _same(_resolve(space, path), obj):
                return module, path, file
        for key, value in list(space.items()):
            if value is obj and not key.startswith("__"):
                return module, key, file
    return None


def _installed(file: str) -> bool:
    """A file of the standard library or of an installed package: importable anywhere."""
    return "site-packages" in file or file.startswith((sys.base_prefix, sys.prefix))


def _import(obj: Any, as_name: str) -> list[str] | None:
    """Lines binding ``as_name`` to ``obj``, or None where it cannot be imported back."""
    where = _location(obj)
    if where is None:
        return None
    module, path, file = where
    head, _, rest = path.partition(".")
    attr = f".{rest}" if rest else ""
    from_file = f"{as_name} = runpy.run_path({file!r})[{head!r}]{attr}"
    if module == "__main__" or module not in sys.modules:  # a script, or a file loaded by path
        return [from_file + "  # from the file that defines it"] if file else None
    lines = ([f"from {module} import {head} as _{as_name}", f"{as_name} = _{as_name}{attr}"]
             if attr else [f"from {module} import {head} as {as_name}"])
    if file and not _installed(file):
        lines = ["try:", *("    " + line for line in lines),
                 f"except ImportError:  # {module} is not on the path here: load its file",
                 f"    {from_file}"]
    return lines


def _function_lines(fn: Callable) -> list[str]:
    """Lines that define ``fn`` in the script."""
    lines = _import(fn, "fn")
    if lines is not None:
        return lines

    if isinstance(fn, NumpyFunction):  # rebuilt from its parts, the hand-written rules kept
        parts = {"forward": fn.forward, "vjp": fn.vjp, "jvp": fn.jvp}
        found = {k: _import(v, k) for k, v in parts.items() if v is not None}
        if all(v is not None for v in found.values()):
            lines = [line for k in found for line in found[k]]  # type: ignore[union-attr]
            jvp = "jvp" if "jvp" in found else "None"
            return lines + [f"fn = gradcheck.NumpyFunction(forward, vjp, {jvp}, "
                            f"name={fn.name!r})"]
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    why = (f"{name} cannot be imported back (a lambda, a function defined inside another, or "
           "an object without a module-level name)")
    return [f"raise NotImplementedError({why + ': define fn here' !r})"]


def _number(x: Any) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return f"float({str(x)!r})" if x == x else "float('nan')"
    return repr(x)


def _nested(values: Any) -> str:
    if isinstance(values, list):
        return "[" + ", ".join(_nested(v) for v in values) + "]"
    return _number(values)


def _dtype_expr(dt: np.dtype) -> str:
    return f"ml_dtypes.{dt.name}" if dt.name.startswith(_ML_PREFIXES) else repr(dt.name)


_HASHED_COPY_MAX = 1 << 26  # bytes of a non-contiguous array copied, in rows, to be hashed


def _digest(a: np.ndarray) -> str:
    """``"their sha256[:16] ..."`` of the values, in bounded memory: a contiguous array is
    hashed in place; any other (a broadcast view of a huge shape) one chunk at a time up to
    :data:`_HASHED_COPY_MAX` bytes, and above that not at all (reading terabytes a view
    stands for would never end, and copying them raised ``MemoryError``)."""
    if a.flags.c_contiguous:
        raw = a.reshape(-1).view(np.uint8)  # hashed in place, no copy
        return f"their sha256[:16] {hashlib.sha256(raw.data).hexdigest()[:16]}"
    if a.nbytes > _HASHED_COPY_MAX:
        return f"not hashed: a {a.nbytes}-byte view"
    h = hashlib.sha256()
    flat = a.flat
    step = max(1, (1 << 20) // max(a.itemsize, 1))
    for start in range(0, a.size, step):
        h.update(np.ascontiguousarray(flat[start:start + step]).view(np.uint8).data)
    return f"their sha256[:16] {h.hexdigest()[:16]}"


def array_literal(a: np.ndarray, k: int, seed: int) -> tuple[str, str]:
    """``(expression, comment)`` recreating input ``k``: exact inline values, or for more than
    :data:`INLINE_MAX` elements a random stand-in of the same shape and dtype."""
    a = np.asarray(a)
    dt = _dtype_expr(a.dtype)
    if a.size > INLINE_MAX:
        digest = _digest(a)
        make = (f"np.random.default_rng({seed + k}).standard_normal({a.shape!r})"
                if a.dtype.kind in "fV" else f"np.zeros({a.shape!r})")
        return (f"{make}.astype({dt})",
                f"  # inputs[{k}]: {a.size} elements, NOT inlined: a random stand-in of the "
                f"checked shape and dtype, not the checked values ({digest}): put your "
                "array here")
    values = a.astype(np.float64).tolist() if a.dtype.name.startswith(_ML_PREFIXES) else \
        a.tolist()
    text = f"np.array({_nested(values)}, dtype={dt})"
    if a.size == 0:
        text += f".reshape({a.shape!r})"
    elif len(text) > _WIDTH and a.ndim >= 1:  # one row (or four elements) per line
        items = [_nested(v) for v in values]
        if a.ndim == 1:
            items = [", ".join(items[i:i + 4]) for i in range(0, len(items), 4)]
        body = "".join(f"        {item},\n" for item in items)
        text = f"np.array([\n{body}    ], dtype={dt})"
    return text, ""


def _value(v: Any, k: int, seed: int) -> str:
    if isinstance(v, np.ndarray):
        return array_literal(v, k, seed)[0]
    if isinstance(v, float):
        return _number(v)
    if isinstance(v, ErrorModel):  # its repr names the constants that differ from the default
        return f"gradcheck.{v!r}"
    return repr(v)


def script(fn: Callable, arrays: Sequence[np.ndarray], options: Mapping[str, Any],
           kwargs: Mapping[str, Any] | None = None) -> str:
    """The reproducer: a script that defines ``fn`` and the inputs, calls
    ``gradcheck.check(fn, *inputs, **options)`` and prints the result."""
    lines = ["import runpy", "", "import numpy as np", ""]
    if any(np.asarray(a).dtype.name.startswith(_ML_PREFIXES) for a in arrays):
        lines[2:2] = ["import ml_dtypes"]
    lines += ["import gradcheck", "", *_function_lines(fn), "inputs = ["]
    seed = int(options.get("seed", 0))
    for k, a in enumerate(arrays):
        expr, note = array_literal(a, k, seed)
        lines.append(f"    {expr},{note}")
    lines.append("]")
    args = ", ".join(f"{k}={_value(v, -1, seed)}" for k, v in options.items())
    if kwargs:
        kw = ", ".join(f"{k!r}: {_value(v, -1, seed)}" for k, v in kwargs.items())
        args += f", kwargs={{{kw}}}"
    lines += [f"report = gradcheck.check(fn, *inputs, {args})",
              "print(gradcheck.format_failure(report) if report.failures else "
              "report.summary())"]
    return "\n".join(lines)
