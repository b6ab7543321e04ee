"""The torch zoo: every correct training step passes the audit (no false alarm), every buggy
twin fails with its cause named (see :mod:`tests.model_audit.zoo.torch_steps`)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gradcheck import audit  # noqa: E402
from gradcheck.core.results import Status  # noqa: E402
from tests.model_audit.zoo.torch_steps import CASES  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models: torch's thread pool only costs here (and the zoo is sized for one core)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _audit(case, bug: bool):
    model, loss_fn, batch, step, stop = case.build(bug)
    return audit(model, loss_fn, batch, backend="torch", train_step=step, stop_gradient=stop)


def test_the_zoo_is_large_enough():
    assert len(CASES) >= 22
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_correct_step_passes(case):
    report = _audit(case, bug=False)
    steps = [r for r in report.results if r.name.startswith("train_step")]
    assert steps and all(r.status is Status.PASSED for r in steps), \
        [r.message for r in steps if r.status is not Status.PASSED]
    assert report.passed, [r.message for r in report.failures]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_buggy_twin_fails_with_its_cause(case):
    report = _audit(case, bug=True)
    failed = [r for r in report.results if r.name.startswith("train_step")
              and r.status is Status.FAILED]
    causes = {r.details.get("bug_class") for r in failed}
    assert case.cause in causes, [r.message for r in failed] or \
        [r.message for r in report.results]
    if case.cause == "parameters meant to be frozen were updated":  # no target update here
        assert "target update differs from the declared one" not in causes
    # named, never only the generic verdict
    assert "training step differs from lr x clipped gradient" not in causes, \
        [r.message for r in failed]
