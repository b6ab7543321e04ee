"""The crash-safe result stream: every result is appended as one JSON line the moment it exists.

Writing.  While a stream is *active*, :func:`record` / :func:`record_many` append each
:class:`~gradcheck.core.results.CheckResult` to a JSON-lines file with a single ``os.write`` on a
descriptor opened with ``O_APPEND``: no user-space buffer can hold a completed result back, so a
process killed at any point leaves every completed line on disk (at worst one truncated last
line, which the reader skips and reports), and several processes may append to one file.

A stream is activated by the pytest report hooks (:mod:`gradcheck.plugin.session_report`), by the
``gradcheck`` CLI, explicitly with :func:`activate`, or by setting the environment variable
``GRADCHECK_RESULTS=path`` (then the first recorded result opens the file, so a user's own tests
calling :func:`gradcheck.check` stream their results without any other set-up).  Each process
first writes an ``environment`` record and, when it closes cleanly, an ``end`` record; a run
without ``end`` was killed or crashed.  Results recorded under pytest carry the current test id.

Reading is in :mod:`gradcheck.stream.reader`; the record types are documented in docs/report.md.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import threading
import time
import uuid
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from gradcheck.core.errors import WriteFailed
from gradcheck.core.results import SCHEMA_VERSION, CheckResult
from gradcheck.stream.environment import backend_records, environment_record

ENV_VAR = "GRADCHECK_RESULTS"


class ResultStream:
    """One process's append-only JSON-lines writer (safe to share between threads)."""

    def __init__(self, path: str | os.PathLike[str], *, role: str = "main",
                 environment: bool = True) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise WriteFailed(self.path, exc) from exc
        self.run_id = uuid.uuid4().hex[:12]
        self.role = role
        self.count = 0
        self._lock = threading.Lock()
        self._fd: int | None = fd
        #: the first write that failed (a full disk...): the stream is incomplete from there on;
        #: whoever owns the stream turns it into an error exit (the CLI, the pytest hooks)
        self.error: WriteFailed | None = None
        if environment:
            self.write_record({"record": "environment", **environment_record(role)})

    @property
    def closed(self) -> bool:
        return self._fd is None

    def write_record(self, data: Mapping[str, Any]) -> None:
        """Append one record (a JSON object) as one line; never raises on I/O errors, nor on
        content (keys JSON cannot carry are written as text, NaN and infinities as strings)."""
        body = {"schema": SCHEMA_VERSION, **data, "run_id": self.run_id}
        try:
            line = json.dumps(body, default=str, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            line = json.dumps(_plain(body), default=str, allow_nan=False)
        self._write_line(line)

    def record(self, result: CheckResult) -> None:
        """Append one check result (``details`` JSON cannot carry as they are, e.g. keyed by
        tuples, are written as :func:`_plain` makes them)."""
        try:
            line = result.to_json()
        except (TypeError, ValueError, RecursionError):
            line = dataclasses.replace(result, details=_plain(result.details)).to_json()
        # insert the run id without re-serialising the record: '{"schema": 1, ...' -> add a key
        self._write_line(line[:-1] + f', "run_id": "{self.run_id}"}}')
        self.count += 1

    def _write_line(self, line: str) -> None:
        data = (line.replace("\n", " ") + "\n").encode("utf-8", "replace")
        with self._lock:
            if self._fd is None:
                return
            try:
                view = memoryview(data)
                while view:
                    n = os.write(self._fd, view)
                    view = view[n:]
            except OSError as exc:
                self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        if self.error is None:
            self.error = WriteFailed(self.path, exc)
            warnings.warn(f"gradcheck: {self.error}; the results from here on are lost",
                          RuntimeWarning, stacklevel=4)

    def close(self, exitstatus: int | None = None) -> None:
        """Write the ``backends`` and ``end`` records and close the file (idempotent)."""
        if self._fd is None:
            return
        backends = backend_records()
        if backends:
            self.write_record({"record": "backends", "backends": backends})
        self.write_record({"record": "end", "exitstatus": exitstatus, "results": self.count,
                           "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        with self._lock:
            fd, self._fd = self._fd, None
        try:
            os.close(fd)  # a network file system may report a lost write only here
        except OSError as exc:
            self._failed(exc)


def _plain(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON can carry it: keys as text, NaN and infinities as the strings the
    stream uses (``"nan"``, ``"inf"``, ``"-inf"``), anything else (or nested too deeply, or
    circular) as its text."""
    if depth > 32:  # well under the reader's limit (64 levels)
        return str(value)[:200]
    if isinstance(value, Mapping):
        return {k if isinstance(k, str) else str(k): _plain(v, depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    if value is None or isinstance(value, (str, int, float)):
        return value
    return str(value)


_lock = threading.Lock()
_active: ResultStream | None = None
_from_env: str | None = None  # path of a stream opened lazily from GRADCHECK_RESULTS
_suspended = 0
_test_id = threading.local()
_default_test_id = ""


def activate(path: str | os.PathLike[str], *, role: str = "main") -> ResultStream:
    """Make ``path`` this process's active stream (closing any previous one) and return it."""
    global _active
    stream = ResultStream(path, role=role)
    with _lock:
        previous, _active = _active, stream
    if previous is not None:
        previous.close()
    return stream


def deactivate(exitstatus: int | None = None) -> None:
    """Close the active stream (writing its ``end`` record); no-op when none is active."""
    global _active, _from_env
    with _lock:
        stream, _active = _active, None
        _from_env = None
    if stream is not None:
        stream.close(exitstatus)


@contextlib.contextmanager
def using(path: str | os.PathLike[str], *, role: str = "main") -> Iterator[ResultStream]:
    """Record into ``path`` inside the ``with`` block, then close it and restore the stream
    that was active before (which is left open)."""
    global _active
    stream = ResultStream(path, role=role)
    with _lock:
        previous, _active = _active, stream
    try:
        yield stream
    finally:
        with _lock:
            _active = previous
        stream.close()


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Record nothing inside the ``with`` block (e.g. checks run only to build test data)."""
    global _suspended
    with _lock:
        _suspended += 1
    try:
        yield
    finally:
        with _lock:
            _suspended -= 1


def active() -> ResultStream | None:
    """The active stream, opening ``$GRADCHECK_RESULTS`` on first use when it is set."""
    global _active, _from_env
    if _suspended:
        return None
    if _active is not None:
        return _active
    path = os.environ.get(ENV_VAR)
    if not path:
        return None
    with _lock:
        if _active is None and _from_env != path:
            _from_env = path
            try:
                _active = ResultStream(path, role="env")
            except WriteFailed as exc:
                warnings.warn(f"gradcheck: {ENV_VAR}={path!r} cannot be opened: {exc}",
                              RuntimeWarning, stacklevel=3)
    return _active


def set_test_id(test_id: str | None) -> None:
    """Set the test id stamped on results recorded from this thread (None clears it)."""
    global _default_test_id
    _test_id.value = test_id or ""
    if threading.current_thread() is threading.main_thread():
        _default_test_id = test_id or ""


def current_test_id() -> str:
    """The test id set by :func:`set_test_id` (other threads inherit the main thread's)."""
    return getattr(_test_id, "value", _default_test_id)


def record(result: CheckResult) -> CheckResult:
    """Stamp ``result`` with the current test id and append it to the active stream."""
    return record_many([result])[0]


def record_many(results: Iterable[CheckResult]) -> list[CheckResult]:
    """:func:`record` each result; returns the (test-id stamped) results, streamed or not."""
    tid = current_test_id()
    out = [dataclasses.replace(r, test_id=tid) if tid and not r.test_id else r for r in results]
    stream = active()
    if stream is not None:
        for r in out:
            stream.record(r)
    return out


def write_record(data: Mapping[str, Any]) -> None:
    """Append a non-check record (e.g. a test outcome) to the active stream, if any."""
    stream = active()
    if stream is not None:
        stream.write_record(data)


@atexit.register
def _close_at_exit() -> None:  # a clean interpreter exit still writes the ``end`` record
    if _active is not None:
        deactivate()

__all__ = [
    "ENV_VAR", "ResultStream", "activate", "active", "current_test_id", "deactivate", "record",
    "record_many", "set_test_id", "suspended", "using", "write_record",
]
