"""The reproducer of a :func:`gradcheck.check` call: a Python script that runs as printed and
fails (exit status 1, the failure message printed) while the checked gradient is wrong.

It imports the function back (from its module by name, or, where that module is not on the
path, from the file that defines it with :func:`runpy.run_path`), keeps a
:class:`~gradcheck.NumpyFunction`'s hand-written rules (the object itself where it is a
module-level name, else rebuilt from its importable parts), binds ``Function.apply`` to its
class, and where nothing imports it (a lambda, a function defined inside another) writes its
source into the script (:mod:`gradcheck._function_source`), with what the source refers to.
The inputs are exact: inline at full precision (``np.array(..., dtype=...)``) up to
:data:`INLINE_MAX` elements each, larger ones saved to an ``.npz`` file (:class:`InputsFile`)
beside the active result stream (the report directory), else in the temporary directory, and
loaded by the script from its path.  What cannot be written (an ``nn.Module`` a lambda closes
over) is marked ``PASTE HERE`` and the script's first line says it does not run as printed
(:func:`heading`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gradcheck import stream
from gradcheck._function_source import recover
from gradcheck.core.results import CheckResult, Status
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
        # (not '<stdin>' or a notebook cell: no file to load)
        return [from_file + "  # from the file that defines it"] if file and os.path.isfile(
            file) else None
    lines = ([f"from {module} import {head} as _{as_name}", f"{as_name} = _{as_name}{attr}"]
             if attr else [f"from {module} import {head} as {as_name}"])
    if file and not _installed(file):
        lines = ["try:", *("    " + line for line in lines),
                 f"except ImportError:  # {module} is not on the path here: load its file",
                 f"    {from_file}"]
    return lines


#: the first line of a script that needs the user's definitions before it runs
PARTIAL = "# NOT RUNNABLE AS PRINTED:"
_PASTE = "PASTE HERE"


def heading(script: str) -> str:
    """What a message says above ``script``: that it runs as printed, or what to paste in."""
    if script.startswith(PARTIAL):
        return f"reproduce (a script: define what it marks {_PASTE}, then run it)"
    return "reproduce (a script, runs as printed)"


def _function_lines(fn: Callable, literal: Callable[[Any], str | None]
                    ) -> tuple[list[str], list[str]]:
    """Lines that define ``fn`` in the script, and what the user must define (PASTE HERE);
    ``literal`` writes the values a recovered function refers to."""
    lines = _import(fn, "fn")
    if lines is not None:
        return lines, []

    if isinstance(fn, NumpyFunction):  # rebuilt from its parts, the hand-written rules kept
        parts = {"forward": fn.forward, "vjp": fn.vjp, "jvp": fn.jvp}
        found = {k: _defined(v, k, literal) for k, v in parts.items() if v is not None}
        if all(v is not None for v in found.values()):
            lines = [line for k in found for line in found[k][0]]  # type: ignore[index]
            missing = [m for k in found for m in found[k][1]]  # type: ignore[index]
            jvp = "jvp" if "jvp" in found else "None"
            return lines + [f"fn = gradcheck.NumpyFunction(forward, vjp, {jvp}, "
                            f"name={fn.name!r})"], missing
    found_fn = recover(fn, "fn", _import, literal)  # _import(fn) already said None above
    if found_fn is not None:
        return found_fn.lines, found_fn.missing
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    what = (f"fn: the function checked ({name}, a {type(fn).__name__}: it has no importable "
            "name and its source cannot be read)")
    return ["fn = ..."], [what]


def _defined(obj: Any, as_name: str, literal: Callable[[Any], str | None]
             ) -> tuple[list[str], list[str]] | None:
    """Lines binding ``as_name`` to ``obj``: imported, else its source recovered."""
    lines = _import(obj, as_name)
    if lines is not None:
        return lines, []
    found = recover(obj, as_name, _import, literal)
    return None if found is None else (found.lines, found.missing)


#: a torch or JAX array a function refers to: written as NumPy, converted back in the script
_NATIVE = {"torch": "__import__('torch').as_tensor({})",
           "jax": "__import__('jax').numpy.asarray({})",
           "jaxlib": "__import__('jax').numpy.asarray({})"}


class _Values:
    """Writes the values a recovered function refers to: small ones inline
    (:func:`_literal`), arrays over :data:`INLINE_MAX` elements into the inputs file as
    ``value_<n>`` (read back as ``_saved['value_<n>']``), torch and JAX arrays through NumPy
    (their device and ``requires_grad`` are not kept)."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def __call__(self, value: Any) -> str | None:
        wrap = _NATIVE.get(type(value).__module__.split(".")[0])
        if wrap is not None:
            try:
                host = np.asarray(value.detach().cpu() if hasattr(value, "detach") else value)
            except Exception:  # not an array after all
                return None
            inner = self(host)
            return None if inner is None else wrap.format(inner)
        if isinstance(value, np.ndarray) and value.size > INLINE_MAX and \
                value.dtype.kind in "biuf" and value.nbytes <= SAVED_MAX and \
                not value.dtype.name.startswith(_ML_PREFIXES):
            key = f"value_{len(self.arrays)}"
            self.arrays[key] = value
            return f"_saved[{key!r}]"
        return _literal(value, self)


def _literal(value: Any, inner: Callable[[Any], str | None] | None = None) -> str | None:
    """A value a function refers to, written out exactly (None: it cannot be); ``inner``
    writes the items of a tuple or list."""
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return repr(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return f"np.{value.dtype.name}({_number(value.item())})"
    if isinstance(value, np.ndarray) and value.size <= INLINE_MAX and value.dtype.kind in "biuf" \
            and not value.dtype.name.startswith(_ML_PREFIXES):
        return array_literal(value, -1, 0)[0]
    if isinstance(value, (tuple, list)) and len(value) <= INLINE_MAX:
        items = [(inner or _literal)(v) for v in value]
        if all(i is not None for i in items):
            body = ", ".join(i for i in items if i is not None)
            body += "," if isinstance(value, tuple) and len(items) == 1 else ""
            return f"({body})" if isinstance(value, tuple) else f"[{body}]"
    return None


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


#: bytes of one input saved to the inputs file at most (a broadcast view of a huge shape is
#: not materialized)
SAVED_MAX = 1 << 30


def _key(k: int | str) -> str:
    """The inputs file's name of input ``k`` (an index) or keyword argument ``k`` (a name)."""
    return f"input_{k}" if isinstance(k, int) else f"kwarg_{k}"


def array_literal(a: np.ndarray, k: int | str, seed: int) -> tuple[str, str]:
    """``(expression, comment)`` recreating input ``k`` inline, exactly; for more than
    :data:`INLINE_MAX` elements the script reads it from the inputs file (:class:`InputsFile`)
    instead: ``_saved['input_k']``."""
    a = np.asarray(a)
    dt = _dtype_expr(a.dtype)
    if a.size > INLINE_MAX:
        load = f"_saved[{_key(k)!r}]"
        if a.dtype.name.startswith(_ML_PREFIXES):  # saved as its raw bits
            load += f".view({dt})"
        what = f"inputs[{k}]" if isinstance(k, int) else f"kwargs[{k!r}]"
        return load, f"  # {what}: {a.size} elements, exact, from the inputs file"
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


def inputs_dir() -> Path:
    """Where inputs files go: ``reproducers/`` beside the active result stream (the report
    directory), else ``gradcheck-reproducers/`` in the temporary directory."""
    active = stream.active()
    if active is not None:
        return active.path.parent / "reproducers"
    return Path(tempfile.gettempdir()) / "gradcheck-reproducers"


@dataclass(frozen=True)
class InputsFile:
    """The exact inputs too big to inline, saved as ``input_<k>`` in an ``.npz`` named by
    their contents (checking the same inputs again names the same file).  Written only when a
    result needs reproducing (:meth:`Reproducer.for_results`)."""

    path: Path
    arrays: dict[str, np.ndarray]

    @classmethod
    def of(cls, arrays: Sequence[np.ndarray], kwargs: Mapping[str, Any] | None = None,
           values: Mapping[str, np.ndarray] | None = None) -> InputsFile | None:
        """The file of the large inputs, keyword arguments and ``values`` (those a recovered
        function refers to, by key), or None where there are none."""
        named: list[tuple[int | str, Any]] = [*enumerate(arrays), *(kwargs or {}).items()]
        big = {_key(k): np.asarray(a) for k, a in named
               if isinstance(a, np.ndarray) and a.size > INLINE_MAX}
        big.update(values or {})
        if not big:
            return None
        h = hashlib.sha256()
        for key, a in big.items():
            h.update(f"{key} {a.dtype.str} {a.shape} {_digest(a)};".encode())
        return cls(inputs_dir() / f"inputs-{h.hexdigest()[:20]}.npz", big)

    def write(self, path: Path) -> None:
        """Save the arrays to ``path`` (atomically; an existing file is the same inputs)."""
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp.npz")
        saved = {k: (a.view(f"u{a.itemsize}") if a.dtype.name.startswith(_ML_PREFIXES) else a)
                 for k, a in self.arrays.items()}
        np.savez(tmp, **saved)  # type: ignore[arg-type]
        tmp.replace(path)

    def too_big(self) -> list[str]:
        return [f"{k}: {a.nbytes} bytes" for k, a in self.arrays.items() if a.nbytes > SAVED_MAX]


@dataclass(frozen=True)
class Reproducer:
    """The script and the inputs file it reads (None: every input is inline)."""

    text: str
    inputs: InputsFile | None = None

    def for_results(self, results: Sequence[CheckResult]) -> list[CheckResult]:
        """``results``, the inputs file written where one of them failed, errored or was
        inconclusive (its script then runs; a skipped check needs no reproducing); where it
        cannot be written there, it goes to the temporary directory, and the scripts say the
        new path; where not at all, the scripts say why."""
        results = list(results)
        if self.inputs is None or all(r.status in (Status.PASSED, Status.SKIPPED)
                                      for r in results):
            return results
        text = self._saved_text()
        if text == self.text:
            return results
        return [dataclasses.replace(r, reproducer=text) if r.reproducer == self.text else r
                for r in results]

    def _saved_text(self) -> str:
        assert self.inputs is not None
        old = self.inputs.path
        if self.inputs.too_big():
            why = f"inputs too big to save ({', '.join(self.inputs.too_big())})"
            return _partial(self.text, old, why)
        fallback = Path(tempfile.gettempdir()) / "gradcheck-reproducers" / old.name
        error: OSError | None = None
        for path in dict.fromkeys([old, fallback]):
            try:
                self.inputs.write(path)
            except OSError as exc:
                error = exc
                continue
            return self.text.replace(repr(str(old)), repr(str(path)))
        return _partial(self.text, old, f"the inputs file could not be written: {error}")


def _partial(text: str, path: Path, why: str) -> str:
    """The script with its inputs file marked as something the user must provide."""
    lines = text.splitlines()
    mark = f"{PARTIAL} {why}: provide {path.name} with the arrays {_PASTE} names"
    return "\n".join([mark, *(f"{line}  # {_PASTE}: {why}" if line.startswith("_saved =")
                              else line for line in lines)])


def _value(v: Any, k: int | str, seed: int) -> str:
    if isinstance(v, np.ndarray):
        return array_literal(v, k, seed)[0]
    if isinstance(v, float):
        return _number(v)
    if isinstance(v, ErrorModel):  # its repr names the constants that differ from the default
        return f"gradcheck.{v!r}"
    return repr(v)


def build(fn: Callable, arrays: Sequence[np.ndarray], options: Mapping[str, Any],
          kwargs: Mapping[str, Any] | None = None, rebuild: Sequence[str] | None = None
          ) -> Reproducer:
    """The reproducer: a script that defines ``fn`` and the inputs, calls
    ``gradcheck.check(fn, *inputs, **options)``, prints the result and exits with status 1
    unless it passed.  ``rebuild``: for nested or complex inputs, each input as an expression
    of ``leaves`` (the ``arrays``)."""
    lines = ["import runpy", "", "import numpy as np", ""]
    if any(np.asarray(a).dtype.name.startswith(_ML_PREFIXES) for a in arrays):
        lines[2:2] = ["import ml_dtypes"]
    values = _Values()
    fn_lines, missing = _function_lines(fn, values)
    inputs = InputsFile.of(arrays, kwargs, values.arrays)
    if inputs is not None:  # before the function: the values it refers to may be there
        lines.append(f"_saved = np.load({str(inputs.path)!r})  # the exact inputs too big to "
                     "inline")
    if missing:
        lines[:0] = [f"{PARTIAL} define what is marked {_PASTE} below, then run it"]
        lines += [f"# {_PASTE}: {m}" for m in missing]
        lines += [f"{m.split(':')[0]} = ...  # {_PASTE}" for m in missing
                  if not m.startswith("fn:")]
    lines += ["import gradcheck", "", *fn_lines]
    if missing:
        names = ", ".join(m.split(":")[0] for m in missing)
        lines += [f"if any(v is ... for v in ({names},)):",
                  f"    raise SystemExit('define {names} where this script says {_PASTE}')"]
    lines.append("inputs = [" if rebuild is None else "leaves = [")
    seed = int(options.get("seed", 0))
    for k, a in enumerate(arrays):
        expr, note = array_literal(a, k, seed)
        lines.append(f"    {expr},{note}")
    lines.append("]")
    if rebuild is not None:  # nested or complex inputs, rebuilt from their arrays
        lines += ["inputs = [", *(f"    {e}," for e in rebuild), "]"]
    args = ", ".join(f"{k}={_value(v, -1, seed)}" for k, v in options.items())
    if kwargs:
        kw = ", ".join(f"{k!r}: {_value(v, k, seed)}" for k, v in kwargs.items())
        args += f", kwargs={{{kw}}}"
    lines += [f"report = gradcheck.check(fn, *inputs, {args})",
              "print(gradcheck.format_failure(report) if report.failures else "
              "report.summary())",
              "raise SystemExit(0 if report.passed else 1)"]
    return Reproducer("\n".join(lines), inputs)


def script(fn: Callable, arrays: Sequence[np.ndarray], options: Mapping[str, Any],
           kwargs: Mapping[str, Any] | None = None) -> str:
    """The text of :func:`build` (its inputs file, if any, not written)."""
    return build(fn, arrays, options, kwargs).text
