"""The Rust (Candle) and Go (Gorgonia) reproducers listed in docs/upstream/README.md still give
the answer their status says: ``FIXED`` for an entry marked ``fixed in ...``, ``REPRODUCES`` for
every other one.  Each is built against its adapter's pinned dependencies (cargo examples of
adapters/candle, ``--locked --offline``; packages of adapters/gorgonia's module, from the module
cache) and run alone, as a maintainer would run it.

Skipped, with the reason, where cargo or go is missing or where the adapter's dependencies are not
built or cached (``bash adapters/candle/install.sh``, ``bash adapters/gorgonia/install.sh``).  The
Candle examples reuse the adapter's target directory (``$CARGO_TARGET_DIR`` when set), so only the
examples themselves are compiled here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.upstream._index import ROOT, UPSTREAM, index_rows, mismatch

CANDLE = ROOT / "adapters" / "candle"
GORGONIA = ROOT / "adapters" / "gorgonia"
NATIVE = ("candle", "gorgonia")
#: a cold build of one example or package, after the dependencies (generous: 2 shared cores)
_BUILD_TIMEOUT_S = 1800


def _native_rows() -> list[tuple[str, str, str, Path]]:
    """(id, engine, status, reproducer file) per index row of a native engine."""
    return [(ident, engine, status, (UPSTREAM / path).resolve())
            for ident, engine, status, path, _cell in index_rows() if engine in NATIVE and path]


ROWS = _native_rows()


def test_each_candle_and_gorgonia_finding_has_one_reproducer_in_its_adapter():
    assert {r[1] for r in ROWS} == set(NATIVE)
    assert len({r[3] for r in ROWS}) == len(ROWS), "two rows share a reproducer"
    for ident, engine, _status, path in ROWS:
        assert path.is_file(), f"{ident}: {path}"
        if engine == "candle":
            assert path.parent == CANDLE / "examples" and path.name.startswith("upstream_"), path
            assert path.suffix == ".rs"
        else:
            assert path.name == "main.go" and path.parent.parent == GORGONIA / "upstream", path
            assert "package main" in path.read_text()
        text = path.read_text()
        assert "REPRODUCES" in text and "FIXED" in text, f"{ident}: no last-line contract"


def _candle_target() -> Path:
    return Path(os.environ.get("CARGO_TARGET_DIR") or CANDLE / "target")


def _candle_deps_built(target: Path) -> bool:
    deps = target / "release" / "deps"
    return deps.is_dir() and any(deps.glob("libcandle_core-*.rlib")) \
        and any(deps.glob("libcandle_nn-*.rlib"))


@pytest.fixture(scope="module")
def candle_examples() -> Path:
    """Builds every Candle reproducer in one cargo call; returns the examples' folder."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo not found: the Candle reproducers need Rust")
    target = _candle_target()
    if not _candle_deps_built(target):
        pytest.skip(f"candle-core/candle-nn not built in {target}: run "
                    "`bash adapters/candle/install.sh` (or set CARGO_TARGET_DIR to a built one)")
    names = [p.stem for _i, e, _s, p in ROWS if e == "candle"]
    cmd = ["cargo", "build", "--release", "--locked", "--offline", "--quiet"]
    for name in names:
        cmd += ["--example", name]
    env = {**os.environ, "CARGO_TARGET_DIR": str(target)}
    done = subprocess.run(cmd, cwd=CANDLE, capture_output=True, text=True,
                          timeout=_BUILD_TIMEOUT_S, env=env)
    assert done.returncode == 0, f"cargo build of {names} failed:\n{done.stderr[-3000:]}"
    return target / "release" / "examples"


@pytest.fixture(scope="module")
def go_env() -> dict[str, str]:
    """The environment that builds adapters/gorgonia from the module cache alone."""
    if shutil.which("go") is None:
        pytest.skip("go not found: the Gorgonia reproducers need Go")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off"}
    found = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "gorgonia.org/gorgonia"],
                           cwd=GORGONIA, capture_output=True, text=True, env=env, timeout=300)
    if found.returncode != 0 or not found.stdout.strip():
        pytest.skip("gorgonia.org/gorgonia is not in the Go module cache: run "
                    "`bash adapters/gorgonia/install.sh`")
    return env


def _run(request, engine: str, path: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    if engine == "candle":
        binary = request.getfixturevalue("candle_examples") / path.stem
        return subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
    env = request.getfixturevalue("go_env")
    binary = tmp_path / path.parent.name
    built = subprocess.run(["go", "build", "-o", str(binary), f"./upstream/{path.parent.name}"],
                           cwd=GORGONIA, capture_output=True, text=True, env=env,
                           timeout=_BUILD_TIMEOUT_S)
    assert built.returncode == 0, f"go build of {path} failed:\n{built.stderr[-3000:]}"
    return subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("ident", "engine", "status", "path"),
                         [pytest.param(*row, id=row[0]) for row in ROWS])
def test_native_reproducer_last_line_matches_its_status(request, tmp_path, ident, engine,
                                                        status, path):
    done = _run(request, engine, path, tmp_path)
    assert done.returncode == 0, f"{ident} ({path}) failed:\n{done.stderr[-3000:]}"
    problem = mismatch(ident, status, done.stdout)
    assert problem is None, problem


@pytest.mark.parametrize(("status", "last", "agrees"), [
    ("ready to report", "REPRODUCES", True), ("fixed in candle 0.12.0", "FIXED", True),
    ("ready to report", "FIXED", False), ("fixed in candle 0.12.0", "REPRODUCES", False),
    ("not new: https://example.invalid/1", "FIXED", False)])
def test_a_last_line_that_contradicts_the_status_is_caught(status, last, agrees):
    output = f"candle-core 0.11.1\nengine 0.25, exact 1\n{last}\n"
    assert (mismatch("C0", status, output) is None) is agrees
    assert mismatch("C0", status, output.replace(last, "")) is not None  # no verdict line
