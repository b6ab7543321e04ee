"""Semantic suite: every installed backend's training behaviour matches what it declares.

One ``check_semantics`` run per backend (all four probe families): every installed backend, or
the ones named with ``--gradcheck-backend`` (``gradcheck run --backend``).  Failures that are real,
documented backend behaviours (``gradcheck.core.known.SEMANTIC``) must still fail - strictly, so a
fixed
upstream behaviour shows up here and the record is updated - and nothing else may fail.
"""

from __future__ import annotations

import pytest

import gradcheck
from gradcheck.core.known import SEMANTIC
from gradcheck.core.results import Status
from gradcheck.pytest_plugin import settings_of
from gradcheck.semantics.check import check_semantics


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        chosen = settings_of(metafunc.config).backends
        metafunc.parametrize("backend", list(chosen or gradcheck.installed_backends()))


def test_semantics(backend: str) -> None:
    report = check_semantics(backend)
    unexpected = [r for r in report.failures if "known_behaviour" not in r.details]
    assert not unexpected, "\n".join(f"{r.name}: {r.message}\n  reproduce: {r.reproducer}"
                                     for r in unexpected)
    for known in (k for k in SEMANTIC if k.backend == backend):
        hits = [r for r in report.results if r.name == known.subject]
        assert hits and hits[0].status is Status.FAILED, (
            f"{known.subject} no longer fails on {backend}: the known behaviour ({known.reason}) "
            "seems fixed; update gradcheck.core.known.SEMANTIC and docs/semantics.md")
