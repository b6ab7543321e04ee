"""Reports built from result streams: ``index.html`` (self-contained) and ``junit.xml``.

``write_report(["reports/results.jsonl"], "reports")`` reads the streams (tolerantly: damaged
lines are skipped and listed in the report), renders both files and returns what it wrote.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gradcheck.core.errors import WriteFailed
from gradcheck.report import html, junit
from gradcheck.stream import StreamData, read_streams


@dataclass(frozen=True)
class ReportFiles:
    """Paths written by :func:`write_report` and the data they were built from."""

    html: Path
    junit: Path
    data: StreamData


def _atomic_write(path: Path, content: bytes) -> None:
    """Write ``path`` whole or not at all; :class:`WriteFailed` naming it where it cannot be
    written (a full disk: the partial temporary file is removed, a previous file is kept)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(content)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise WriteFailed(path, exc) from exc


def write_report(streams: Iterable[str | os.PathLike[str]] | StreamData,
                 out_dir: str | os.PathLike[str], *, title: str = "gradcheck report",
                 passed_rows: bool = True) -> ReportFiles:
    """Read ``streams`` (files or directories of ``*.jsonl``; or already-read data) and write
    ``out_dir/index.html`` and ``out_dir/junit.xml`` (each replaced atomically).
    ``passed_rows=False``: the page's table lists only the checks that did not pass (the
    sweep's report: its passed checks are most of hundreds of thousands)."""
    data = streams if isinstance(streams, StreamData) else read_streams(streams)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteFailed(out, exc) from exc
    html_path, junit_path = out / "index.html", out / "junit.xml"
    page = html.render(data, title=title, passed_rows=passed_rows)
    _atomic_write(html_path, page.encode("utf-8", "backslashreplace"))  # any name encodes
    _atomic_write(junit_path, junit.render(data))
    return ReportFiles(html_path, junit_path, data)


__all__ = ["ReportFiles", "write_report"]
