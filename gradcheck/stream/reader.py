"""Reading result streams back: tolerant of every kind of damage, never fatal.

A stream may end in a truncated line (its writer was killed), contain lines from a newer or
older gradcheck, or have been edited by hand.  Each line that cannot be used is skipped and
described in :attr:`StreamData.problems` (file, line number, reason, an excerpt); everything
else is returned.  Several streams (xdist workers, CI shards) are merged in the order given.
An input that cannot be read at all (missing, unreadable, a symbolic link loop) is a problem
of kind ``input``; records of a schema version this gradcheck does not know are skipped, one
problem of kind ``schema`` per file.  Names (of files, checks, tests) may hold any text,
including lone surrogates (``"\ud800"``, or the undecodable bytes of a file name):
:func:`well_formed` and :func:`terminal_safe` make them safe to encode.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradcheck.core.results import SCHEMA_VERSION, CheckResult, Status
from gradcheck.stream import fields
from gradcheck.stream.expected import expected_by_tests

_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")

#: kinds of :class:`StreamProblem`: a line skipped, an input not read at all, records of an
#: unknown schema version skipped
LINE, INPUT, SCHEMA = "line", "input", "schema"


def terminal_safe(text: object) -> str:
    """``text`` with control characters (C0, C1, bidi and line/paragraph separators) written as
    visible escapes (``\\x1b``, ``\\r``, ``\\u202e``): stream content printed to a terminal
    cannot move the cursor, recolour or rewrite what is shown."""
    return _UNPRINTABLE.sub(_escape, str(text))


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    if 0xDC80 <= ord(c) <= 0xDCFF:  # an undecodable byte of a file name (surrogateescape)
        return f"\\x{ord(c) - 0xDC00:02x}"
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c) or (
        f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def well_formed(text: object) -> str:
    """``text`` with every lone surrogate written as a visible escape (``\\ud800``; an
    undecodable byte of a file name, which Python holds as a surrogate, as ``\\xff``): the
    result encodes as UTF-8, whatever a stream or a file name held."""
    return _SURROGATE.sub(_escape, str(text))


@dataclass(frozen=True)
class StreamProblem:
    """A line that was skipped, and why."""

    source: str
    line: int
    reason: str
    excerpt: str = ""
    kind: str = LINE  # LINE, INPUT (the file was not read at all) or SCHEMA

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
    known: str = ""  # the reason of the test's gradcheck_known marker
    link: str = ""  # and its link

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
    def unread_inputs(self) -> list[StreamProblem]:
        """The inputs that could not be read at all (missing, unreadable, a link loop)."""
        return [p for p in self.problems if p.kind == INPUT]

    @property
    def unknown_schema(self) -> list[StreamProblem]:
        """The files with records of a schema version this gradcheck cannot read."""
        return [p for p in self.problems if p.kind == SCHEMA]

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
    """Files as given; a directory stands for the ``*.jsonl`` files directly inside it.
    (:func:`collect_sources` also says which inputs cannot be read.)"""
    return collect_sources(paths)[0]


def collect_sources(paths: Iterable[str | os.PathLike[str]]
                    ) -> tuple[list[Path], list[StreamProblem]]:
    """The files to read, and a problem (kind ``input``) for each input that cannot be: a
    missing path, a broken or looping symbolic link (a directory's ``*.jsonl`` entries, and any
    link in it that leads back to the directory itself, included), an entry that is not a
    file.  Nothing is followed recursively, so no link structure can hang or recurse; each
    input is named once."""
    files: list[Path] = []
    problems: dict[str, StreamProblem] = {}

    def problem(path: Path, reason: str) -> None:
        problems.setdefault(str(path), StreamProblem(str(path), 0, reason, kind=INPUT))

    listed: set[tuple[int, int]] = set()
    repeated: list[StreamProblem] = []
    for p in map(Path, paths):
        st = _stat(p, problem)
        if st is None:
            continue
        if not stat.S_ISDIR(st.st_mode):
            files.append(p)
            continue
        if (st.st_dev, st.st_ino) in listed:  # a directory given twice (or by a link to it)
            repeated.append(StreamProblem(str(p), 0, "given more than once: read once"))
            continue
        listed.add((st.st_dev, st.st_ino))
        try:
            with os.scandir(p) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            problem(p, f"cannot list the directory: {exc.strerror}")
            continue
        for e in entries:
            q = Path(e.path)
            if not e.name.endswith(".jsonl") and not e.is_symlink():
                continue
            sq = _stat(q, problem if e.name.endswith(".jsonl") else _loops_only(problem))
            if sq is None:
                continue
            if stat.S_ISDIR(sq.st_mode):
                if e.is_symlink() and _is_ancestor(sq, p):
                    problem(q, "symbolic link loop: links back to the directory being read "
                               "(not followed)")
                elif e.name.endswith(".jsonl"):
                    problem(q, "a directory, not a stream: not read (only files directly "
                               "inside a given directory are read)")
            elif e.name.endswith(".jsonl"):
                if stat.S_ISREG(sq.st_mode):
                    files.append(q)
                else:
                    problem(q, "not a regular file: not read")
    return files, [*problems.values(), *repeated]


def _stat(path: Path, problem: Any) -> os.stat_result | None:
    """``os.stat(path)`` (following links), or None after naming why it failed."""
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            problem(path, "symbolic link loop: not read")
        elif exc.errno == errno.ENOENT and os.path.islink(path):
            problem(path, f"broken symbolic link (to {os.readlink(path)!r}): not read")
        elif exc.errno == errno.ENOENT:
            problem(path, "no such file or directory")
        else:
            problem(path, f"cannot read: {exc.strerror}")
        return None
    except ValueError as exc:  # an embedded NUL
        problem(path, f"cannot read: {exc}")
        return None


def _loops_only(problem: Any) -> Any:
    """A directory's entries that are not ``*.jsonl`` are not inputs: only loops are named."""
    return lambda path, reason: (problem(path, reason) if reason.startswith("symbolic link loop")
                                 else None)


def _is_ancestor(st: os.stat_result, directory: Path) -> bool:
    """Whether ``st`` is ``directory`` or one of the directories above it."""
    here = directory.absolute()
    for d in (here, *here.parents):
        try:
            sd = os.stat(d)
        except OSError:
            continue
        if (sd.st_dev, sd.st_ino) == (st.st_dev, st.st_ino):
            return True
    return False


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


def _parse(path: Path, n: int, text: str, data: StreamData,
           schemas: dict[tuple[str, str], tuple[int, int]]) -> None:
    """Add the record on line ``n`` to ``data``, or a problem; ``schemas`` counts, per (file,
    schema), the records of an unknown schema version (first line, count)."""
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
    schema = obj.get("schema", SCHEMA_VERSION)
    if type(schema) is not int or not 1 <= schema <= SCHEMA_VERSION:
        key = (src, repr(schema)[:40])
        first, count = schemas.get(key, (n, 0))
        schemas[key] = (first, count + 1)
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
            data.tests.append(TestOutcome(*fields.outcome_fields(obj),
                                          *fields.known_fields(obj)))
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

    Missing or unreadable inputs are problems too (kind ``input``, each named once); so are
    records of a schema version other than this gradcheck's (kind ``schema``, one per file: they
    are skipped, not counted).  A file given twice is read once; a line that repeats, byte for
    byte, a line of *another* file (a merged stream given together with the parts it was
    merged from) is kept once and the repeats are reported.  Identical lines within one file
    are kept: one process may legitimately record the same result twice.
    """
    data = StreamData()
    seen: dict[bytes, int] = {}
    duplicates: dict[str, int] = {}
    read: set[tuple[int, int]] = set()
    schemas: dict[tuple[str, str], tuple[int, int]] = {}
    files, data.problems = collect_sources(paths)
    for k, path in enumerate(files):
        try:
            st = os.stat(path)
            identity = (st.st_dev, st.st_ino)
        except OSError as exc:  # gone since it was listed
            data.problems.append(StreamProblem(str(path), 0, f"cannot read: {exc.strerror}",
                                               kind=INPUT))
            continue
        if identity in read:
            data.problems.append(StreamProblem(str(path), 0, "given more than once: read once"))
            continue
        read.add(identity)
        try:
            lines = list(iter_lines(path))
        except OSError as exc:
            data.problems.append(StreamProblem(str(path), 0, f"cannot read: {exc.strerror}",
                                               kind=INPUT))
            continue
        data.sources.append(str(path))
        for n, item in lines:
            if isinstance(item, StreamProblem):
                data.problems.append(item)
                continue
            digest = hashlib.blake2b(item.encode(), digest_size=16).digest()
            if seen.setdefault(digest, k) != k:
                duplicates[str(path)] = duplicates.get(str(path), 0) + 1
                continue
            _parse(path, n, item, data, schemas)
    for src, count in duplicates.items():
        data.problems.append(StreamProblem(src, 0, f"{count} line(s) repeat lines of another "
                                           "stream (a merged stream and its parts?): kept once"))
    for (src, schema), (first, count) in schemas.items():
        data.problems.append(StreamProblem(
            src, first, f"{count} record(s) of schema version {schema} skipped, not counted: "
            f"this gradcheck reads schema {SCHEMA_VERSION} (written by another gradcheck "
            "version? read it with that version)", kind=SCHEMA))
    data.problems.sort(key=lambda p: p.kind == LINE)  # whole inputs first, then single lines
    data.checks = expected_by_tests(data.checks, data.tests)  # as pytest counted them
    return data
