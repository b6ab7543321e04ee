"""``reference/numpy`` imports no autodiff engine; ``import gradcheck`` imports no backend."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gradcheck.ops.catalog import FAMILIES

_ROOT = Path(__file__).resolve().parents[2]

_CHECK = """
import sys, importlib
import gradcheck.reference.numpy as ref
for fam in {families!r}:
    importlib.import_module("gradcheck.reference.numpy." + fam)
from gradcheck.ops import catalog
catalog.all_specs()
ref.get_op("sin")
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "jax", "jaxlib",
             "tensorflow", "autograd", "mlx"))
print(",".join(bad))
"""


def test_reference_numpy_imports_no_autodiff_engine():
    out = subprocess.run([sys.executable, "-c", _CHECK.format(families=FAMILIES)],
                         capture_output=True, text=True, check=True, cwd=_ROOT)
    assert out.stdout.strip() == ""
