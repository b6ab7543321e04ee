"""Localization of dense Jacobians with the 5-point stencil (gradcheck.oracle._stencil).

Correct dense Jacobians (a layer, logsumexp, softmax over everything, a matmul, badly scaled
log and exp) raise no element over its allowance, and the FD Jacobian equals the analytic one
within its error estimate; scaled and single-element corruptions of a dense Jacobian are
reported exactly; where the stencil cannot vouch for a column (a step leaves the domain, a kink
within the stencil, steps too large for the function) the column is recomputed with the
Richardson table instead of being reported from the stencil.
"""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.oracle import _stencil as dj
from gradcheck.oracle import fd
from gradcheck.oracle import jacobian as sj

_RNG = np.random.default_rng(5)
# weights bounded away from 0: an element of 1e-7 would carry a 1e-7 relative corruption far
# below any FD's resolution (eps |f| / h), and the scaled-mutant test asks for every element
_W = _RNG.choice((-1.0, 1.0), (8, 60)) * _RNG.uniform(0.3, 1.0, (8, 60)) / np.sqrt(60)
_B = _RNG.standard_normal(8)
_M = _RNG.standard_normal((6, 40))
_K = _RNG.standard_normal((8, 6))


def _layer(X):
    return np.tanh(X @ _W.T + _B)


def _layer_jac(x):
    return (1 - np.tanh(_W @ x + _B) ** 2)[:, None] * _W


def _lse(X):
    c = X.max(axis=1, keepdims=True)
    return (c + np.log(np.exp(X - c).sum(axis=1, keepdims=True)))


def _softmax(X):
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _softmax_jac(x):
    p = _softmax(x[None])[0]
    return np.diag(p) - np.outer(p, p)


def _matmul(X):  # x reshaped (5, 8) times a fixed (8, 6): every output has 8 inputs; the
    # rows of X are coupled through a sum of all inputs, which makes the pattern dense
    return (X.reshape(len(X), 5, 8) @ _K).reshape(len(X), -1) + X.sum(axis=1, keepdims=True)


def _matmul_jac(x):
    return np.kron(np.eye(5), _K.T) + 1.0


def _log_small(X):  # badly scaled: x ~ 1e-3, the stencil's steps (2^-6) leave the domain
    return np.log(X) @ _M.T


def _log_small_jac(x):
    return _M / x[None, :]


def _exp_large(X):  # badly scaled: exp at x ~ 30, derivatives ~1e13
    return np.exp(X) @ _M.T


def _exp_large_jac(x):
    return _M * np.exp(x)[None, :]


CASES = {  # name: (f, analytic Jacobian, point, how the FD Jacobian was obtained)
    "layer": (_layer, _layer_jac, _RNG.standard_normal(60), "5-point stencil"),
    "logsumexp": (_lse, lambda x: _softmax(x[None]), _RNG.standard_normal(80), "5-point stencil"),
    "softmax": (_softmax, _softmax_jac, _RNG.standard_normal(30), "5-point stencil"),
    "matmul": (_matmul, _matmul_jac, _RNG.standard_normal(40), "5-point stencil"),
    "log_small": (_log_small, _log_small_jac, _RNG.uniform(1e-3, 2e-3, 40), "recomputed"),
    "exp_large": (_exp_large, _exp_large_jac, _RNG.uniform(29.0, 31.0, 40), "recomputed"),
}


def _estimate(name: str, J_ad: np.ndarray | None = None, seed: int = 0) -> tuple:
    f, jac, x, _ = CASES[name]
    J = jac(x)
    est = sj.fd_jacobian(f, x, J if J_ad is None else J_ad, rows=slice(0, J.shape[0]),
                         f0=f(x[None])[0], seed=seed)
    return est, J


def _over(est: sj.FDJacobian, J_ad: np.ndarray) -> set[tuple[int, int]]:
    with np.errstate(all="ignore"):
        r = np.abs(J_ad - est.value) / np.maximum(sj._allowed(est.error, est.value, J_ad), 1e-300)
    return {tuple(int(t) for t in e) for e in np.argwhere(~(r <= 1.0))}


@pytest.mark.parametrize("name", sorted(CASES))
def test_correct_dense_jacobians_have_no_element_over(name):
    est, J = _estimate(name)
    assert "5-point stencil per column (dense pattern)" in est.how, est.how
    if CASES[name][3] == "recomputed":  # the stencil could not vouch for these columns
        assert f"{J.shape[1]} of {J.shape[1]} columns recomputed" in est.how, est.how
    else:
        assert "recomputed" not in est.how, est.how
        # the stencil, the noise points, and the spot-checked columns' second stencil
        assert est.evaluations == 5 * J.shape[1] + 6 * dj._NOISE_DIRECTIONS + (
            5 * dj._SPOT_COLUMNS)
    assert _over(est, J) == set()
    # the FD Jacobian equals the analytic one within its (raw, uninflated) error estimate, up
    # to the analytic Jacobian's own rounding
    assert np.all(np.abs(est.value - J) <= est.error + 8 * fd.EPS64 * np.abs(J)), name


def test_the_estimate_covers_the_true_error_and_is_not_vacuous():
    """Per function, the largest |FD - analytic| / estimate (<= 1: covered) and the median
    relative estimate (small: the localization can still see a 1e-7 relative error)."""
    for name in ("layer", "logsumexp", "softmax", "matmul"):
        est, J = _estimate(name)
        ratio = np.abs(est.value - J) / np.maximum(est.error + 8 * fd.EPS64 * np.abs(J), 1e-300)
        assert ratio.max() <= 1.0, (name, ratio.max())
        assert np.median(est.error / np.abs(J)) < 1e-9, name


@pytest.mark.parametrize("name", ["layer", "logsumexp", "softmax", "matmul", "exp_large"])
def test_a_scaled_dense_jacobian_is_reported_everywhere(name):
    J = CASES[name][1](CASES[name][2])
    est, _ = _estimate(name, J_ad=J * (1 + 1e-7))
    assert _over(est, J * (1 + 1e-7)) == {tuple(int(t) for t in e) for e in np.argwhere(J != 0)}


@pytest.mark.parametrize("name", ["layer", "logsumexp", "softmax", "matmul", "log_small"])
def test_single_element_corruptions_are_reported_exactly(name):
    J = CASES[name][1](CASES[name][2])
    rng = np.random.default_rng(len(name))
    picks = {(int(rng.integers(J.shape[0])), int(rng.integers(J.shape[1]))) for _ in range(3)}
    bad = J.copy()
    for r, c in picks:
        bad[r, c] *= 1 + 1e-6 * rng.choice((-1.0, 1.0))
    est, _ = _estimate(name, J_ad=bad)
    assert _over(est, bad) == picks


def test_a_kink_within_the_stencil_is_recomputed_not_reported():
    """relu(W x + b) with one pre-activation 3e-3 from its kink: the stencil's steps along the
    columns with |W_rc| of order one cross it; those columns go to the table, and the correct
    Jacobian raises no element."""
    W = np.random.default_rng(1).standard_normal((4, 30))
    x = np.random.default_rng(2).standard_normal(30)
    b = -W @ x + np.array([3e-3, 1.0, -1.0, 2.0])

    def relu_layer(X):
        return np.maximum(X @ W.T + b, 0.0)

    J = (W @ x + b > 0)[:, None] * W
    est = sj.fd_jacobian(relu_layer, x, J, rows=slice(0, 4), f0=relu_layer(x[None])[0], seed=0)
    assert "columns recomputed with the Richardson table" in est.how, est.how
    assert _over(est, J) == set()


def test_a_failed_spot_check_recomputes_every_column():
    """A function the stencil cannot see: a ripple ``A sin(4 pi (x - x0) / h)`` that vanishes
    at every node ``x0 + s h`` of the stencil (``s = +-1/2, +-1, 2``), so the stencil agrees
    with itself exactly and misses the ripple's slope ``4 pi A / h``.  The spot check's stencil
    at a quarter of the step has nodes between the zeros, disagrees, and the stencil's error
    model is not trusted anywhere: every column comes from the table."""
    f, jac, x, _ = CASES["layer"]
    h = fd.initial_step(x, np.ones(1)) * (dj._H_FACTOR / fd._H0_FACTOR)
    K = np.random.default_rng(3).standard_normal((8, x.size))

    def rippled(X):
        return f(X) + 1e-9 * np.sin(4 * np.pi * (X - x) / h) @ K.T

    J = jac(x) + 1e-9 * 4 * np.pi / h * K
    calls = []

    def table(cols):  # a stand-in for the Richardson table: the analytic columns
        calls.append(cols.copy())
        return J[:, cols].T, np.full((cols.size, J.shape[0]), 1e-15), 16 * cols.size

    est = dj.stencil_jacobian(rippled, x, rippled(x[None])[0], table=table)
    assert "failed: every column recomputed" in est.how, est.how
    assert np.array_equal(np.sort(np.concatenate(calls)), np.arange(x.size))
    np.testing.assert_array_equal(est.value, J)
    assert est.recomputed == x.size
    # without the ripple the same stencil passes its spot check
    plain = dj.stencil_jacobian(f, x, f(x[None])[0], table=table)
    assert "failed" not in plain.how and plain.recomputed == 0, plain.how
