"""Models written in the process engines themselves (Candle, Gorgonia): gradients extracted by
the engine's own parameter names against finite differences, the global gradient norm, and
the gradient flow of every parameter (``checks.model_flow.check_varmap_model``,
``checks.model_flow.check_model_flow``).  Runs for each such engine that is installed (built),
or the ones named with ``--gradcheck-backend``; every result goes into the report."""

from __future__ import annotations

import importlib

import pytest

import gradcheck
from gradcheck.pytest_plugin import settings_of

MODEL_CHECKS = {"candle": "gradcheck.model_audit.model_flow:check_varmap_model",
                "gorgonia": "gradcheck.model_audit.model_flow:check_model_flow"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine" in metafunc.fixturenames:
        chosen = settings_of(metafunc.config).backends or gradcheck.installed_backends()
        metafunc.parametrize("engine", [b for b in MODEL_CHECKS if b in chosen])


def test_engine_model(engine: str) -> None:
    module, _, name = MODEL_CHECKS[engine].partition(":")
    report = getattr(importlib.import_module(module), name)(gradcheck.get_backend(engine))
    assert report.decided and report.passed, "\n".join(
        f"{r.name}: {r.status.value}: {r.message}" for r in report.results if not r.ok)
