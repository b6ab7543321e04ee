"""Performance invariants, measured by counting work (never by timing).

* A projected check, and the fast screen, cost the same number of function evaluations and
  derivative calls whatever the input size.
* Localizing a failure (full Jacobian) costs a number of evaluations linear in the input size
  for a dense Jacobian, and independent of it for an elementwise one (column compression).
* Compiled JAX transforms are cached per function: checking the same function again does not
  trace it again, and two different functions never share a cache entry.
* The batched derivative hooks return what the per-row calls return, and the faster Richardson
  extrapolation picks exactly the candidates the plain argmin formulation picks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest

import gradcheck
from gradcheck.engines.numpy.backend import NumpyFunction
from gradcheck.numeric import scaled_estimate as _scaled_estimate
from gradcheck.oracle import fd


class _Counted:
    """A NumPy sin (``dense=True``: sin(x) + sum(x), a dense Jacobian) with hand-derived VJP/JVP
    that counts its calls.

    The numpy backend evaluates batches row by row, so ``forward`` counts evaluation points.
    """

    def __init__(self, scale: float = 1.0, dense: bool = False) -> None:
        self.forward = self.vjp = self.jvp = 0
        self.scale = scale  # 1 + delta on the VJP: a mutant when != 1
        self.dense = dense

    def function(self) -> NumpyFunction:
        k = 1.0 if self.dense else 0.0

        def forward(x):
            self.forward += 1
            return np.sin(x) + k * np.sum(x)

        def vjp(args, cts):
            self.vjp += 1
            return [(cts[0] * np.cos(args[0]) + k * np.sum(cts[0])) * self.scale]

        def jvp(args, tans):
            self.jvp += 1
            return [np.cos(args[0]) * tans[0] + k * np.sum(tans[0])]

        return NumpyFunction(forward, vjp, jvp, name="counted_sin")


def _counts(n: int, scale: float = 1.0, dense: bool = False, **kw
            ) -> tuple[_Counted, gradcheck.Report]:
    c = _Counted(scale, dense)
    x = np.random.default_rng(n).standard_normal(n)
    report = gradcheck.check(c.function(), x, backend="numpy", **kw)
    return c, report


def test_projected_check_cost_does_not_depend_on_n():
    seen = set()
    for n in (3, 64, 1000):
        c, report = _counts(n)
        assert report.passed, report.summary()
        seen.add((c.forward, c.vjp, c.jvp))
    # the default check screens first (docs/cost-model.md): 2 evaluations at the point (the
    # second measures determinism) + 2 signs x 4 levels of the projected table along the one
    # tangent the 3 probes share; one VJP per probe, one JVP (the numpy adapter has no second
    # reverse path); the full oracle's 3 x (6 noise points + 2 x 7 levels) run only where the
    # screen cannot vouch
    assert seen == {(2 + 2 * fd.SCREEN_LEVELS, 3, 1)}


def test_fast_screen_cost_does_not_depend_on_n():
    """The screen (``fast=True``): 2 evaluations at the point (the second measures determinism)
    + 2 x 4 levels along the tangent the probes share, one VJP per probe and one JVP, and
    nothing else when it passes (no noise points, no second reverse path)."""
    seen = set()
    for n in (64, 1000, 5000):
        c, report = _counts(n, fast=True)
        assert report.passed, report.summary()
        assert {r.details.get("fast_screen") for r in report} == {"passed"}
        seen.add((c.forward, c.vjp, c.jvp))
    assert seen == {(2 + 2 * fd.SCREEN_LEVELS, 3, 1)}


@contextlib.contextmanager
def _no_scaled_estimate() -> Iterator[None]:
    saved = _scaled_estimate.estimate
    _scaled_estimate.estimate = lambda prep, pr, j: _scaled_estimate.Declined("off here")
    try:
        yield
    finally:
        _scaled_estimate.estimate = saved


def _localization_costs(dense: bool) -> dict[int, tuple[int, int]]:
    costs = {}
    for n in (8, 16, 32):
        # without the scaled estimate before the verdict: its cost goes with the groups of
        # scales of the data drawn, not with n (tests/numeric/test_scaled_estimate.py bounds it)
        with _no_scaled_estimate():
            c, report = _counts(n, scale=1 + 1e-6, dense=dense, modes=("rev",))
        (vjp,) = [r for r in report.results if r.kind == "vjp"]
        assert vjp.status.value == "failed" and vjp.worst, vjp.message
        assert vjp.details["localized"] == f"full Jacobian {n}x{n}"
        costs[n] = (c.forward, c.vjp)
    return costs


def test_localization_cost_of_a_dense_jacobian_is_linear_in_n():
    costs = _localization_costs(dense=True)
    fwd_steps = [costs[16][0] - costs[8][0], costs[32][0] - costs[16][0]]
    vjp_steps = [costs[16][1] - costs[8][1], costs[32][1] - costs[16][1]]
    # FD Jacobian: a 5-point stencil per column (the noise points, 6 per direction along 3
    # directions, and the second stencil of the 8 spot-checked columns do not grow with n;
    # nothing is recomputed for this smooth f); AD Jacobian: one VJP per output element
    assert fwd_steps == [5 * 8, 5 * 16]
    assert vjp_steps == [8, 16]


def test_localization_cost_of_an_elementwise_jacobian_does_not_depend_on_n():
    costs = _localization_costs(dense=False)
    fwd_steps = [costs[16][0] - costs[8][0], costs[32][0] - costs[16][0]]
    vjp_steps = [costs[16][1] - costs[8][1], costs[32][1] - costs[16][1]]
    # compressed FD Jacobian: one colour group, evaluated with two random weightings (the
    # failure is verified before it is attributed), 6 + 2 x 5 evaluations each; the AD Jacobian
    # still takes one VJP per output element
    assert fwd_steps == [0, 0]
    assert vjp_steps == [8, 16]
    with _no_scaled_estimate():
        _, report = _counts(32, scale=1 + 1e-6, modes=("rev",))
    (vjp,) = [r for r in report.results if r.kind == "vjp"]
    assert vjp.details["fd_evaluations"] == 2 * (6 + 10)
    assert vjp.details["elements_over"] == 32


def _traced_chain(counter: list[int]):
    import jax.numpy as jnp

    def chain(x):
        counter[0] += 1  # runs once per trace (or per eager call)
        return jnp.sin(x) * jnp.exp(-x * x) + jnp.tanh(x) ** 2

    return chain


def test_second_check_of_the_same_function_does_not_trace_again():
    pytest.importorskip("jax")
    counter = [0]
    chain = _traced_chain(counter)
    x = np.random.default_rng(0).standard_normal(50)
    assert gradcheck.check(chain, x, backend="jax").passed
    first = counter[0]
    assert first > 0
    report = gradcheck.check(chain, x + 0.25, backend="jax", seed=3)
    assert report.passed and counter[0] == first


def _scaled_vjp(delta: float):
    """Same code object for every delta: only the closure differs."""
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (jnp.sin(x), x), lambda x, ct: (ct * jnp.cos(x) * (1 + delta),))
    return f


def test_functions_with_the_same_code_never_share_compiled_transforms():
    pytest.importorskip("jax")
    x = np.random.default_rng(1).standard_normal(20)
    assert gradcheck.check(_scaled_vjp(0.0), x, backend="jax", modes=("rev",)).passed
    report = gradcheck.check(_scaled_vjp(1e-6), x, backend="jax", modes=("rev",))
    assert [r.status.value for r in report.results if r.kind == "vjp"] == ["failed"]


def _torch_backend():
    pytest.importorskip("torch")
    from gradcheck.backends.registry import get_backend

    return get_backend("torch")


def _two_outputs(x, w):
    import torch

    return torch.tanh(x @ w), (x * x).sum()


def _not_vmappable(x, w):
    import torch

    scale = 1.0 if float(x.sum().item()) > -1e9 else 2.0  # .item(): vmap cannot batch it
    return torch.tanh(x @ w) * scale, (x * x).sum()


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("fn", [_two_outputs, _not_vmappable])
def test_batched_hooks_match_per_row_calls(fn, vectorize):
    be = _torch_backend()
    rng = np.random.default_rng(2)
    args = [rng.standard_normal((3, 4)), rng.standard_normal((4, 2))]
    outs = be.evaluate(fn, args, "cpu")
    B = 3
    cts = [rng.standard_normal((B,) + np.shape(o)) for o in outs]
    tans = [rng.standard_normal((B,) + a.shape) for a in args]
    batched = be.vjp_batch(fn, args, [0, 1], cts, "cpu", vectorize=vectorize)
    forward = be.jvp_batch(fn, args, [0, 1], tans, "cpu", vectorize=vectorize)
    for b in range(B):
        rows = be.vjp(fn, args, [0, 1], [c[b] for c in cts], "cpu")
        for k in range(2):
            np.testing.assert_allclose(batched[k][b], rows[k], rtol=1e-13, atol=1e-14)
        cols = be.jvp(fn, args, [0, 1], [t[b] for t in tans], "cpu")
        for k in range(2):
            np.testing.assert_allclose(forward[k][b], cols[k], rtol=1e-13, atol=1e-14)
    if fn is _two_outputs:
        alt = be.alternative_vjps_batch(fn, args, [0, 1], cts, "cpu")["torch.func.vjp"]
        for k in range(2):
            np.testing.assert_allclose(alt[k], batched[k], rtol=1e-13, atol=1e-14)


def _richardson_by_argmin(d, rounding, base):
    """The plain formulation: stack every candidate, take the argmin of the error."""
    K = d.shape[1]
    vals, errs, prev, amp = [], [], d, 1.0
    for j in range(1, K):
        w = base**j - 1.0
        cur = prev[:, 1:] + (prev[:, 1:] - prev[:, :-1]) / w
        amp *= (base**j + 1.0) / w
        prev_col, prev = prev[:, 1:], cur
        if cur.shape[1] < 2:  # a single entry cannot confirm convergence: never a candidate
            break
        trunc = np.abs(cur - prev_col)
        stab = np.abs(np.diff(cur, axis=1))
        trunc[:, 1:] = np.maximum(trunc[:, 1:], stab)
        trunc[:, 0] = np.maximum(trunc[:, 0], stab[:, 0])
        vals.append(cur)
        errs.append(trunc + amp * rounding[:, j:])
    v, e = np.concatenate(vals, axis=1), np.concatenate(errs, axis=1)
    e = np.where(np.isfinite(v) & np.isfinite(e), e, np.inf)
    best = np.argmin(e, axis=1)[:, None, :]
    value = np.take_along_axis(v, best, axis=1)[:, 0]
    error = np.take_along_axis(e, best, axis=1)[:, 0]
    return np.where(np.isfinite(error), value, np.nan), error


@pytest.mark.parametrize("base", [4.0, 2.0])
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_running_minimum_richardson_is_bit_identical(base):
    rng = np.random.default_rng(5)
    h = 0.125 * 0.5 ** np.arange(7)
    x = rng.standard_normal(300)
    d = (np.sin(x + h[:, None]) - np.sin(x - h[:, None])) / (2 * h[:, None])
    d = np.stack([d, d * 3.0, d + rng.standard_normal(d.shape) * 1e-9])
    d[0, :2, :10] = np.nan  # steps that left the domain
    d[1, :, 20] = np.inf
    d[2, 3, 30:40] = d[2, 4, 30:40]  # exact ties between candidates
    rounding = 1e-16 * np.abs(d) / h[None, :, None]
    got = fd._richardson(d, rounding, base)
    want = _richardson_by_argmin(d, rounding, base)
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w, equal_nan=True)
