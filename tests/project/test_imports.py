"""``import gradcheck`` imports no autodiff engine; adapters load on first use.

(``reference/numpy`` does not exist on this branch yet; when it lands, the same subprocess test
must cover it: it may import NumPy and SciPy only.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
ENGINES = ("torch", "jax", "jaxlib", "tensorflow", "autograd", "mlx", "tinygrad")


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT, check=True, env={"PYTHONPATH": ROOT, "PATH": ""})
    return set(out.stdout.split())


def _engines(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in ENGINES}


def test_import_gradcheck_imports_no_engine():
    mods = _modules_after("import gradcheck")
    assert "gradcheck" in mods
    assert not _engines(mods)


def test_listing_backends_imports_no_engine():
    mods = _modules_after("import gradcheck\nprint(gradcheck.installed_backends())")
    assert not _engines(mods)


def test_checking_with_the_numpy_backend_imports_no_engine():
    code = ("import numpy as np, gradcheck\n"
            "f = gradcheck.NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]),))\n"
            "assert gradcheck.check(f, np.ones(3), backend='numpy').passed")
    assert not _engines(_modules_after(code))


def test_reference_numpy_imports_no_engine():
    if not (Path(ROOT) / "reference" / "numpy").exists():
        pytest.skip("reference/numpy is not on this branch yet")
    mods = _modules_after("import gradcheck.reference.numpy")
    assert not _engines(mods)
