"""The JAX zoo (issue 30, item 7): correct optax training steps pass the audit, each buggy twin
fails with its cause named (see ``cases.py``)."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")
pytest.importorskip("optax", reason="the JAX zoo needs optax (pip install optax)")

import contextlib  # noqa: E402

import jax  # noqa: E402

from gradcheck import audit  # noqa: E402
from gradcheck.core.results import Status  # noqa: E402
from tests.model_audit.zoo_jax.cases import CASES, Case  # noqa: E402


def _run(case: Case, bug: bool):
    """A float64 case runs as its user would: with JAX's 64-bit mode on (scoped here)."""
    wide = jax.enable_x64(True) if case.dtype == "float64" else contextlib.nullcontext()
    with wide:
        params, loss, batch, step, kw = case.build(bug)
        return audit(params, loss, batch, backend="jax", train_step=step, **kw)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_correct_step_passes(case):
    report = _run(case, False)
    steps = [r for r in report.results if r.name.startswith("train_step.effective_step")]
    assert steps and all(r.status is Status.PASSED for r in steps), \
        [r.message for r in steps]
    assert report.passed, [r.message for r in report.failures]
    assert {r.dtype for r in steps} == {case.dtype}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_buggy_twin_fails_with_its_cause(case):
    report = _run(case, True)
    bug, *words = case.cause
    failed = [r for r in report.failures if r.name.startswith("train_step")]
    text = " | ".join(r.message for r in failed)
    assert any(r.message.startswith(f"[{bug}]") for r in failed), text
    for w in words:
        assert w in text, (w, text)
