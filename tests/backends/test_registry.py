"""Finding backends: built-in names, 'package.module:Attr' paths, instances, entry points."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import sys
import types

import pytest

import gradcheck
from gradcheck import Backend, InvalidArgument
from gradcheck.backends import registry
from gradcheck.engines.numpy.backend import NumpyBackend


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    monkeypatch.setattr(registry, "_CACHE", {})


def test_builtin_names():
    assert {"numpy", "torch", "jax"} <= set(gradcheck.known_backends())
    be = gradcheck.get_backend("numpy")
    assert isinstance(be, NumpyBackend) and be.name == "numpy"
    assert gradcheck.get_backend("numpy") is be  # cached
    assert "numpy" in gradcheck.installed_backends()


@pytest.mark.parametrize("name", ["torch", "jax"])
def test_builtin_engine_backends(name):
    pytest.importorskip(name)
    be = gradcheck.get_backend(name)
    assert be.name == name and "cpu" in be.devices() and be.version()


def test_module_attr_path_to_a_class_and_to_an_instance(monkeypatch):
    module = types.ModuleType("my_adapters")
    module.MyNumpy = type("MyNumpy", (NumpyBackend,), {"name": "mine"})
    module.instance = module.MyNumpy()
    monkeypatch.setitem(sys.modules, "my_adapters", module)
    assert gradcheck.get_backend("my_adapters:MyNumpy").name == "mine"
    assert gradcheck.get_backend("my_adapters:instance") is module.instance
    path = "gradcheck.engines.numpy.backend:NumpyBackend"
    assert isinstance(gradcheck.get_backend(path), NumpyBackend)


def test_instances_and_classes():
    be = NumpyBackend()
    assert gradcheck.get_backend(be) is be
    assert isinstance(gradcheck.get_backend(NumpyBackend), NumpyBackend)


def test_entry_point_group(monkeypatch):
    module = types.ModuleType("third_party_adapter")
    module.__spec__ = importlib.machinery.ModuleSpec("third_party_adapter", None)
    module.Adapter = type("Adapter", (NumpyBackend,), {"name": "third"})
    monkeypatch.setitem(sys.modules, "third_party_adapter", module)
    ep = importlib.metadata.EntryPoint(name="third", value="third_party_adapter:Adapter",
                                       group=registry.ENTRY_POINT_GROUP)

    def fake_entry_points(*, group=None, **kw):
        return [ep] if group == registry.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    assert gradcheck.known_backends()["third"] == "third_party_adapter:Adapter"
    assert "third" in gradcheck.installed_backends()
    be = gradcheck.get_backend("third")
    assert be.name == "third" and isinstance(be, Backend)


def test_unknown_name_lists_the_choices():
    with pytest.raises(InvalidArgument) as info:
        gradcheck.get_backend("tensorflow_nope")
    text = str(info.value)
    assert "backend='tensorflow_nope'" in text
    for choice in ("'numpy'", "'torch'", "'jax'", "package.module:Attr"):
        assert choice in text


@pytest.mark.parametrize("spec,piece", [
    ("no_such_module_xyz:Thing", "cannot be imported"),
    ("gradcheck.engines.numpy.backend:Nope", "has no attribute 'Nope'"),
    ("gradcheck.engines.numpy.backend:NumpyFunction", "not a gradcheck.Backend"),
    (3.5, "must be a name"),
])
def test_bad_specs(spec, piece):
    with pytest.raises(InvalidArgument, match=piece):
        gradcheck.get_backend(spec)


def test_missing_engine_says_how_to_install(monkeypatch):
    monkeypatch.setattr(registry, "_importable", lambda module: module == "numpy")
    with pytest.raises(InvalidArgument) as info:
        gradcheck.get_backend("torch")
    assert "not installed" in str(info.value) and "gradcheck[torch]" in str(info.value)


# -- issue 32 class 3: a broken adapter is a message, never a raw traceback ----------------


class _ConstructorRaises(NumpyBackend):
    def __init__(self) -> None:
        raise MemoryError("no room for the engine")


def _devices_returning(value):
    class Odd(NumpyBackend):
        def devices(self):  # type: ignore[override]
            if isinstance(value, BaseException):
                raise value
            return value
    return Odd()


def test_an_adapter_whose_constructor_raises_is_an_invalid_argument_naming_it():
    with pytest.raises(InvalidArgument, match="_ConstructorRaises.*cannot be constructed: "
                       "MemoryError: no room for the engine"):
        registry.get_backend(_ConstructorRaises)


@pytest.mark.parametrize("value", [RuntimeError("no driver"), None, "cpu", ["cpu", 3], [""]],
                         ids=["raises", "None", "a-string", "a-non-string", "empty-name"])
def test_an_adapter_whose_devices_misbehave_is_an_invalid_argument_naming_it(value):
    with pytest.raises(InvalidArgument, match=r"backend='numpy': devices\(\) (raised|returned)"):
        registry.backend_devices(_devices_returning(value))
    assert registry.backend_devices(_devices_returning(("cpu", "cuda"))) == ["cpu", "cuda"]
