"""``gradcheck.backends.listing``: engines and versions from package metadata, none imported."""

from __future__ import annotations

import importlib.metadata

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
