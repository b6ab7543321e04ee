"""The pre-0.2 module paths still import, as the very module at the new path, with a warning."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from gradcheck._moved import MOVED

ROOT = Path(__file__).resolve().parents[2]


def test_every_new_path_exists_and_no_old_path_is_a_file():
    for old, new in MOVED.items():
        assert importlib.util.find_spec(new) is not None, new
        rel = Path(*old.split("."))
        assert not (ROOT / rel.with_suffix(".py")).exists(), old
        assert not (ROOT / rel / "__init__.py").exists(), old


@pytest.mark.parametrize("old", ["gradcheck.results", "gradcheck.tolerance",
                                 "gradcheck.backends.numpy_backend", "gradcheck.checks.audit",
                                 "gradcheck.checks.numeric.judge",
                                 "gradcheck.checks._sparse_jacobian"])
def test_an_old_path_is_the_same_module_with_a_deprecation_warning(old):
    code = (f"import warnings, importlib\n"
            f"warnings.simplefilter('error')\n"
            f"new = importlib.import_module({MOVED[old]!r})\n"
            f"try:\n    importlib.import_module({old!r})\n"
            f"except DeprecationWarning as w:\n    print('warned:', w)\n"
            f"warnings.simplefilter('ignore')\n"
            f"assert importlib.import_module({old!r}) is new\n"
            f"print('same')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "warned: gradcheck." in out.stdout and "the old path goes away" in out.stdout
    assert "same" in out.stdout


def test_a_name_imported_from_an_old_path_is_the_new_object():
    import gradcheck

    with pytest.warns(DeprecationWarning):
        from gradcheck.backends.torch_backend import TorchBackend  # noqa: F401
    from gradcheck.engines.torch.backend import TorchBackend as New

    assert TorchBackend is New
    error_model = importlib.import_module("gradcheck.oracle.error_model")
    assert gradcheck.ErrorModel is error_model.ErrorModel


def test_the_names_backends_re_exported_still_import():
    from gradcheck.core.rules import NumpyFunction as Function
    from gradcheck.engines.numpy.backend import NumpyBackend as New

    with pytest.warns(DeprecationWarning, match="gradcheck.backends.NumpyBackend moved"):
        from gradcheck.backends import NumpyBackend
    with pytest.warns(DeprecationWarning):
        from gradcheck.backends import NumpyFunction
    assert NumpyBackend is New and NumpyFunction is Function
    with pytest.raises(ImportError):
        from gradcheck.backends import NoSuchThing  # noqa: F401
