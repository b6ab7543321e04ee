"""``gradcheck.backends.listing``: engines and versions from package metadata, none imported."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
from pathlib import Path

from gradcheck.backends import listing, registry


def test_installed_engines_carry_their_distribution_version():
    rows = {b.name: b for b in listing.list_backends()}
    assert set(rows) == set(registry.known_backends())
    numpy = rows["numpy"]
    assert numpy.installed and numpy.version == importlib.metadata.version("numpy")
    assert numpy.to_dict()["source"] == registry.BUILTIN["numpy"]


def test_an_engine_that_is_not_installed_says_why_and_comes_last(monkeypatch):
    monkeypatch.setattr(registry, "installed_backends", lambda: ["numpy"])
    monkeypatch.setattr(listing, "_version", lambda dist: None if dist == "torch" else "1.0")
    rows = listing.list_backends()
    assert rows[0].name == "numpy" and all(not b.installed for b in rows[1:])
    torch = next(b for b in rows if b.name == "torch")
    assert torch.version is None and "pip install 'gradcheck[torch]'" in torch.reason


def _unbuilt(monkeypatch, tmp_path):
    """Every child engine pointed at a child that is not built, through the engines' own
    environment variables (the seam their ``unavailable_reason`` reads)."""
    monkeypatch.setenv("GRADCHECK_CANDLE_BIN", str(tmp_path / "no-candle"))
    monkeypatch.setenv("GRADCHECK_GORGONIA_BIN", str(tmp_path / "no-gorgonia"))
    monkeypatch.setenv("GRADCHECK_TFJS_DIR", str(tmp_path))


def test_child_engines_that_are_not_built_are_listed_with_their_build_command(monkeypatch,
                                                                              tmp_path):
    _unbuilt(monkeypatch, tmp_path)
    rows = {b.name: b for b in listing.list_backends()}
    for name, tool in (("candle", "cargo"), ("gorgonia", "go"), ("tfjs", "node")):
        row = rows[name]
        assert not row.installed and row.reason
        assert row.build == f"bash adapters/{name}/install.sh"
        assert tool in row.needs and isinstance(row.toolchain_found, bool)
    for name in ("candle", "gorgonia"):  # where a user's own model is checked
        assert rows[name].own_model.startswith("gradcheck model --command ")
        assert rows[name].guide == f"docs/engines/{name}-user.md"
    assert rows["tfjs"].own_model == ""
    assert rows["numpy"].build == "" and rows["numpy"].toolchain_found is None
    assert set(rows["candle"].to_dict()) >= {"build", "needs", "toolchain_found", "own_model",
                                            "guide"}


def test_a_missing_toolchain_is_named(monkeypatch, tmp_path):
    _unbuilt(monkeypatch, tmp_path)
    monkeypatch.setattr(listing.shutil, "which", lambda tool: None if tool == "cargo" else tool)
    rows = {b.name: b for b in listing.list_backends()}
    assert rows["candle"].toolchain_found is False and rows["gorgonia"].toolchain_found is True


def test_each_build_command_is_a_script_of_the_checkout_that_checks_its_tools():
    # the listing names what the script needs; the script itself skips without those tools
    root = Path(__file__).resolve().parents[2]
    for name, child in listing.CHILD_BUILDS.items():
        script = root / child.command.removeprefix("bash ")
        assert child.command.startswith("bash ") and script.is_file(), name
        text = script.read_text()
        for tool in child.tools:
            assert f"command -v {tool}" in text, (name, tool)


def test_an_entry_point_that_takes_a_child_engines_name_gets_no_build_command(monkeypatch):
    monkeypatch.setattr(registry, "known_backends",
                        lambda: {**registry.BUILTIN, "candle": "their_package:Candle"})
    rows = {b.name: b for b in listing.list_backends()}
    assert rows["candle"].build == "" and rows["candle"].own_model == ""
    assert rows["gorgonia"].build


def test_the_listing_starts_no_child(monkeypatch, tmp_path):
    _unbuilt(monkeypatch, tmp_path)

    def refuse(*args, **kwargs):
        raise AssertionError(f"the listing started a process: {args!r}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse, raising=False)
    assert {"candle", "gorgonia", "tfjs"} <= {b.name for b in listing.list_backends()}
