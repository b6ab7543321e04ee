"""TensorFlow adapter (heavy: importing TensorFlow takes seconds).  Runs only when TensorFlow is
installed *and* GRADCHECK_HEAVY_BACKENDS=1 (the separate command in docs/adapters.md), so the
default test command stays fast."""

from __future__ import annotations

import os

import numpy as np
import pytest

import gradcheck
from gradcheck import Status
from gradcheck.backends.process_training import ParamRef
from gradcheck.backends.protocol_ops import PROTOCOL_OPS
from gradcheck.testing import format_conformance, run_conformance

if os.environ.get("GRADCHECK_HEAVY_BACKENDS") != "1":
    pytest.skip("heavy backend: set GRADCHECK_HEAVY_BACKENDS=1 to run the TensorFlow tests",
                allow_module_level=True)
tf = pytest.importorskip("tensorflow", reason="tensorflow is not installed "
                                              "(pip install tensorflow-cpu)")


@pytest.fixture(scope="module")
def tfb():
    return gradcheck.get_backend("tensorflow")


def test_conformance(tfb):
    report = run_conformance(tfb)
    assert report.passed, format_conformance(report)


@pytest.mark.parametrize("name", sorted(PROTOCOL_OPS))
def test_every_mapped_op_passes_order2(tfb, name):
    args = PROTOCOL_OPS[name].sample(np.random.default_rng(5))
    report = gradcheck.check(tfb.op(name), *args, backend=tfb, order=2)
    assert report.passed, [r.message for r in report.failures]
    kinds = {r.kind for r in report.results if r.status is Status.PASSED}
    assert {"vjp", "jvp", "fwd_rev", "eager_func", "vjp_of_vjp", "jvp_of_jvp"} <= kinds


def test_non_persistent_tape_answers_once():
    """The engine fact behind the two reverse paths: a non-persistent tape refuses a second
    gradient call, a persistent one answers both (and they agree)."""
    x = tf.constant([0.5, 1.5], tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.sin(x)
    first = tape.gradient(y, x)
    with pytest.raises(RuntimeError, match="non-persistent"):
        tape.gradient(y, x)
    with tf.GradientTape(persistent=True) as ptape:
        ptape.watch(x)
        y = tf.sin(x)
    np.testing.assert_array_equal(ptape.gradient(y, x), first)
    np.testing.assert_array_equal(ptape.gradient(y, x), first)


def test_training_functional_fan_out_stop_and_clip(tfb):
    t = tfb.training("cpu", "float64")
    w = np.array([1.0, -2.0, 3.0])
    x = np.array([0.5, 0.25, 2.0])
    t.create({"w": w})
    t.backward("mul", [ParamRef("w"), x])
    t.backward("mul", [ParamRef("w"), x])
    assert t.grads()["w"] == pytest.approx(x)  # fresh, not accumulated
    t.backward("mul", [ParamRef("w"), ParamRef("w")])
    assert t.grads()["w"] == pytest.approx(2 * w)
    t.backward("mul", [ParamRef("w"), ParamRef("w", stop=True)])
    assert t.grads()["w"] == pytest.approx(w)
    assert t.clip_grad_norm(1.0) == pytest.approx(np.linalg.norm(w))
    assert np.linalg.norm(t.grads()["w"]) == pytest.approx(1.0)
    t.step(0.5)
    assert t.params()["w"] == pytest.approx(w - 0.5 * w / np.linalg.norm(w))
