"""Numeric gradient checks of the op catalog on every selected backend x device x dtype.

Each test is parametrized by the gradcheck plugin (``gradcheck.harness.plan``): ids look like
``test_vjp[torch-cpu-float64-atan2]`` or ``test_vjp[torch-cpu-float64-maximum@tie]``.  Known
discrepancies (data on the op specs) are strict xfails; ops a backend lacks and absent devices
are skips with the reason.  Select with ``--gradcheck-backend/-device/-dtype/-op/-profile``.
"""

from __future__ import annotations

import pytest

from gradcheck.plugin.assertions import assert_check
from gradcheck.plugin.search import search_case


@pytest.mark.gradcheck(check="vjp")
def test_vjp(gradcheck_case):
    """Reverse mode <J^T v, u> against finite differences <v, J u>."""
    assert_check(gradcheck_case)


@pytest.mark.gradcheck(check="jvp")
def test_jvp(gradcheck_case):
    """Forward mode <v, J u> against finite differences."""
    assert_check(gradcheck_case)


@pytest.mark.gradcheck(check="fwd_rev")
def test_fwd_rev(gradcheck_case):
    """Forward mode against reverse mode (rounding bound only)."""
    assert_check(gradcheck_case)


@pytest.mark.gradcheck(check="eager_func")
def test_eager_func(gradcheck_case):
    """Alternative reverse paths of one engine (torch: autograd tape vs torch.func.vjp)."""
    assert_check(gradcheck_case)


@pytest.mark.gradcheck(check="rounding")
def test_rounding(gradcheck_case):
    """A low-precision VJP against the same backend's float64 VJP (dtype rounding bound)."""
    assert_check(gradcheck_case)


@pytest.mark.gradcheck(check="reference")
def test_reference(gradcheck_case):
    """The backend's VJP against the hand-derived NumPy reference, rounding bound only: sees
    derivatives far below what finite differences resolve."""
    assert_check(gradcheck_case)


@pytest.mark.gradcheck(check="vjp_of_vjp")
def test_vjp_of_vjp(gradcheck_case):
    """Order 2, reverse over reverse, against finite differences of the VJP."""
    assert_check(gradcheck_case)


@pytest.mark.gradcheck(check="jvp_of_vjp")
def test_jvp_of_vjp(gradcheck_case):
    """Order 2, forward over reverse, against finite differences of the VJP."""
    assert_check(gradcheck_case)


@pytest.mark.gradcheck(check="jvp_of_jvp")
def test_jvp_of_jvp(gradcheck_case):
    """Order 2, forward over forward, against finite differences of the JVP."""
    assert_check(gradcheck_case)


@pytest.mark.gradcheck(check="cross_backend")
def test_cross_backend(gradcheck_case):
    """Two engines' VJPs on identical inputs and probes (id ``a+b-...``)."""
    assert_check(gradcheck_case)


@pytest.mark.gradcheck(check="cross_device")
def test_cross_device(gradcheck_case):
    """A device's VJP (GPU, or a second JAX host device) against the same engine on CPU."""
    assert_check(gradcheck_case)


@pytest.mark.gradcheck(check="search")
def test_search(gradcheck_case, gradcheck_settings):
    """Hypothesis search of the op's domain for the largest discrepancy ratio (ci, thorough)."""
    search_case(gradcheck_case, gradcheck_settings.profile)
