"""The rows of docs/upstream/README.md and the last-line contract of their reproducers, shared by
the Python and the native (Candle, Gorgonia) reproducer tests."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "docs" / "upstream"
INDEX = UPSTREAM / "README.md"
_ROW = re.compile(r"^\|\s*(?P<id>[A-Z]+\d+)\s*\|(?P<cells>.*)\|\s*$")
_LINK = re.compile(r"\[[^\]]*\]\((?P<path>[^)]+)\)")


def index_rows() -> list[tuple[str, str, str, str | None, str]]:
    """(id, engine, status, reproducer path relative to docs/upstream or None, last cell) per
    index row."""
    rows = []
    for line in INDEX.read_text().splitlines():
        match = _ROW.match(line)
        if not match:
            continue
        cells = [c.strip() for c in match["cells"].split("|")]
        link = _LINK.search(cells[-1])
        rows.append((match["id"], cells[0], cells[-2], link["path"] if link else None, cells[-1]))
    return rows


def mismatch(label: str, status: str, stdout: str) -> str | None:
    """Why a reproducer's output contradicts its index status, or None when it agrees."""
    lines = stdout.strip().splitlines()
    want = "FIXED" if status.startswith("fixed in") else "REPRODUCES"
    if lines and lines[-1] == want:
        return None
    return (f"{label} printed {lines[-1] if lines else '(nothing)'!r} where the index status "
            f"{status!r} expects {want!r}; output:\n{stdout[-2000:]}")
