"""The oracle's scaled estimate (``gradcheck/oracle/scaled.py``, grouped mode, and its pipeline
step ``gradcheck/numeric/scaled_estimate.py``): where elements span
many decades, ``gradcheck.check`` judges with directions scaled per element instead of
failing a correct rule, and still fails wrong ones."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.core.results import CheckKind, Status
from gradcheck.numeric import scaled_estimate as _scaled_estimate
from gradcheck.oracle import scaled

torch = pytest.importorskip("torch")

# atan2 at the sweep's `small` band: magnitudes 1e-15 .. 1e-1, both signs, broadcast (8, 1) x
# (1, 8).  The first estimate's steps (2^-3 .. 2^-25) cross the small elements, where atan2
# changes on their own scale: it converges, stably, to a wrong slope.
_RNG = np.random.default_rng(0)
Y = (_RNG.permutation(np.logspace(-15, -1, 8)) * _RNG.choice([-1, 1], 8)).reshape(8, 1)
X = (_RNG.permutation(np.logspace(-15, -1, 8)) * _RNG.choice([-1, 1], 8)).reshape(1, 8)


def _atan2(factor: float = 1.0, below: float = 0.0):
    """atan2 with its own backward: the true rule, or ``d/dy`` times ``factor`` where
    ``|y| < below`` (a rule wrong only at the small elements)."""

    class Atan2(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y, x):
            ctx.save_for_backward(y, x)
            return torch.atan2(y, x)

        @staticmethod
        def backward(ctx, g):
            y, x = ctx.saved_tensors
            r2 = x * x + y * y
            gy, gx = g * x / r2, -g * y / r2
            gy = torch.where(y.abs() < below, gy * factor, gy)
            return gy.sum(dim=1, keepdim=True), gx.sum(dim=0, keepdim=True)

    return Atan2.apply


def _vjps(fn) -> list:
    rep = gradcheck.check(fn, Y, X, backend="torch", modes=("rev",), seed=0)
    return [r for r in rep.results if r.kind is CheckKind.VJP]


def test_correct_rule_at_small_magnitudes_passes_by_the_scaled_estimate():
    got = _vjps(torch.atan2)
    assert [r.status for r in got] == [Status.PASSED, Status.PASSED]
    for r in got:
        assert "along directions scaled per element" in r.details["oracle"]
        assert r.details["probes"] > 3  # the scaled rows: a group of scales x probes


def test_without_the_scaled_estimate_the_same_check_abstains(monkeypatch):
    """Without the scaled estimate the check cannot be judged: the first and second
    estimates' steps (3.8e-6 .. 4.9e-4 at the smallest) cross the small elements, so their
    disagreement cannot refute the rule; the check is inconclusive, says why, and forward vs
    reverse (no FD) still runs."""
    monkeypatch.setattr(_scaled_estimate, "estimate",
                        lambda prep, pr, j: _scaled_estimate.Declined("disabled here"))
    rep = gradcheck.check(torch.atan2, Y, X, backend="torch", seed=0)
    fd_checks = [r for r in rep.results if r.kind in (CheckKind.VJP, CheckKind.JVP)]
    assert fd_checks and all(r.status is Status.INCONCLUSIVE for r in fd_checks)
    smallest = float(np.min(np.abs(np.concatenate([Y.ravel(), X.ravel()]))))
    assert f"move elements by more than their own size (the smallest such element is " \
           f"{smallest:.3g})" in fd_checks[0].message
    assert "along directions scaled per element: not estimated (disabled here)" in \
        fd_checks[0].message
    fwd_rev = [r for r in rep.results if r.kind is CheckKind.FWD_REV]
    assert fwd_rev and all(r.status is Status.PASSED for r in fwd_rev)


def test_a_non_finite_rule_still_fails_where_steps_cross(monkeypatch):
    """A NaN derivative fails against any finite estimate, judged or not (mutant: NaN d/dy
    below 1e-12)."""
    monkeypatch.setattr(_scaled_estimate, "estimate",
                        lambda prep, pr, j: _scaled_estimate.Declined("disabled here"))
    got = _vjps(_atan2(np.nan, 1e-12))
    assert got[0].status is Status.FAILED
    assert got[1].status is Status.INCONCLUSIVE  # d/dx is right; no estimate can say so


def test_lu_at_tiny_magnitudes_abstains_instead_of_failing():
    """``torch.linalg.lu`` of a matrix with entries from 1e-200 to 1e-16: its derivative has
    components far below what float64 FD resolves next to huge ones (the sweep's ``tiny``
    band), so no estimate judges it, and the first estimate's 'confirmed' disagreement
    (steps that cross every small entry) is an abstention, not a failure."""
    rng = np.random.default_rng(3)
    a = (10.0 ** rng.uniform(-200, -16, (4, 4))) * rng.choice([-1, 1], (4, 4))
    rep = gradcheck.check(lambda m: torch.linalg.lu(m)[1], a, backend="torch", seed=0)
    fd_checks = [r for r in rep.results if r.kind in (CheckKind.VJP, CheckKind.JVP)]
    assert fd_checks and all(r.status is not Status.FAILED for r in fd_checks)
    assert any("move elements by more than their own size" in r.message for r in fd_checks
               if r.status is Status.INCONCLUSIVE)


@pytest.mark.parametrize(("factor", "below"), [(1.5, np.inf), (1 + 1e-3, 1e-10),
                                               (-1.0, 1e-12), (1 + 1e-3, 1e-6)])
def test_wrong_rules_still_fail(factor, below):
    """Mutants: wrong everywhere, or only at the small elements (the ones the first estimate
    cannot resolve); the scaled estimate disagrees with them, so the failure stands."""
    assert _vjps(_atan2())[0].status is Status.PASSED  # the hand-written rule is right
    got = _vjps(_atan2(factor, below))
    assert got[0].status is Status.FAILED
    # wrong everywhere: the estimate without the crossed elements refutes it first (the
    # scaled estimate is not made); wrong only at the small elements: the scaled one does
    oracle = got[0].details["oracle"]
    if np.isinf(below):
        assert "confirmed where the steps cross no element" in oracle
    else:
        assert "the AD values disagree with it too" in oracle
    assert got[1].status is Status.PASSED  # d/dx is right


def _groups(x, max_groups=None):
    """The grouped mode's groups with the pipeline step's tuning values."""
    return scaled.groups(x, binades=_scaled_estimate.GROUP_BINADES,
                         max_groups=_scaled_estimate.MAX_GROUPS if max_groups is None
                         else max_groups)


def test_groups_by_binades_with_zeros_and_non_finite_elements():
    x = np.array([1e-16, 2e-16, 0.0, 1e-3, -1.5e-3, np.inf, 1e-3 * 2.0**-5])
    s, parts = _groups(x)
    assert s[2] == 1e-16  # a zero moves on the smallest nonzero scale
    assert s[5] == 0.0  # a non-finite element is not moved
    assert [sorted(p.tolist()) for p in parts] == [[0, 1, 2], [6], [3, 4]]


def test_directions_move_each_element_by_at_most_an_eighth_of_its_size():
    x = np.array([1e-12, -3e-12, 0.5, 0.7])
    u = [np.array([0.3, -2.0, 1.0, 0.1]), np.array([-1.0, 0.5, 0.2, 2.0])]
    s, parts = _groups(x)
    D, h0 = scaled.directions(s, parts, u, move=_scaled_estimate._MOVE)
    assert len(parts) == 2 and D.shape == (4, 4)
    assert np.all(D[:2, 2:] == 0) and np.all(D[2:, :2] == 0)  # group-major, disjoint
    moved = np.abs(h0[:, None] * D)
    assert np.all(moved <= 2.0**-3 * np.abs(x)[None, :] * (1 + 1e-15))


def test_groups_widen_to_stay_within_the_cap():
    x = 2.0 ** np.array([-1000, -990, -700, -650, -300, -299, -10, 0], dtype=np.float64)
    s, parts = _groups(x, max_groups=3)
    assert [sorted(p.tolist()) for p in parts] == [[0, 1, 2], [3], [4, 5, 6, 7]]
    exps = np.frexp(s[s > 0])[1]
    w = scaled.width(exps, binades=_scaled_estimate.GROUP_BINADES, max_groups=3)
    assert w == 301  # 2^-300 .. 2^0 in one group; one binade fewer makes four groups
    assert np.unique(scaled._greedy(exps, w - 1)).size == 4


def test_widened_groups_still_judge_and_still_fail_wrong_rules(monkeypatch):
    """Past the cap the groups widen (weights within one differ by up to 2^width): the
    correct rule passes, saying so, and the mutants of the small elements still fail."""
    monkeypatch.setattr(_scaled_estimate, "MAX_GROUPS", 2)
    got = _vjps(torch.atan2)
    assert [r.status for r in got] == [Status.PASSED, Status.PASSED]
    assert "2 group(s) of scales of up to" in got[0].details["oracle"]
    for factor, below in ((-1.0, 1e-12), (1 + 1e-3, 1e-10)):
        bad = _vjps(_atan2(factor, below))
        assert bad[0].status is Status.FAILED
        assert "the AD values disagree with it too" in bad[0].details["oracle"]
        assert bad[1].status is Status.PASSED


def test_made_only_where_the_first_steps_cross_an_element():
    """Elsewhere the scaled directions are the first estimate's again, less sharp: at
    logsumexp of eight inputs at 1e4 it vindicated a (1 + 1e-7) mutant the first estimate
    had failed (tests/numeric/test_second_estimate.py)."""
    for x, u, expected in ((np.full(8, 1e4), np.random.default_rng(1).standard_normal(8), False),
                           (Y.ravel(), np.ones(8), True)):
        s, _ = _groups(x)
        tops = scaled.first_steps(x, [u])
        assert (scaled.crossed(s, tops, [u]) is not None) is expected


def test_its_evaluations_stay_within_the_budget(monkeypatch):
    made = []
    real = _scaled_estimate.estimate

    def recording(prep, pr, j):
        sc = real(prep, pr, j)
        made.append(sc)
        return sc

    monkeypatch.setattr(_scaled_estimate, "estimate", recording)
    assert [r.status for r in _vjps(_atan2(-1.0, 1e-12))] == [Status.FAILED, Status.PASSED]
    assert made and all(not isinstance(sc, str) for sc in made)
    for sc in made:
        spent = sc.estimate.evaluations + (sc.extended.evaluations if sc.extended else 0)
        assert 0 < spent <= _scaled_estimate.POINTS


def _declined(monkeypatch):
    monkeypatch.setattr(_scaled_estimate, "estimate",
                        lambda prep, pr, j: _scaled_estimate.Declined("disabled here"))


def test_a_rule_wrong_where_no_step_crosses_still_fails_without_a_scaled_estimate(monkeypatch):
    """With no scaled estimate to judge, a crossing point abstains only where the disagreement
    lies in the crossed elements: along the probes with those left out (an ordinary table,
    whose steps cross nothing) a rule wrong everywhere disagrees too, and fails."""
    _declined(monkeypatch)
    got = _vjps(_atan2(1.5, np.inf))
    assert got[0].status is Status.FAILED
    assert "confirmed where the steps cross no element" in got[0].details["oracle"]
    confined = _vjps(_atan2(-1.0, 1e-12))  # wrong only at elements the steps cross
    assert confined[0].status is Status.INCONCLUSIVE
    assert "without the crossed elements" in confined[0].message and "agree" in \
        confined[0].message


def test_a_nan_forward_mode_fails_alone_and_does_not_poison_the_reverse_allowance():
    """torch.cumprod at subnormal elements: forward mode gives NaN (it fails, with a finite
    allowance: a mode's non-finite magnitudes do not size the other's terms); reverse mode is
    off by 4e-11 only in the entries of the subnormal elements (division by them), which the
    steps cross and nothing resolves: inconclusive, with the elements it can judge agreeing."""
    x = np.array([0.7, -1.3, 6.2e-314, 2.2e-308, -8.7e-312, 4.9e-324, 1.1, -0.4])
    rep = gradcheck.check(lambda t: torch.cumprod(t, 0), x, backend="torch", seed=0)
    by = {r.kind: r for r in rep.results}
    assert by[CheckKind.JVP].status is Status.FAILED
    assert by[CheckKind.JVP].allowed is not None and np.isfinite(by[CheckKind.JVP].allowed)
    assert by[CheckKind.VJP].status is Status.INCONCLUSIVE
    assert "without the crossed elements" in by[CheckKind.VJP].message
