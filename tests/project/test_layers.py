"""The layers hold: the import contracts in pyproject.toml (``lint-imports``), and nothing inside
the package imports the ``gradcheck`` facade (only user code and the suites do)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def test_the_import_contracts_hold() -> None:
    pytest.importorskip("importlinter", reason="import-linter is in the dev extra")
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
         "sys.exit(lint_imports_command())", "--no-cache"],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_no_module_of_the_package_imports_the_facade() -> None:
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (dev extra)")
    code = ("import grimp, json; g = grimp.build_graph('gradcheck', 'reference'); "
            "print(json.dumps(sorted(m for m in g.modules "
            "if 'gradcheck' in g.find_modules_directly_imported_by(m))))")
    del grimp  # built in a child process: the graph must see this checkout, not an install
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"modules importing the facade: {out.stdout}"


def test_public_classes_report_the_facade_as_their_module() -> None:
    import pickle

    import gradcheck

    classes = [getattr(gradcheck, n) for n in gradcheck.__all__
               if isinstance(getattr(gradcheck, n), type)]
    assert len(classes) >= 20
    assert {c.__name__: c.__module__ for c in classes if c.__module__ != "gradcheck"} == {}
    r = gradcheck.CheckResult(kind=gradcheck.CheckKind.VJP, status=gradcheck.Status.PASSED,
                              backend="numpy")
    assert pickle.loads(pickle.dumps(r)) == r  # found again under its public name


def test_only_engines_import_an_engine_covers_every_other_top_level_module() -> None:
    """A new top-level module of the package falls under "only engines import an engine"."""
    import pkgutil

    import tomllib

    import gradcheck

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["name"] == "only engines import an engine")
    every = {f"gradcheck.{m.name}" for m in pkgutil.iter_modules(gradcheck.__path__)}
    assert set(contract["source_modules"]) == every - {"gradcheck.engines"}
    assert "gradcheck.engines" in contract["forbidden_modules"]
