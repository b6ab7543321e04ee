"""Registry entries of the new backends: lazy imports and clear 'not available' reasons."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gradcheck
from gradcheck.backends import registry


def test_import_gradcheck_imports_no_new_engine():
    code = ("import sys, gradcheck, gradcheck.testing; "
            "print([m for m in ('autograd', 'torch', 'jax') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_tfjs_without_node_is_listed_as_unavailable(monkeypatch):
    monkeypatch.setenv("GRADCHECK_NODE", "definitely-not-node-xyz")
    registry._CACHE.pop("tfjs", None)
    assert "tfjs" not in gradcheck.installed_backends()
    with pytest.raises(gradcheck.InvalidArgument, match="Node.js is not installed"):
        gradcheck.get_backend("tfjs")


def test_tfjs_without_npm_packages(monkeypatch, tmp_path):
    (tmp_path / "adapter.js").write_text("// empty\n")
    monkeypatch.setenv("GRADCHECK_TFJS_DIR", str(tmp_path))
    if registry.unavailable_reason("tfjs") and "Node.js" in registry.unavailable_reason("tfjs"):
        pytest.skip("node is not installed here")
    assert "install.sh" in registry.unavailable_reason("tfjs")
