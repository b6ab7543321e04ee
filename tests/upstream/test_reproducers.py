"""Every reproducer listed in docs/upstream/README.md still gives the answer its status says:
``FIXED`` for an entry marked ``fixed in ...``, ``REPRODUCES`` for every other one.  A bug fixed
upstream turns its test red until the index marks it fixed (the row and the file stay).  Each
reproducer runs alone in a subprocess, as a maintainer would run it."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest

from tests.upstream._index import UPSTREAM, index_rows, mismatch

#: the module a reproducer of each engine needs; other engines' rows are skipped here
_MODULES = {"torch": "torch", "jax": "jax"}


def _rows() -> list[tuple[str, str, str, str]]:
    """(id, engine, status, reproducer path relative to docs/upstream) per index row."""
    rows = []
    for ident, engine, status, path, last_cell in index_rows():
        assert path, f"{ident}: no reproducer link in {last_cell!r}"
        rows.append((ident, engine, status, path))
    return rows


ROWS = _rows()


def test_the_index_lists_at_least_20_findings_ready_to_report_each_with_its_file():
    assert len({r[0] for r in ROWS}) == len(ROWS), "duplicate ids in the index"
    ready = [r for r in ROWS if r[2].startswith("ready to report")]
    assert len(ready) >= 20
    for _id, _engine, status, path in ROWS:
        assert (UPSTREAM / path).is_file(), path
        assert re.match(r"(ready to report|reported: |not new: |fixed in )", status), status


def test_reproducers_import_only_the_engine():
    for _id, _engine, _status, path in ROWS:
        text = (UPSTREAM / path).read_text()
        assert "gradcheck" not in text, path


def _params():
    """One case per row; a reproducer of a hang waits out its child's limit (60 s): slow."""
    for row in ROWS:
        path = UPSTREAM / row[3]
        hangs = path.suffix == ".py" and "TimeoutExpired" in path.read_text()
        yield pytest.param(*row, id=row[0], marks=[pytest.mark.slow] if hangs else [])


@pytest.mark.parametrize(("ident", "engine", "status", "path"), list(_params()))
def test_reproducer_last_line_matches_its_status(ident, engine, status, path):
    module = _MODULES.get(engine)
    if not path.endswith(".py"):
        pytest.skip(f"{ident}: {path} is not a Python reproducer (its engine's own toolchain "
                    "runs it)")
    if module is None or importlib.util.find_spec(module) is None:
        pytest.skip(f"{ident}: engine {engine!r} is not installed")
    done = subprocess.run([sys.executable, str(UPSTREAM / path)], capture_output=True,
                          text=True, timeout=300, cwd=UPSTREAM)
    assert done.returncode == 0, f"{path} failed:\n{done.stderr[-3000:]}"
    problem = mismatch(f"{ident} ({path})", status, done.stdout)
    assert problem is None, problem
