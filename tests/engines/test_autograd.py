"""HIPS autograd adapter: conformance, every mapped op through the numeric checks (order 2,
forward and reverse mode), and the training probes.  Skipped where autograd is not installed."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.backends.protocol_ops import PROTOCOL_OPS
from gradcheck.testing import format_conformance, run_conformance
from tests.support.adapter_checks import ORDER2_KINDS, assert_op_passes, assert_training_probes

pytest.importorskip("autograd", reason="autograd is not installed (pip install autograd)")


@pytest.fixture(scope="module")
def ag():
    return gradcheck.get_backend("autograd")


def test_conformance(ag):
    report = run_conformance(ag)
    assert report.passed, format_conformance(report)


@pytest.mark.parametrize("name", sorted(PROTOCOL_OPS))
def test_every_mapped_op_passes_order2(ag, name):
    assert_op_passes(ag, name, seed=3, kinds=ORDER2_KINDS)


def test_training_is_functional_and_sums_fan_out(ag):
    assert_training_probes(ag.training("cpu", "float64"), np.float64)
