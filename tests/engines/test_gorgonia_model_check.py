"""The gorgoniacheck examples (adapters/gorgonia/gorgoniacheck/examples) through
``gradcheck.audit_process``: each seed story's correct variant passes, its ``-buggy`` variant
fails in exactly the check(s) that story is about.

Skipped with the reason where the example binaries are not built (``bash
adapters/gorgonia/install.sh`` builds ``adapters/gorgonia/bin/gc-<story>``; it needs Go), or
where this tree has no ``gradcheck.audit_process``."""

from __future__ import annotations

from pathlib import Path

import pytest

import gradcheck
from gradcheck import Status

_BIN = Path(__file__).resolve().parents[2] / "adapters" / "gorgonia" / "bin"

# story -> (the check the -buggy variant must fail, every check it may fail as a consequence)
_STORIES = {
    # the solver receives g + g: applied vs the true gradient (2x); the update follows it
    "dualrun": ("step.applied[", ("step.applied[", "step.effective[")),
    # G.Let of a validation batch and a run on the training machine: g(validation) + g(training)
    "letbatch": ("step.applied[", ("step.applied[", "step.effective[")),
    # the logged norm is sqrt(|cost|), not the global L2 norm of the gradients
    "normproxy": ("grad_norm", ("grad_norm",)),
    # a host round trip between two graphs: the cost depends on fc1.weight, no gradient arrives
    "twograph": ("flow[fc1.weight]", ("flow[fc1.weight]", "grad[fc1.weight]", "grad.global[")),
    # WithBatchSize(16) on a mean cost: every learnable moves 1/16 of the declared step
    "batchsize": ("step.effective[", ("step.effective[",)),
}


def _binary(story: str) -> Path:
    exe = _BIN / f"gc-{story}"
    if not exe.exists():
        pytest.skip(f"{exe} is not built: bash adapters/gorgonia/install.sh (needs Go)")
    if not hasattr(gradcheck, "audit_process"):
        pytest.skip("gradcheck.audit_process is not in this tree (issue 31's Python side)")
    return exe


def _bad(report) -> list:
    return [r for r in report.results if r.status in (Status.FAILED, Status.ERROR)]


def _describe(results) -> str:
    return "\n".join(f"  {r.name}: {r.status.value}: {r.message}" for r in results)


@pytest.mark.parametrize("story", ["mlp", *_STORIES])
def test_correct_variant_passes(story):
    exe = _binary(story)
    report = gradcheck.audit_process([str(exe)])
    assert report.results, "no results"
    bad = _bad(report)
    assert not bad, f"gc-{story} (correct) has findings:\n{_describe(bad)}"
    assert any(r.status is Status.PASSED for r in report.results), _describe(report.results)


@pytest.mark.parametrize("story", list(_STORIES))
def test_buggy_variant_fails_its_check(story):
    primary, allowed = _STORIES[story]
    exe = _binary(story)
    report = gradcheck.audit_process([str(exe), "-buggy"])
    errors = [r for r in report.results if r.status is Status.ERROR]
    assert not errors, f"gc-{story} -buggy: errors instead of findings:\n{_describe(errors)}"
    failed = [r for r in report.results if r.status is Status.FAILED]
    assert any(r.name.startswith(primary) for r in failed), (
        f"gc-{story} -buggy: no failure in {primary}; results:\n{_describe(report.results)}")
    stray = [r for r in failed if not r.name.startswith(allowed)]
    assert not stray, f"gc-{story} -buggy fails checks its story is not about:\n{_describe(stray)}"
    for r in failed:
        assert r.message, f"{r.name}: a failure without a message"
