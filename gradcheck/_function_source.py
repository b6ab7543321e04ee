"""The source of a function that cannot be imported back (a lambda, a function defined inside
another), for the reproducer script of :mod:`gradcheck._reproducer`.

:func:`recover` reads the function's source with :func:`inspect.getsource`, trims a lambda to
the lambda itself (the enclosing call is cut away; the code compiled from the trimmed text is
compared with the function's own, so a neighbouring lambda on the same line is never taken),
and defines what the body refers to: modules are imported, importable objects imported
(``importer``), plain values (numbers, strings, small arrays) written out (``literal``), helper
functions recovered the same way.  What is left (an ``nn.Module`` closed over, an open file) is
named in :attr:`Recovered.missing`: the user pastes it in.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import re
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_MAX_SOURCE = 5_000  # characters of source searched for a lambda
_MAX_DEPTH = 4  # helper functions recovered through helper functions

Importer = Callable[[Any, str], "list[str] | None"]
Literal = Callable[[Any], "str | None"]


@dataclass
class Recovered:
    """Lines defining the function (and what it refers to), and the names the user must define
    (``name: what it is``) before those lines run."""

    lines: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def _codes(code: types.CodeType) -> list[types.CodeType]:
    """``code`` and the code objects nested in it (comprehensions, inner lambdas)."""
    out = [code]
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out += _codes(c)
    return out


def _plain_consts(code: types.CodeType) -> tuple[Any, ...]:
    return tuple(c for code_ in _codes(code) for c in code_.co_consts
                 if not isinstance(c, types.CodeType))


def _outer_names(code: types.CodeType) -> set[str]:
    """Names the code reads from outside: globals, builtins and closure cells."""
    return {n for c in _codes(code) for n in (*c.co_names, *c.co_freevars)}


def _same(text: str, code: types.CodeType) -> bool:
    """Whether ``text`` (one lambda expression) compiles to the function's code: the same
    arguments, constants and outside names (a closure cell compiles as a global here)."""
    try:
        compiled = compile(f"({text}\n)", "<reproducer>", "eval")
    except (SyntaxError, ValueError):
        return False
    lam = next((c for c in compiled.co_consts if isinstance(c, types.CodeType)), None)
    if lam is None:
        return False
    n, m = lam.co_argcount + lam.co_kwonlyargcount, code.co_argcount + code.co_kwonlyargcount
    return (lam.co_varnames[:n] == code.co_varnames[:m] and lam.co_flags & 0x0C == code.co_flags
            & 0x0C and _plain_consts(lam) == _plain_consts(code)
            and _outer_names(lam) == _outer_names(code))


def _lambda_at(text: str, start: int) -> str | None:
    """The longest text from ``start`` that parses as one lambda expression (it ends where the
    source has a delimiter next: ``, ) ] } ;``, a comment, a line end, or the end)."""
    rest = text[start:]
    ends = [k for k, ch in enumerate(rest) if ch in ",)]};#\n"] + [len(rest)]
    for end in reversed(ends):
        if end <= 6:
            break
        try:
            # in parentheses: it may span lines; the newline ends a comment it may hold
            node = ast.parse(f"({rest[:end].strip()}\n)", mode="eval").body
        except SyntaxError:
            continue
        if isinstance(node, ast.Lambda):
            return rest[:end].strip()
    return None


@functools.lru_cache(maxsize=512)
def lambda_text(source: str, code: types.CodeType) -> str | None:
    """The lambda of ``code`` cut out of the lines that define it (``source``), or None
    (remembered: a lambda checked again is not searched for again)."""
    if len(source) <= _MAX_SOURCE:
        for m in re.finditer(r"\blambda\b", source):
            text = _lambda_at(source, m.start())
            if text is not None and _same(text, code):
                return text
    return None


def _definition(fn: Any, code: types.CodeType, as_name: str) -> tuple[list[str], str] | None:
    """(lines defining ``as_name``, the source text) of a lambda or a ``def``, or None."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    if code.co_name == "<lambda>":
        text = lambda_text(source, code)
        if text is None:
            return None
        body = text
        if "\n" in text:  # in parentheses, closed after a comment that ends it, if any
            body = f"({text}\n)" if "#" in text.splitlines()[-1] else f"({text})"
        return f"{as_name} = {body}".splitlines(), text
    text = textwrap.dedent(source).rstrip()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    node = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name != code.co_name:
        return None
    lines = text.splitlines()
    if as_name != node.name:
        lines.append(f"{as_name} = {node.name}")
    return lines, text


def _loaded_names(text: str) -> set[str]:
    """Names the text reads (attribute names and names it assigns itself excluded)."""
    try:
        tree = ast.parse(text if not text.startswith("lambda") else f"({text})")
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx,
                                                                                  ast.Load)}


def _cells(fn: Any, code: types.CodeType) -> dict[str, Any]:
    out = {}
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # an empty cell: a name assigned after the function was made
            continue
    return out


def _describe(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}".removeprefix("builtins.")


def recover(fn: Any, as_name: str, importer: Importer, literal: Literal,
            _depth: int = 0, _seen: set[int] | None = None) -> Recovered | None:
    """Lines that define ``fn`` as ``as_name`` from its source, or None where there is no
    source to recover (a builtin, a callable object, source not on disk)."""
    if inspect.ismethod(fn) or not inspect.isfunction(fn):
        return None
    code = fn.__code__
    found = _definition(fn, code, as_name)
    if found is None:
        return None
    lines, text = found
    seen = _seen if _seen is not None else set()
    seen.add(id(fn))
    out = Recovered()
    cells, space = _cells(fn, code), getattr(fn, "__globals__", {})
    outside = _outer_names(code)
    tree_names = _loaded_names(text)
    for name in sorted(tree_names & outside):
        if name in cells:
            value = cells[name]
        elif name in space:
            value = space[name]
        else:  # a builtin, or a name nothing defines (the function fails the same way)
            continue
        if name in vars(builtins) and value is vars(builtins)[name]:
            continue
        if id(value) in seen:
            continue
        _define(name, value, out, importer, literal, _depth, seen)
    out.lines += lines
    return out


def _define(name: str, value: Any, out: Recovered, importer: Importer, literal: Literal,
            depth: int, seen: set[int]) -> None:
    if isinstance(value, types.ModuleType):
        module = value.__name__
        out.lines.append(f"import {module}" if module == name else f"import {module} as {name}")
        return
    written = literal(value)
    if written is not None:
        out.lines.append(f"{name} = {written}")
        return
    imported = importer(value, name)
    if imported is not None:
        out.lines += imported
        return
    if depth < _MAX_DEPTH:
        helper = recover(value, name, importer, literal, depth + 1, seen)
        if helper is not None:
            out.lines += helper.lines
            out.missing += helper.missing
            return
    out.missing.append(f"{name}: the {_describe(value)} the function refers to")
