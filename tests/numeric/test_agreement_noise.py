"""The judging side's measured rounding noise in the exact comparisons (reference, cross-backend).

Every case is the identity ``f(x) = x`` (derivative 1) at ``x`` of size 20-40, with rules that
either return ``v`` exactly or compute the 1 as a cancelling difference of products of size
``x^2 ~ 1e3`` (``(x + 1/x) * x - x * x``): a rounding error of a few units of ``1e3``'s last place,
~1e-13, that changes pseudo-randomly between neighbouring inputs, as ``digamma(b) -
digamma(a + b)`` does at ``betaln``'s ``a = 1e-3``.
"""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck import NumpyFunction, Status
from gradcheck.engines.numpy.backend import NumpyBackend
from gradcheck.numeric.agreement import Side, compare_vjps
from gradcheck.oracle.error_model import ROUNDING_GAMMA, eps
from tests.support.counting import CountingNumpyBackend

X = np.random.default_rng(3).uniform(20.0, 40.0, (3, 4))


def _identity(slope, name: str) -> NumpyFunction:
    return NumpyFunction(lambda x: x * 1.0, lambda a, c: [c[0] * slope(a[0])],
                         lambda a, t: [t[0] * slope(a[0])], name=name)


EXACT = _identity(lambda x: np.ones_like(x), "exact")
CANCELS = _identity(lambda x: (x + 1.0 / x) * x - x * x, "cancels")  # = 1 + ~1e-13 noise
CANCELS_TOO = _identity(lambda x: (x + 3.0 / x) * (x - 1.0 / x) - x * x - 1.0 + 3.0 / (x * x),
                        "cancels_too")


def _mutant(delta: float) -> NumpyFunction:
    return _identity(lambda x: np.full_like(x, 1.0 + delta), f"scaled_{delta:g}")


def _one(kind: str, actual: NumpyFunction, expected: NumpyFunction, seed: int = 0):
    (r,) = compare_vjps(kind, Side(NumpyBackend(), actual), Side(NumpyBackend(), expected), [X],
                        seed=seed)
    return r


def _old_bound_exceeded(r) -> bool:
    """The rounding bound of the final terms alone (the model before the noise term)."""
    terms_only = float(r.allowed_source.split("sum of |terms| ")[1].split(")")[0].split(" ")[0])
    return r.discrepancy > ROUNDING_GAMMA * eps("float64") * terms_only


@pytest.mark.parametrize("seed", range(4))
def test_a_cancelling_reference_no_longer_fails_an_exact_backend(seed):
    r = _one("reference", EXACT, CANCELS, seed)
    assert _old_bound_exceeded(r), "the case must be a false alarm of the final-terms bound"
    assert r.status is Status.PASSED, r.message
    assert "measured rounding of the judging side" in r.allowed_source


@pytest.mark.parametrize("seed", range(4))
def test_the_backend_is_never_excused_by_its_own_noise(seed):
    # the mirror image (what torch and jax do with sinc' near 0): the backend cancels, the
    # reference is exact; the reference measures no noise, so the backend's error is reported
    r = _one("reference", CANCELS, EXACT, seed)
    assert r.status is Status.FAILED, r.message


@pytest.mark.parametrize("delta", [1e-9, 1e-11])
@pytest.mark.parametrize("seed", range(4))
def test_a_scaled_rule_is_still_caught_against_a_noisy_reference(delta, seed):
    # real backend bugs found by the reference check are 2e-14 .. 3e-7 relative; the noisy
    # reference here carries ~1e-13 of noise per element and still resolves 1e-11
    r = _one("reference", _mutant(delta), CANCELS, seed)
    assert r.status is Status.FAILED, r.message
    assert _one("reference", _mutant(0.0), CANCELS, seed).status is Status.PASSED


def test_cross_backend_judges_by_the_steadier_engine():
    both_noisy = [_one("cross_backend", CANCELS, CANCELS_TOO, seed) for seed in range(4)]
    assert [r.status for r in both_noisy] == [Status.PASSED] * 4, [r.message for r in both_noisy]
    assert sum(_old_bound_exceeded(r) for r in both_noisy) >= 2  # false alarms before
    for seed in range(4):  # one engine exact: its noise (none) is the yardstick, either side
        assert _one("cross_backend", CANCELS, EXACT, seed).status is Status.FAILED
        assert _one("cross_backend", EXACT, CANCELS, seed).status is Status.FAILED


def test_noise_is_measured_only_when_the_final_terms_bound_is_exceeded():
    calls = {}
    for name, expected in (("agrees", EXACT), ("needs noise", CANCELS)):
        backend = CountingNumpyBackend()
        (r,) = compare_vjps("reference", Side(NumpyBackend(), EXACT), Side(backend, expected),
                            [X], seed=1)
        assert r.status is Status.PASSED
        calls[name] = backend.calls
    # 3 probes: 3 VJPs for the comparison; before the noise, the argument conditioning adds 4
    # points x 3 probes per relative step tried (1 to 4 steps: the cancelling rule's
    # sensitivity converges late), then the noise 7 points x 3 probes
    assert calls["agrees"] == 3
    conditioning = calls["needs noise"] - 3 - 7 * 3
    assert conditioning in (12, 24, 36, 48), calls


def test_model_allowance_adds_the_measured_bound_and_says_so():
    from gradcheck.oracle.error_model import model_allowance

    base = model_allowance(0.0, 2.0, "float64")
    more = model_allowance(0.0, 2.0, "float64", measured=1e-13)
    assert more.allowed == base.allowed + 1e-13
    assert "measured rounding of the judging side beyond its share 1e-13" in more.source
    assert "measured" not in base.source


def test_a_reference_that_raises_off_the_point_gives_no_credit_and_no_crash():
    def slope(x):
        if not np.array_equal(x, X):
            raise RuntimeError("only defined at the sample point")
        return (x + 1.0 / x) * x - x * x

    r = _one("reference", EXACT, _identity(slope, "fragile"), seed=0)
    assert r.status is Status.FAILED  # the false alarm stays: no measured noise, no allowance
    assert "measured" not in r.allowed_source
