"""The example scripts whose output docs/semantics.md shows run and print the verdicts shown."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


def _out(module: str, capsys) -> str:
    import importlib

    importlib.import_module(f"examples.{module}").main()
    return capsys.readouterr().out


def test_training_steps_example(capsys):
    out = _out("training_steps", capsys)
    assert "momentum SGD + warm-up + clip, 3 steps: 15 checks: 14 passed, 1 skipped" in out
    for bug in ("two optimizer updates in one step", "loss scale not removed from the step",
                "micro-batch gradients summed, not averaged",
                "reported norm is not the global L2 norm"):
        assert f"[{bug}]" in out


def test_intent_markers_example(capsys):
    out = _out("intent_markers", capsys)
    assert "semi-gradient TD, declared: 11 checks: 10 passed, 1 skipped" in out
    for bug in ("partial stop or surrogate gradient not declared",
                "declared stop that does not happen",
                "target update differs from the declared one"):
        assert f"[{bug}]" in out


def test_jax_steps_example(capsys):
    pytest.importorskip("jax")
    out = _out("jax_steps", capsys)
    assert "momentum, state threaded, 3 steps: 12 checks: 11 passed, 1 skipped" in out
    assert "[step uses state captured at an earlier step]" in out
    assert "FAILED clip.threshold_validation" in out


def test_randomness_example(capsys):
    out = _out("randomness", capsys)
    assert "both heads train the first layer: 14 checks: 13 passed, 1 skipped" in out
    assert "[partial stop or surrogate gradient not declared]" in out
    assert "[nondeterministic under a controlled RNG]" in out
