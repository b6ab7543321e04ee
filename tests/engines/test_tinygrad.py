"""tinygrad adapter: conformance (contract sections; the numeric section is left to the suites,
tinygrad's eager calls cost ~30 ms of Python each), one binary op through the order-2 checks and
the eager-vs-functional comparison, a mutant VJP caught through the adapter, the training probes
(accumulating), and the engine facts behind the documented behaviours.  Skipped where tinygrad
is not installed (``pip install tinygrad``)."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.testing import format_conformance, run_conformance
from tests.support.adapter_checks import assert_op_passes, assert_training_probes

tinygrad = pytest.importorskip("tinygrad",
                               reason="tinygrad is not installed (pip install tinygrad)")

from tinygrad import Tensor  # noqa: E402
from tinygrad.helpers import Context  # noqa: E402

from gradcheck.engines.tinygrad.backend import engine_device  # noqa: E402

KINDS = {"vjp", "vjp_of_vjp", "eager_func"}


@pytest.fixture(scope="module")
def tg():
    return gradcheck.get_backend("tinygrad")


def test_conformance(tg):
    report = run_conformance(tg, numeric=False)
    assert report.passed, format_conformance(report)


def test_op_passes_order2_and_eager_matches_functional(tg):
    assert_op_passes(tg, "mul", seed=11, kinds=KINDS)


def _tanh_with_vjp(factor: float):
    """``tanh`` whose gradient is ``factor`` times the true one, built with the engine's own
    AD: ``y + (factor - 1) * (y - y.detach())`` has the value of ``y`` and the derivative
    ``factor * y'`` (1.0: the plain op)."""

    def f(x):
        y = x.tanh()
        return y if factor == 1.0 else y + (factor - 1.0) * (y - y.detach())

    return f


def test_mutant_vjp_is_caught_and_correct_passes(tg):
    x = np.random.default_rng(2).standard_normal((3, 4))
    good = gradcheck.check(_tanh_with_vjp(1.0), x, backend=tg, probes=1)
    assert good.passed, good.summary()
    for factor in (1.0 + 1e-4, -1.0):
        bad = gradcheck.check(_tanh_with_vjp(factor), x, backend=tg, probes=1)
        assert {r.kind for r in bad.failures} == {"vjp"}, (factor, bad.summary())


def test_backward_adds_into_grad_and_gradient_is_fresh():
    """Engine fact behind ``Accumulation.ACCUMULATE``: a second ``backward`` adds into
    ``.grad``; ``Tensor.gradient`` returns the same value every time."""
    dev = engine_device()
    with Context(DEV=dev):  # as the adapter runs every call (backward's seed uses the default)
        w = Tensor(np.array([1.0, -2.0]), device=dev).contiguous().realize()
        x = Tensor(np.array([0.5, 3.0]), device=dev)
        (w * x).sum().backward()
        (w * x).sum().backward()
        np.testing.assert_array_equal(w.grad.numpy(), [1.0, 6.0])
        for _ in range(2):
            np.testing.assert_array_equal((w * x).sum().gradient(w)[0].numpy(), [0.5, 3.0])


def test_training_accumulates_and_sums_fan_out(tg):
    assert_training_probes(tg.training("cpu", "float64"), np.float64, accumulate_factor=2.0)
