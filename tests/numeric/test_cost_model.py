"""The cost model of ``docs/cost-model.md``, asserted by counting (never by timing).

A counting adapter (the torch adapter, every evaluation and derivative row counted) runs the
default check and the fast screen at several input sizes: the counts are the documented
formulas and do not depend on n.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import gradcheck
from gradcheck.oracle import fd
from gradcheck.oracle.error_model import DEFAULT_MODEL

torch = pytest.importorskip("torch")

from gradcheck.engines.torch.backend import TorchBackend  # noqa: E402


class _Counting(TorchBackend):
    """The torch adapter, counting the rows of every hook: ``f`` (evaluations of the function,
    a batch counts its rows), ``vjp`` (cotangents through the primary reverse path), ``alt``
    (through the alternative one, ``torch.func.vjp``), ``jvp`` (tangents)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def evaluate(self, fn, args, device):
        self.calls["f"] += 1
        return super().evaluate(fn, args, device)

    def evaluate_batch(self, fn, args, batched, device):
        self.calls["f"] += next(len(a) for a, b in zip(args, batched, strict=True) if b)
        return super().evaluate_batch(fn, args, batched, device)

    def vjp(self, fn, args, diff, cotangents, device):
        self.calls["vjp"] += 1
        return super().vjp(fn, args, diff, cotangents, device)

    def vjp_batch(self, fn, args, diff, cotangents, device, vectorize=False):
        self.calls["vjp"] += len(cotangents[0])
        return super().vjp_batch(fn, args, diff, cotangents, device, vectorize)

    def alternative_vjps_batch(self, fn, args, diff, cotangents, device):
        self.calls["alt"] += len(cotangents[0])
        return super().alternative_vjps_batch(fn, args, diff, cotangents, device)

    def jvp(self, fn, args, diff, tangents, device):
        self.calls["jvp"] += 1
        return super().jvp(fn, args, diff, tangents, device)

    def jvp_batch(self, fn, args, diff, tangents, device, vectorize=False):
        self.calls["jvp"] += len(tangents[0])
        return super().jvp_batch(fn, args, diff, tangents, device, vectorize)


def _f(x):
    return torch.tanh(x) * 2 + torch.sin(x)


def _counts(n: int, **kw) -> tuple[dict[str, int], gradcheck.Report]:
    be = _Counting()
    x = np.random.default_rng(n).standard_normal(n)
    report = gradcheck.check(_f, x, backend=be, **kw)
    return dict(be.calls), report


# the torch adapter evaluates f once more, the first time it vmaps a function with a pattern of
# batched arguments, to verify the batching (TorchBackend._check_vmap_row); a fresh adapter
# per check, so every check here pays it
_VMAP_CHECK = 1


# evaluations of f at the point: one; the determinism check's second evaluation is the forward
# pass of the primary reverse path (the torch adapter gives its outputs: Gradients.primal)
_AT_POINT = 1


def _expected(probes: int, *, cross: bool) -> dict[str, int]:
    """docs/cost-model.md, one input and one output: 1 evaluation at the point (determinism is
    measured against the reverse path's forward pass), 2 x SCREEN_LEVELS for the screen's table
    along the one tangent the probes share; one VJP per probe (cotangent), one JVP; in the
    default the other reverse path (eager vs functional) on the first
    ``ErrorModel.alternative_probes`` probes."""
    out = {"f": _AT_POINT + 2 * fd.SCREEN_LEVELS + _VMAP_CHECK, "vjp": probes, "jvp": 1}
    if cross:
        out["alt"] = min(probes, DEFAULT_MODEL.alternative_probes)
    return out


@pytest.mark.parametrize("n", [10, 1000, 100_000])
def test_default_check_cost_does_not_depend_on_n(n):
    calls, report = _counts(n)
    assert report.passed, report.summary()
    kinds = sorted(r.kind for r in report.results)
    # every comparison the default makes: reverse and forward against FD, forward vs reverse,
    # eager vs functional; the two with FD judged by the screen, none escalated
    assert kinds == ["eager_func", "fwd_rev", "jvp", "vjp"]
    assert {r.details.get("screen") for r in report if r.kind in ("vjp", "jvp")} == {"passed"}
    assert calls == _expected(3, cross=True)


@pytest.mark.parametrize("n", [10, 1000, 100_000])
@pytest.mark.parametrize("probes", [1, 3])
def test_fast_check_cost_does_not_depend_on_n(n, probes):
    calls, report = _counts(n, fast=True, probes=probes)
    assert report.passed, report.summary()
    assert sorted(r.kind for r in report.results) == ["jvp", "vjp"]
    assert calls == _expected(probes, cross=False)


def test_probes_and_modes_scale_the_counts_as_documented():
    calls, _ = _counts(100, probes=5)
    assert calls == _expected(5, cross=True)
    calls, report = _counts(100, modes=("rev",))
    assert sorted(r.kind for r in report.results) == ["eager_func", "vjp"]
    assert calls == {k: v for k, v in _expected(3, cross=True).items() if k != "jvp"}


def test_the_screen_streams_its_table_in_bounded_batches():
    """Each batched call of the screen holds at most fd.BATCH_ELEMENTS elements of points
    (one pair of points per call once n reaches half of it), whatever n."""
    rows: list[int] = []

    def f_batch(X):
        rows.append(len(X))
        return np.sin(X)

    for n in (1000, fd.BATCH_ELEMENTS // 2, fd.BATCH_ELEMENTS):
        rows.clear()
        x = np.random.default_rng(0).standard_normal(n)
        u = np.random.default_rng(1).standard_normal((2, n))
        est = fd.projected_derivatives(f_batch, x, u, u[:, None, :], f0=np.sin(x))
        assert sum(rows) == est.evaluations == 2 * 2 * fd.SCREEN_LEVELS
        assert max(rows) * n <= max(fd.BATCH_ELEMENTS, 2 * n)
        # and it estimates: w . (J u) = sum u_i^2 cos(x_i)
        exact = np.array([(u[p] ** 2) @ np.cos(x) for p in range(2)])
        np.testing.assert_allclose(est.value[:, 0], exact, rtol=1e-10)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_the_full_oracle_split_by_direction_estimates_the_same(monkeypatch):
    """Large inputs run the full oracle one direction at a time (memory of one direction):
    every direction's estimate is what the joint call gives; only retries that a converged
    direction does not need are saved."""
    rng = np.random.default_rng(3)
    x = np.abs(rng.standard_normal(40)) + 1
    x[0] = 1e-3  # log near 0: retried, but only along the direction that moves it
    u = rng.standard_normal((3, 40))
    u[1:, 0] = 0.0

    def f(X):
        return np.log(X) + np.sin(3 * X)

    joint = fd.directional_derivatives(f, x, u, f0=f(x[None])[0])
    monkeypatch.setattr(fd, "SPLIT_ELEMENTS", 0)
    split = fd.directional_derivatives_split(f, x, u, f0=f(x[None])[0])
    for name in ("value", "error", "kink", "curvature", "directions", "noise"):
        np.testing.assert_array_equal(getattr(split, name), getattr(joint, name))
    L = fd.DEFAULT_LEVELS
    assert joint.steps.shape == (3, 2 * L)  # all three retried together
    assert split.evaluations == joint.evaluations - 2 * 2 * L  # two of them need not be
    assert split.steps.shape == joint.steps.shape and split.table.shape == joint.table.shape
    assert np.isnan(split.steps).sum(axis=1).tolist() == [0, L, L]
    finite = np.isfinite(split.steps)
    np.testing.assert_array_equal(split.steps[finite], joint.steps[finite])


def _scaled_backward(delta: float):
    """``_f`` with its backward scaled by ``1 + delta`` (no forward mode: its JVP is
    skipped)."""

    class Scaled(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return _f(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (2 / torch.cosh(x) ** 2 + torch.cos(x)) * (1 + delta)

    return Scaled.apply


@pytest.mark.parametrize("n", [10_000, 100_000])
def test_a_clear_failure_costs_two_projected_tables_more_whatever_n(n):
    """The failing path of a clear failure (docs/error-model.md 2c): the screen's 2 K
    evaluations and two more tables of 2 K, no more VJP (the screen's own VJPs, kept where
    their ratio fails, serve the AD side along them), and localization on a budget (VJP rows
    only, no evaluation of f); never the full oracle's tables."""
    be = _Counting()
    x = np.random.default_rng(n).standard_normal(n)
    report = gradcheck.check(_scaled_backward(1e-7), x, backend=be)
    vjp = next(r for r in report if r.kind == "vjp")
    assert vjp.status is gradcheck.Status.FAILED
    assert vjp.details["failure_path"] == "projected"
    K = fd.SCREEN_LEVELS
    assert be.calls["f"] == _AT_POINT + 3 * 2 * K + _VMAP_CHECK
    rows = vjp.details["localize_rows"]
    # an elementwise f: named from the gradients already made, verified by one VJP row (the
    # named elements and the group of those within their allowance), not a bisection's tens
    # of rows (numeric/bisection.py, the diagonal hypothesis)
    assert vjp.details["localize_hypothesis"] == "verified"
    assert rows == 1
    assert be.calls["vjp"] == 3 + rows  # the screen's 3 probes, then localization's rows


@pytest.mark.parametrize("n", [10_000, 100_000])
def test_a_borderline_check_costs_the_splits_levels_and_one_set_of_ad_paths(n, monkeypatch):
    """A correct ``tan`` whose elements near a pole spoil the screen's table
    (docs/cost-model.md, "A borderline check"): the screen's 2 K evaluations and no AD path,
    then the split's 2 K per level (level 0 again, at most ``LEVELS + 1`` deeper), and the AD
    paths once, on ``P`` probes per group; never the full oracle's tables.  (The per-component
    stage, which ``tan``'s extreme values also run, is left out of the count.)  The probes
    are drawn once (the screen hands its draw to the split), and the groups' joined estimate
    holds one direction per group, not one copy of the input per probe."""
    from gradcheck.numeric import probes, screen, screen_split

    monkeypatch.setattr("gradcheck.numeric.run.per_component", lambda prep: None)
    draws: list[int] = []
    joined: list[tuple[int, int]] = []
    real_draw, real_joined = probes.draw, screen._joined

    def counted_draw(prep, tangents=None):
        draws.append(1)
        return real_draw(prep, tangents)

    def watched_joined(parts):
        out = real_joined(parts)
        joined.append((len(parts), len(out.directions)))
        return out

    monkeypatch.setattr(screen, "draw", counted_draw)
    monkeypatch.setattr(screen_split, "draw", counted_draw)
    monkeypatch.setattr(screen, "_joined", watched_joined)
    be = _Counting()
    x = np.random.default_rng(0).standard_normal(n)
    report = gradcheck.check(lambda a: torch.tan(a), x, backend=be)
    assert report.passed, report.summary()
    assert len(draws) == 1
    assert joined and all(parts == rows for parts, rows in joined)
    vjp = next(r for r in report if r.kind == "vjp")
    assert "screen_split" in vjp.details
    K = fd.SCREEN_LEVELS
    groups = vjp.probes // 3
    levels = (be.calls["f"] - _AT_POINT - _VMAP_CHECK) // (2 * K) - 2  # deeper levels run
    assert be.calls["f"] == _AT_POINT + _VMAP_CHECK + 2 * K * (2 + levels)
    assert 1 <= levels <= sum(screen_split.BANDS)
    assert vjp.details["fd_evaluations"] == 2 * K * (2 + levels)
    assert 2 <= groups <= 1 + len(screen_split.BANDS)
    assert be.calls["vjp"] == 3 * groups  # one call of P rows per group, the split's only
    assert be.calls["jvp"] == groups
    assert be.calls["alt"] == DEFAULT_MODEL.alternative_probes
