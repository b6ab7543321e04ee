"""The exact agreement checks (reference, cross-backend, cross-device): each mutant caught,
each correct implementation passing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from gradcheck import NumpyFunction, Status, check
from gradcheck.engines.numpy.backend import NumpyBackend
from gradcheck.numeric.agreement import Side, compare_vjps
from gradcheck.reference.numpy import get_op

ROOT = Path(__file__).resolve().parents[2]
NUMPY = NumpyBackend()


def _naive_tanh() -> NumpyFunction:
    """tanh with the textbook rule 1 - y^2 (exact in real arithmetic, 0 at saturation)."""
    return NumpyFunction(np.tanh, lambda a, c: [c[0] * (1 - np.tanh(a[0]) ** 2)],
                         lambda a, t: [t[0] * (1 - np.tanh(a[0]) ** 2)], name="naive_tanh")


def test_reference_check_sees_a_derivative_finite_differences_cannot():
    x = np.full((3, 4), 20.7)
    fd_report = check(_naive_tanh(), x, backend="numpy")
    assert fd_report.passed  # the oracle cannot resolve 4e-18 next to tanh = 1
    (r,) = compare_vjps("reference", Side(NUMPY, _naive_tanh()), Side(NUMPY, get_op("tanh")),
                        [x], seed=1)
    assert r.status is Status.FAILED and r.relative_discrepancy == 1.0
    assert r.worst and r.worst[0].actual == 0.0


def test_reference_check_passes_a_correct_rule_and_uses_the_output_side_bound():
    x = np.random.default_rng(0).standard_normal((3, 4))
    results = compare_vjps("reference", Side(NUMPY, get_op("cumsum_axis1")),
                           Side(NUMPY, get_op("cumsum_axis1")), [x], seed=2)
    assert [r.status for r in results] == [Status.PASSED]
    assert "sum of |terms|" in results[0].allowed_source


class _TwoDevices(NumpyBackend):
    """A NumPy backend with a second 'device' whose VJP is off by ``delta`` (relative)."""

    name = "twodev"

    def __init__(self, delta: float) -> None:
        self.delta = delta

    def devices(self) -> list[str]:
        return ["cpu", "fake:1"]

    def vjp(self, fn, args, diff, cotangents, device):
        grads = super().vjp(fn, args, diff, cotangents, device)
        return [g * (1 + self.delta) for g in grads] if device == "fake:1" else grads


def test_cross_device_check_catches_a_device_that_differs_by_1e_10():
    x = np.random.default_rng(1).standard_normal((3, 4))
    for delta, status in ((0.0, Status.PASSED), (1e-10, Status.FAILED)):
        be = _TwoDevices(delta)
        (r,) = compare_vjps("cross_device", Side(be, get_op("sin"), "fake:1"),
                            Side(be, get_op("sin"), "cpu"), [x])
        assert r.status is status, r.message
        assert r.device == "fake:1" and "twodev/cpu" in r.message


def test_an_engine_that_raises_is_an_error_result_not_a_crash():
    def boom(args, cts):
        raise RuntimeError("no rule")

    bad = NumpyFunction(np.sin, boom, name="boom")
    (r,) = compare_vjps("cross_backend", Side(NUMPY, bad), Side(NUMPY, get_op("sin")),
                        [np.ones(3)])
    assert r.status is Status.ERROR and "no rule" in r.message


def test_jax_cross_device_on_two_faked_host_devices():
    """The cross-device suite logic end to end on JAX with two host CPU devices."""
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
           "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "suites" / "test_numeric.py"), "-q",
         "-p", "no:cacheprovider", "-k", "test_cross_device", "--gradcheck-backend", "jax",
         "--gradcheck-op", "atan2", "--gradcheck-op", "logsumexp", "--gradcheck-profile", "ci",
         "--gradcheck-device", "cpu:1", "-rA"],
        capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=600)
    assert "PASSED suites/test_numeric.py::test_cross_device[jax-cpu:1-float64-atan2]" \
        in out.stdout, out.stdout[-3000:]
    assert " failed" not in out.stdout.splitlines()[-1], out.stdout[-3000:]
