"""Assertions shared by the adapter test modules (one place for the probes they all run)."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import Status
from gradcheck.backends.process_training import ParamRef
from gradcheck.backends.protocol_ops import PROTOCOL_OPS

ORDER2_KINDS = {"vjp", "jvp", "fwd_rev", "vjp_of_vjp", "jvp_of_vjp", "jvp_of_jvp"}


def assert_op_passes(backend, name: str, seed: int, kinds: set[str], dtype=None) -> None:
    """Catalog op ``name`` passes order-2 checks; every kind in ``kinds`` ran and passed."""
    args = PROTOCOL_OPS[name].sample(np.random.default_rng(seed))
    if dtype is not None:
        args = tuple(a.astype(dtype) for a in args)
    report = gradcheck.check(backend.op(name), *args, backend=backend, order=2)
    assert report.passed, [r.message for r in report.failures]
    passed = {r.kind for r in report.results if r.status is Status.PASSED}
    assert kinds <= passed, f"{sorted(kinds - passed)} did not pass: {report.summary()}"


def assert_training_probes(t, dtype, *, accumulate_factor: float = 1.0, rel: float = 1e-9,
                           clip_epsilon: float = 0.0):
    """Second backward without reset (x1 functional, x2 accumulating), fan-out sums, a stop
    point removes one path, global-norm clipping (scale ``max_norm / (norm + clip_epsilon)``,
    the engine's documented constant), one SGD step."""
    w = np.array([1.0, -2.0, 3.0], dtype)
    x = np.array([0.5, 0.25, 2.0], dtype)
    t.create({"w": w})
    t.backward("mul", [ParamRef("w"), x])
    t.backward("mul", [ParamRef("w"), x])
    assert t.grads()["w"] == pytest.approx(accumulate_factor * x, rel=rel)
    t.zero_grad()
    t.backward("mul", [ParamRef("w"), ParamRef("w")])
    assert t.grads()["w"] == pytest.approx(2 * w, rel=rel)
    t.zero_grad()
    t.backward("mul", [ParamRef("w"), ParamRef("w", stop=True)])
    assert t.grads()["w"] == pytest.approx(w, rel=rel)
    norm = np.linalg.norm(w)
    assert t.clip_grad_norm(1.0) == pytest.approx(norm, rel=rel)
    clipped = w / (norm + clip_epsilon)
    assert np.linalg.norm(t.grads()["w"]) == pytest.approx(np.linalg.norm(clipped), rel=rel)
    t.step(0.5)
    assert t.params()["w"] == pytest.approx(w - 0.5 * clipped, rel=rel)
    t.zero_grad()
    assert t.grads()["w"] is None or not np.any(t.grads()["w"])
    t.close()
