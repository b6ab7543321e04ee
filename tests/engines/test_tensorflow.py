"""TensorFlow adapter (heavy: importing TensorFlow takes seconds).  Runs only when TensorFlow is
installed *and* GRADCHECK_HEAVY_BACKENDS=1 (the separate command in docs/adapters.md), so the
default test command stays fast."""

from __future__ import annotations

import os

import numpy as np
import pytest

import gradcheck
from gradcheck.backends.protocol_ops import PROTOCOL_OPS
from gradcheck.testing import format_conformance, run_conformance
from tests.support.adapter_checks import ORDER2_KINDS, assert_op_passes, assert_training_probes

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
    assert_op_passes(tfb, name, seed=5, kinds=ORDER2_KINDS | {"eager_func"})


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
    assert_training_probes(tfb.training("cpu", "float64"), np.float64)
