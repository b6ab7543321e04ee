"""Reading result streams back: tolerant of every kind of damage, never fatal.

A stream may end in a truncated line (its writer was killed), contain lines from a newer or
older gradcheck, or have been edited by hand.  Each line that cannot be used is skipped and
described in :attr:`StreamData.problems` (file, line number, reason, an excerpt); everything
else is returned.  Several streams (xdist workers, CI shards) are merged in the order given.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradcheck.core.results import CheckResult, Status
from gradcheck.stream import fields

_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")


def terminal_safe(text: object) -> str:
    """``text`` with control characters (C0, C1, bidi and line/paragraph separators) written as
    visible escapes (``\\x1b``, ``\\r``, ``\\u202e``): stream content printed to a terminal
    cannot move the cursor, recolour or rewrite what is shown."""
    return _UNPRINTABLE.sub(_escape, str(text))


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c) or (
        f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


@dataclass(frozen=True)
class StreamProblem:
    """A line that was skipped, and why."""

    source: str
    line: int
    reason: str
    excerpt: str = ""

    def __str__(self) -> str:
        """One line, control characters escaped (see :func:`terminal_safe`)."""
        where = f"{self.source}:{self.line}" if self.line else self.source
        text = f"{where}: {self.reason}" + (f" [{self.excerpt}]" if self.excerpt else "")
        return terminal_safe(text)


@dataclass(frozen=True)
class TestOutcome:
    """The outcome of one pytest test (recorded by the report hooks)."""

    __test__ = False  # not a pytest test class

    test_id: str
    outcome: str  # passed | failed | error | skipped | xfailed | xpassed
    duration_s: float = 0.0
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome not in ("failed", "error")


@dataclass
class RunInfo:
    """One writing process: its environment, the backends it used, whether it ended cleanly."""

    run_id: str
    environment: dict[str, Any] = field(default_factory=dict)
    backends: list[dict[str, Any]] = field(default_factory=list)
    ended: bool = False
    exitstatus: Any = None
    source: str = ""


@dataclass
class StreamData:
    """Everything read from one or more streams."""

    checks: list[CheckResult] = field(default_factory=list)
    tests: list[TestOutcome] = field(default_factory=list)
    runs: dict[str, RunInfo] = field(default_factory=dict)
    problems: list[StreamProblem] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No check failed (other than a recorded known discrepancy) or errored, and no test
        failed."""
        return all(c.ok or c.known for c in self.checks) and all(t.ok for t in self.tests)

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Status}
        for c in self.checks:
            out[c.status.value] += 1
        return out


def expand_sources(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given; a directory stands for the ``*.jsonl`` files directly inside it."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(q for q in p.glob("*.jsonl") if q.is_file()))
        else:
            out.append(p)
    return out


def _excerpt(text: str) -> str:
    text = text.strip()
    return text if len(text) <= 80 else text[:77] + "..."


def iter_lines(path: Path) -> Iterator[tuple[int, str | StreamProblem]]:
    """(line number, text) for each non-empty line; undecodable/truncated lines as problems."""
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    for n, chunk in enumerate(lines, start=1):
        if not chunk.strip():
            continue
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield n, StreamProblem(str(path), n, f"not UTF-8 ({exc.reason})",
                                   _excerpt(chunk.decode("utf-8", "replace")))
            continue
        if n == len(lines) and raw and not raw.endswith(b"\n"):
            try:
                json.loads(text)
            except RecursionError:  # complete but too deep: _parse reports it
                pass
            except ValueError:
                yield n, StreamProblem(str(path), n, "truncated last line (the writer was "
                                       "killed while writing it)", _excerpt(text))
                continue
        yield n, text


def _parse(path: Path, n: int, text: str, data: StreamData) -> None:
    src = str(path)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        data.problems.append(StreamProblem(src, n, f"malformed JSON ({exc.msg})", _excerpt(text)))
        return
    except RecursionError:
        data.problems.append(StreamProblem(src, n, "JSON nested too deeply to parse",
                                           _excerpt(text)))
        return
    if not isinstance(obj, dict):
        data.problems.append(StreamProblem(src, n, "not a JSON object", _excerpt(text)))
        return
    kind = obj.get("record")
    label = kind if isinstance(kind, str) and len(kind) <= 40 else "?"
    try:
        if fields.too_deep(obj):
            raise fields.InvalidField(f"nested deeper than {fields.MAX_DEPTH} levels")
        run_id = fields.string(obj, "run_id", nullable=True)
        run = None
        if run_id:
            run = data.runs.setdefault(run_id, RunInfo(run_id, source=src))
        if kind == "check":
            data.checks.append(CheckResult.from_dict(fields.check_fields(obj)))
        elif kind == "test":
            data.tests.append(TestOutcome(*fields.outcome_fields(obj)))
        elif kind == "environment" and run is not None:
            run.environment = fields.environment_fields(obj)
        elif kind == "backends" and run is not None:
            run.backends = fields.backends_fields(obj)
        elif kind == "end" and run is not None:
            run.exitstatus = fields.end_fields(obj)
            run.ended = True
        else:
            reason = (f"unknown record type {repr(kind)[:60]} (written by another gradcheck "
                      "version?)")
            data.problems.append(StreamProblem(src, n, reason, _excerpt(text)))
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        data.problems.append(StreamProblem(src, n, f"invalid {label} record "
                                           f"({type(exc).__name__}: {str(exc)[:300]})",
                                           _excerpt(text)))


def read_streams(paths: Iterable[str | os.PathLike[str]]) -> StreamData:
    """Read and merge streams (files or directories of ``*.jsonl``); never raises for content.

    Missing or unreadable files are problems too.  A file given twice is read once; a line
    that repeats, byte for byte, a line of *another* file (a merged stream given together with
    the parts it was merged from) is kept once and the repeats are reported.  Identical lines
    within one file are kept: one process may legitimately record the same result twice.
    """
    data = StreamData()
    seen: dict[bytes, int] = {}
    duplicates: dict[str, int] = {}
    read: set[Path] = set()
    for k, path in enumerate(expand_sources(paths)):
        if path.resolve() in read:
            data.problems.append(StreamProblem(str(path), 0, "given more than once: read once"))
            continue
        read.add(path.resolve())
        data.sources.append(str(path))
        try:
            lines = list(iter_lines(path))
        except OSError as exc:
            data.problems.append(StreamProblem(str(path), 0, f"cannot read: {exc.strerror}"))
            continue
        for n, item in lines:
            if isinstance(item, StreamProblem):
                data.problems.append(item)
                continue
            digest = hashlib.blake2b(item.encode(), digest_size=16).digest()
            if seen.setdefault(digest, k) != k:
                duplicates[str(path)] = duplicates.get(str(path), 0) + 1
                continue
            _parse(path, n, item, data)
    for src, count in duplicates.items():
        data.problems.append(StreamProblem(src, 0, f"{count} line(s) repeat lines of another "
                                           "stream (a merged stream and its parts?): kept once"))
    return data
