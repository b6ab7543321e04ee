"""Real hostile file systems for the tests: a tiny tmpfs that fills up (a full disk) and a
read-only one (an unwritable directory).  Mounting needs root; elsewhere the tests that use
them are skipped with the reason."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(path: Path, *, size: str = "64k", read_only: bool = False,
          leave: int | None = None) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` at ``path`` for the ``with`` block (unmounted after, however
    the block ends).  ``leave=N``: fill it with a file so that only about ``N`` bytes stay
    free.  Skips the calling test where this process may not mount."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("a real full or read-only disk needs a tmpfs mount: not running as root")
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"mount -t tmpfs refused: {proc.stderr.strip() or proc.returncode}")
    try:
        if leave is not None:
            free = os.statvfs(path).f_bavail * os.statvfs(path).f_frsize
            (path / ".filler").write_bytes(b"\0" * max(0, free - leave))
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
