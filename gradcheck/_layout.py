"""Where ``gradcheck.reference`` and ``gradcheck.suites`` come from.

The repository keeps the independent implementations (``reference/``) and the pytest suites
(``suites/``) at the top level, beside ``gradcheck/``.  An installed wheel ships them inside the
package's namespace (``pyproject.toml`` maps ``gradcheck.reference`` to ``reference/`` and
``gradcheck.suites`` to ``suites/``), so nothing is installed as a top-level ``reference`` or
``suites`` package.  In a source checkout that is imported without being installed (a plain
``PYTHONPATH=.``, a second worktree), :func:`install` adds a meta-path finder that resolves
exactly those two names (and their submodules) to the checkout's folders.  It does nothing when
the package directory holds them itself (a wheel).  Importing this module installs it
(``gradcheck/__init__.py`` imports it first).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

#: subpackage of ``gradcheck`` -> folder of the repository root that holds it
MAPPED = {"reference": "reference", "suites": "suites"}


def checkout_root(package_dir: Path) -> Path | None:
    """The repository root when ``package_dir`` is ``gradcheck/`` of a source checkout."""
    root = package_dir.parent
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return None
    try:
        text = pyproject.read_text(errors="replace")
    except OSError:
        return None
    return root if 'name = "gradcheck"' in text else None


class _CheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds ``gradcheck.<mapped>`` (and below) in the checkout's top-level folders."""

    def __init__(self, package: str, folders: dict[str, Path]) -> None:
        self.package = package
        self.folders = folders

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if len(parts) != 2 or parts[0] != self.package or parts[1] not in self.folders:
            return None  # submodules are found through the mapped package's __path__
        folder = self.folders[parts[1]]
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])


def install(package: str, package_dir: Path) -> None:
    """Make ``package.reference`` / ``package.suites`` importable from a source checkout."""
    root = checkout_root(package_dir)
    if root is None:
        return
    folders = {name: root / folder for name, folder in MAPPED.items()
               if not (package_dir / name).exists() and (root / folder / "__init__.py").is_file()}
    if folders and not any(isinstance(f, _CheckoutFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _CheckoutFinder(package, folders))


install(__name__.rpartition(".")[0], Path(__file__).resolve().parent)
