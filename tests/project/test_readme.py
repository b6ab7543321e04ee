"""The README's quick start runs as written (and checks what it says it checks)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _quick_start() -> str:
    text = README.read_text()
    section = text.split("## Quick start", 1)[1]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "no python block under '## Quick start'"
    return m.group(1)


def test_quick_start_runs():
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    out = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(_quick_start(), str(README), "exec"), namespace)  # noqa: S102
    printed = out.getvalue()
    assert re.search(r"\d+ checks: \d+ passed", printed), printed
    assert "failed" not in printed and "error" not in printed
