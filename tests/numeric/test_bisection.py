"""Localization on a budget (:mod:`gradcheck.numeric.bisection`): a failed check whose
Jacobian block is too large to build names its worst output elements along the tangent the
oracle already differentiated; a correct twin is not localized (it passes).

Most cases shrink ``localize_max_columns`` so that a small block takes the budgeted path (the
NumPy backend, hand-written rules); one case runs the default model at n = 1e6 with torch."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import gradcheck
from gradcheck import NumpyFunction
from gradcheck.numeric import bisection, projected_failure
from gradcheck.oracle.error_model import ErrorModel
from tests.support.torch_rules import backward_wrong_at

N = 5000
X = np.random.default_rng(3).standard_normal(N)
SMALL_BLOCKS = ErrorModel(localize_max_columns=64, localize_max_elements=64 * 64)


def _sin(wrong: dict[int, float], mode: str = "rev") -> NumpyFunction:
    """``sin`` with its VJP (``mode="rev"``) or JVP (``"fwd"``) scaled by ``1 + delta`` at the
    elements ``wrong`` (element -> delta); the other mode correct."""

    def vjp(a, c):
        g = c[0] * np.cos(a[0])
        if mode == "rev":
            for e, d in wrong.items():
                g[..., e] *= 1 + d
        return [g]

    def jvp(a, t):
        y = np.cos(a[0]) * t[0]
        if mode == "fwd":
            for e, d in wrong.items():
                y[..., e] *= 1 + d
        return [y]

    return NumpyFunction(np.sin, vjp, jvp, name="sin")


def _vjp(report: gradcheck.Report, kind: str = "vjp") -> gradcheck.CheckResult:
    return next(r for r in report if r.kind == kind)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_the_wrong_elements_are_named_worst_first(mode: str) -> None:
    wrong = {4321: 1e-3, 17: 1e-5}
    report = gradcheck.check(_sin(wrong, mode), X, backend="numpy", modes=(mode,),
                             error_model=SMALL_BLOCKS)
    r = _vjp(report, "vjp" if mode == "rev" else "jvp")
    assert r.status is gradcheck.Status.FAILED
    assert r.localized is not None and r.localized.startswith(bisection.PREFIX)
    assert [w.index for w in r.worst] == [(4321,), (17,)]
    for w in r.worst:  # each element's own values: the AD one off by its delta
        delta = wrong[w.index[0]]
        assert w.actual == pytest.approx(w.expected * (1 + delta), rel=1e-9)
        assert abs(w.actual - w.expected) > w.allowed
    if mode == "rev":  # two paths from the root, branching 8 over 5000 elements
        assert r.details["localize_rows"] <= 2 * bisection.BRANCH * 5
    message = gradcheck.format_failure(report)
    assert "output 0[4321] along the tangent" in message


def test_the_correct_twin_passes_and_is_not_localized() -> None:
    report = gradcheck.check(_sin({}), X, backend="numpy", error_model=SMALL_BLOCKS)
    assert report.passed, gradcheck.format_failure(report)
    assert all(r.localized is None and not r.worst for r in report)


def test_an_error_on_every_element_names_elements_that_are_over() -> None:
    """A rule off by 1e-3 everywhere: the elements named are each over their own allowance
    (the search stops at :data:`~gradcheck.numeric.bisection.WORST`)."""
    f = _sin({e: 1e-3 for e in range(N)})
    r = _vjp(gradcheck.check(f, X, backend="numpy", modes=("rev",),
                             error_model=SMALL_BLOCKS))
    assert r.status is gradcheck.Status.FAILED
    assert len(r.worst) == bisection.WORST
    assert all(abs(w.actual - w.expected) > w.allowed for w in r.worst)
    assert r.details["localize_rows"] <= bisection.BUDGET_ROWS


def test_the_budget_bounds_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a budget smaller than one path from the root to an element, nothing is named and
    the result says why (the bisection alone: the diagonal hypothesis off)."""
    monkeypatch.setattr(bisection, "BUDGET_ROWS", 8)
    monkeypatch.setattr(bisection, "hypothesis_applies", lambda *a: False)
    f = _sin({2500: 1e-3})
    r = _vjp(gradcheck.check(f, X, backend="numpy", modes=("rev",),
                             error_model=SMALL_BLOCKS))
    assert r.status is gradcheck.Status.FAILED
    assert r.worst == ()
    assert r.localized is not None and "budget spent" in r.localized


def test_a_scalar_output_is_compared_whole() -> None:
    """``sum(sin(x))``: one output element, so the search is that element along the tangent
    (one VJP row); a wrong rule fails and the element is named with its values."""

    def vjp(a, c):
        g = c[0] * np.cos(a[0])
        g[10] *= 1 + 1e-3
        return [g]

    f = NumpyFunction(lambda x: np.sum(np.sin(x)), vjp,
                      lambda a, t: [np.cos(a[0]) @ t[0]], name="sumsin")
    r = _vjp(gradcheck.check(f, X, backend="numpy", modes=("rev",), error_model=SMALL_BLOCKS))
    assert r.status is gradcheck.Status.FAILED
    assert [w.index for w in r.worst] == [()]
    assert r.details["localize_rows"] == 1


def test_split_covers_the_range_in_contiguous_groups() -> None:
    assert bisection._split(0, 20, 8) == [(0, 2), (2, 5), (5, 8), (8, 10), (10, 12),
                                          (12, 15), (15, 18), (18, 20)]
    assert bisection._split(3, 6, 8) == [(3, 4), (4, 5), (5, 6)]


def torch_sin_wrong_at(torch, bad: dict[int, float]):
    """A torch ``sin`` whose backward is off by ``1 + delta`` at each element of ``bad``."""

    class Sin(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.sin(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            d = torch.cos(x) * g
            for e, delta in bad.items():
                d[..., e] *= 1 + delta
            return d

    return Sin.apply


@pytest.mark.slow
def test_a_million_inputs_name_the_wrong_elements() -> None:
    """The full path at n = 1e6 (the full Jacobian would have 1e12 elements; the projected
    failing path turned off, its own test is in test_projected_failure.py): a torch ``sin``
    whose backward is wrong at two elements is failed and both are named."""
    torch = pytest.importorskip("torch")
    n = 10**6
    bad = {n // 3: 1e-3, n - 7: 1e-4}
    x = np.random.default_rng(0).standard_normal(n)
    report = gradcheck.check(torch_sin_wrong_at(torch, bad), x, backend="torch",
                             modes=("rev",), probes=1,
                             error_model=ErrorModel(projected_failure_margin=1e300))
    r = _vjp(report)
    assert r.status is gradcheck.Status.FAILED
    assert r.details.get("failure_path") != projected_failure.PATH
    assert r.localized is not None and r.localized.startswith(bisection.PREFIX)
    assert [w.index for w in r.worst] == [(n // 3,), (n - 7,)]


@pytest.mark.parametrize("loop_rows", [bisection.BRANCH, 1])
def test_large_inputs_loop_the_rows_and_find_the_same_elements(
        monkeypatch: pytest.MonkeyPatch, loop_rows: int) -> None:
    """Where not even two rows fit one vectorized call (``CALL_ELEMENTS``), the rows are
    looped: one call of up to ``LOOP_ELEMENTS`` (one forward pass, one backward pass per
    row), down to one row per call: the same search, the same rows (a cumulative sum, wrong
    at one element: the diagonal hypothesis is rejected and the groups are bisected)."""
    from gradcheck.backends.guarded import GuardedBackend

    f = _cumsum({3210: 1e-3})
    first = _vjp(gradcheck.check(f, X, backend="numpy", modes=("rev",),
                                 error_model=SMALL_BLOCKS))
    assert "bisected" in str(first.localized) and first.worst[0].index == (3210,)
    calls: list[tuple[int, bool]] = []
    real = GuardedBackend.vjp_batch

    def recorded(self, fn, args, diff, cotangents, device, vectorize=False):
        calls.append((len(cotangents[0]), vectorize))
        return real(self, fn, args, diff, cotangents, device, vectorize=vectorize)

    monkeypatch.setattr(GuardedBackend, "vjp_batch", recorded)
    monkeypatch.setattr(bisection, "CALL_ELEMENTS", N)
    monkeypatch.setattr(bisection, "LOOP_ELEMENTS", N * loop_rows)
    again = _vjp(gradcheck.check(f, X, backend="numpy", modes=("rev",),
                                 error_model=SMALL_BLOCKS))
    assert again.worst == first.worst
    assert again.details["localize_rows"] == first.details["localize_rows"]
    looped = [c for c in calls if not c[1]]
    assert looped and max(rows for rows, _ in looped) == loop_rows
    # every row the search took, the hypothesis's verifying row (one row: never vectorized)
    assert sum(rows for rows, _ in calls) == first.details["localize_rows"]
    assert sum(rows for rows, _ in looped) == first.details["localize_rows"]


# the diagonal hypothesis: elements named from the gradient, verified; rejected (and the
# bisection run) where the Jacobian is not diagonal


@pytest.mark.parametrize("projected", [True, False])
def test_a_diagonal_jacobian_is_named_from_the_gradient_in_few_rows(projected: bool) -> None:
    """An elementwise ``sin`` wrong at two elements: the gradient's elements name them, both
    verified by one VJP row (random weights) that also gives the group of every other
    element, within its allowance.  The projected failing path hands over the gradients it
    made (1 row in all); the full path does not (1 more row for the gradient): not a
    bisection's ~30."""
    model = SMALL_BLOCKS if projected else ErrorModel(
        localize_max_columns=64, localize_max_elements=64 * 64, projected_failure_margin=1e300)
    r = _vjp(gradcheck.check(_sin({4321: 1e-3, 17: 1e-5}), X, backend="numpy",
                             modes=("rev",), error_model=model))
    assert r.status is gradcheck.Status.FAILED
    assert (r.details.get("failure_path") == projected_failure.PATH) is projected
    assert r.details["localize_hypothesis"] == "verified"
    assert [w.index for w in r.worst] == [(4321,), (17,)]
    for w in r.worst:  # each element's own values: the AD one off by its delta
        delta = {4321: 1e-3, 17: 1e-5}[w.index[0]]
        assert w.actual == pytest.approx(w.expected * (1 + delta), rel=1e-9)
    rows = 1 if projected else 2
    assert r.details["localize_rows"] == rows
    assert r.localized is not None and r.localized.endswith(
        f"verified, {rows} VJP row{'' if rows == 1 else 's'}")


def test_an_error_on_every_element_is_named_from_the_gradient() -> None:
    """Every element over its allowance (but the few the screen's steps cross, left out of
    the tangent): the worst five verified together with the elements not over, one row."""
    r = _vjp(gradcheck.check(_sin({e: 1e-3 for e in range(N)}), X, backend="numpy",
                             modes=("rev",), error_model=SMALL_BLOCKS))
    assert r.details["localize_hypothesis"] == "verified"
    assert len(r.worst) == bisection.WORST
    assert r.details["localize_rows"] == 1


def _cumsum(wrong: dict[int, float]) -> NumpyFunction:
    """``cumsum`` (a lower-triangular Jacobian of ones) whose VJP weighs output element ``r``
    by ``1 + delta`` for each ``r -> delta`` of ``wrong``: the AD ``(J u)_r`` off by delta."""

    def vjp(a, c):
        w = np.array(c[0], dtype=np.float64)
        for e, d in wrong.items():
            w[e] *= 1 + d
        return [np.cumsum(w[::-1])[::-1]]

    return NumpyFunction(np.cumsum, vjp, lambda a, t: [np.cumsum(t[0])], name="cumsum")


def _matvec(wrong: dict[int, float], n: int = 600) -> tuple[NumpyFunction, np.ndarray]:
    """``A x`` for a dense square ``A`` whose VJP weighs row ``r`` by ``1 + delta``."""
    A = np.random.default_rng(5).standard_normal((n, n)) / np.sqrt(n)

    def vjp(a, c):
        w = np.array(c[0], dtype=np.float64)
        for e, d in wrong.items():
            w[e] *= 1 + d
        return [A.T @ w]

    return NumpyFunction(lambda x: A @ x, vjp, lambda a, t: [A @ t[0]], name="matvec"), A


@pytest.mark.parametrize("projected", [True, False])
@pytest.mark.parametrize("which", ["cumsum", "matvec"])
def test_a_non_diagonal_jacobian_rejects_the_hypothesis_and_is_bisected(
        which: str, projected: bool) -> None:
    """One wrong output element of a cumulative sum, one wrong row of a dense matrix-vector
    product: the gradient's elements are not the output elements' derivatives, and the
    bisection names the wrong element.  On the projected failing path, which hands over its
    probes' gradients, they show it without a row (``g_r / v_r`` differs between probes at
    most elements); on the full path, which does not, the verifying row rejects it."""
    if which == "cumsum":
        bad, x = 3210, X
        f = _cumsum({bad: 1e-3})
    else:
        bad, x = 321, X[:600]
        f, _ = _matvec({bad: 1e-3})
    model = SMALL_BLOCKS if projected else ErrorModel(
        localize_max_columns=64, localize_max_elements=64 * 64, projected_failure_margin=1e300)
    r = _vjp(gradcheck.check(f, x, backend="numpy", modes=("rev",), error_model=model))
    assert r.status is gradcheck.Status.FAILED
    assert (r.details.get("failure_path") == projected_failure.PATH) is projected
    assert r.details["localize_hypothesis"].startswith(
        "rejected: the probes' gradients are not a diagonal Jacobian's" if projected else
        "rejected: the named elements' rows of J are not what the gradient gives them as a "
        "diagonal Jacobian")
    assert r.localized is not None and "bisected" in r.localized
    assert r.worst[0].index == (bad,)
    assert abs(r.worst[0].actual - r.worst[0].expected) > r.worst[0].allowed
    assert r.details["localize_rows"] <= bisection.BUDGET_ROWS


@pytest.mark.parametrize("which", ["cumsum", "matvec"])
def test_the_correct_non_diagonal_twins_pass(which: str) -> None:
    f, x = (_cumsum({}), X) if which == "cumsum" else (_matvec({})[0], X[:600])
    report = gradcheck.check(f, x, backend="numpy", modes=("rev",), error_model=SMALL_BLOCKS)
    assert report.passed, gradcheck.format_failure(report)
    assert all(r.localized is None and not r.worst for r in report)



def test_two_coupled_elements_reject_the_hypothesis() -> None:
    """``sin(x)`` plus a coupling of two elements (``y_a += x_b / 2``, ``y_b += x_a / 2``),
    its VJP wrong at output ``a``: the two named elements' rows of ``J`` are not diagonal,
    which one VJP row with distinct random weights on them shows (equal weights would not:
    the 2 x 2 block's column sums are what the gradient holds); the bisection names ``a``."""
    ia, ib = 1234, 1235

    def fn(x):
        y = np.sin(x)
        y[..., ia] += x[..., ib] / 2
        y[..., ib] += x[..., ia] / 2
        return y

    def vjp(a, c):
        w = np.array(c[0], dtype=np.float64)
        w[..., ia] *= 1 + 1e-3
        g = w * np.cos(a[0])
        g[..., ib] += w[..., ia] / 2
        g[..., ia] += w[..., ib] / 2
        return [g]

    def jvp(a, t):
        y = np.cos(a[0]) * t[0]
        y[..., ia] += t[0][..., ib] / 2
        y[..., ib] += t[0][..., ia] / 2
        return [y]

    r = _vjp(gradcheck.check(NumpyFunction(fn, vjp, jvp, name="coupled"), X, backend="numpy",
                             modes=("rev",), error_model=SMALL_BLOCKS))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["localize_hypothesis"].startswith("rejected: the named elements' rows")
    assert r.worst[0].index == (ia,)
    assert r.worst[0].actual == pytest.approx(r.worst[0].expected * (1 + 1e-3), rel=1e-6)


# the transposition: where the backend differentiates its own VJP (order 2), one VJP of it
# along the tangent gives every output element's (J u)_r; verified, else the bisection runs


@pytest.fixture
def transpose_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transposition tried however few the output elements (matvec has 600)."""
    monkeypatch.setattr(bisection, "TRANSPOSE_ELEMENTS", 1)


def _with_order2(f: NumpyFunction, transposed: Callable[[np.ndarray], np.ndarray]
                 ) -> NumpyFunction:
    """``f`` whose VJP carries its own rules as a function of ``(x, c)``: linear in ``c``,
    so its VJP w.r.t. ``c`` along ``t`` is ``transposed(t)`` (what ``J u`` the VJP implies;
    zero w.r.t. ``x``: the functions here are linear)."""
    inner = f.vjp

    def forward(x, c):
        return tuple(inner([x], [c]))

    def vjp_of_vjp(xs, cts):
        return [np.zeros_like(xs[0]), transposed(cts[0])]

    return NumpyFunction(f.forward, NumpyFunction(forward, vjp_of_vjp, name=f"vjp of {f.name}"),
                         f.jvp, name=f.name)


def _weighted(wrong: dict[int, float], y: np.ndarray) -> np.ndarray:
    y = np.array(y, dtype=np.float64)
    for e, d in wrong.items():
        y[e] *= 1 + d
    return y


def _order2(which: str, wrong: dict[int, float], rule: dict[int, float] | None = None
            ) -> tuple[NumpyFunction, np.ndarray]:
    """cumsum or matvec wrong at ``wrong``, with second-order rules consistent with its VJP
    (``rule`` None) or wrong at ``rule`` instead (a transposition that is not the VJP's)."""
    rule = wrong if rule is None else rule
    if which == "cumsum":
        return _with_order2(_cumsum(wrong), lambda t: _weighted(rule, np.cumsum(t))), X
    f, A = _matvec(wrong)
    return _with_order2(f, lambda t: _weighted(rule, A @ t)), X[:600]


@pytest.mark.parametrize("projected", [True, False])
@pytest.mark.parametrize("which", ["cumsum", "matvec"])
def test_a_non_diagonal_jacobian_is_named_from_the_transposed_vjp(
        transpose_small: None, which: str, projected: bool) -> None:
    """One wrong output element of a cumulative sum, two of a dense matrix-vector product:
    the diagonal hypothesis is rejected, the transposed VJP names the elements, and they are
    verified: a few rows, not a bisection's ~30.  The projected failing path hands over its
    probes' gradients: they reject the hypothesis and check the whole transposition without
    a row (the other probes' combinations), so one row (the named elements') is all; the
    full path pays the gradient, the hypothesis's row and two verifying rows."""
    wrong = {3210: 1e-3} if which == "cumsum" else {321: 1e-3, 45: 2e-3}
    f, x = _order2(which, wrong)
    model = SMALL_BLOCKS if projected else ErrorModel(
        localize_max_columns=64, localize_max_elements=64 * 64, projected_failure_margin=1e300)
    r = _vjp(gradcheck.check(f, x, backend="numpy", modes=("rev",), error_model=model))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["localize_hypothesis"].startswith("rejected")
    assert r.details["localize_transposed"] == "verified"
    assert r.localized is not None and "named from the transposed VJP" in r.localized
    assert sorted(w.index[0] for w in r.worst) == sorted(wrong)
    for w in r.worst:  # each element's own value, verified by a random combination
        assert w.actual == pytest.approx(w.expected * (1 + wrong[w.index[0]]), rel=1e-6)
        assert abs(w.actual - w.expected) > w.allowed
    assert r.details["localize_rows"] == (1 if projected else 4)


@pytest.mark.parametrize("which", ["cumsum", "matvec"])
def test_the_transposition_names_what_the_bisection_names(
        transpose_small: None, monkeypatch: pytest.MonkeyPatch, which: str) -> None:
    """The search on the transposed VJP's values reaches the elements the bisection's VJP
    rows reach, with the same values (each from its own row): an element over its own
    allowance by chance, in a group within its allowance, is named by neither."""
    wrong = {3210: 1e-3, 17: 1e-7, 4000: 1e-9} if which == "cumsum" else {321: 1e-3, 45: 1e-6}
    f, x = _order2(which, wrong)
    first = _vjp(gradcheck.check(f, x, backend="numpy", modes=("rev",),
                                 error_model=SMALL_BLOCKS))
    assert first.details["localize_transposed"] == "verified"
    monkeypatch.setattr(bisection, "transposition_applies", lambda prep: False)
    again = _vjp(gradcheck.check(f, x, backend="numpy", modes=("rev",),
                                 error_model=SMALL_BLOCKS))
    assert "bisected" in str(again.localized)
    assert [w.index for w in first.worst] == [w.index for w in again.worst]
    for a, b in zip(first.worst, again.worst, strict=True):
        assert a.actual == pytest.approx(b.actual, rel=1e-12)
        assert (a.expected, a.allowed) == (b.expected, b.allowed)
    assert first.details["localize_rows"] < again.details["localize_rows"]


@pytest.mark.parametrize("which", ["cumsum", "matvec"])
def test_the_correct_twins_with_second_order_rules_pass(transpose_small: None,
                                                         which: str) -> None:
    f, x = _order2(which, {})
    report = gradcheck.check(f, x, backend="numpy", modes=("rev",), error_model=SMALL_BLOCKS)
    assert report.passed, gradcheck.format_failure(report)
    assert all(r.localized is None and not r.worst for r in report)


@pytest.mark.parametrize("projected", [True, False])
@pytest.mark.parametrize("rule", [{}, {1111: 1e-3}, {3210: 2e-3}])
def test_a_transposition_that_is_not_the_vjps_is_rejected_and_bisected(
        rule: dict[int, float], projected: bool) -> None:
    """Second-order rules that do not transpose the VJP (correct where the VJP is wrong, wrong
    elsewhere, or wrong by another amount): a combination of every element's cotangent
    differs (the other probes' gradients on the projected failing path, a random one on the
    full path), nothing is named from the transposition, and the bisection names the wrong
    element with its own value."""
    f, x = _order2("cumsum", {3210: 1e-3}, rule)
    model = SMALL_BLOCKS if projected else ErrorModel(
        localize_max_columns=64, localize_max_elements=64 * 64, projected_failure_margin=1e300)
    r = _vjp(gradcheck.check(f, x, backend="numpy", modes=("rev",), error_model=model))
    assert r.status is gradcheck.Status.FAILED
    assert (r.details.get("failure_path") == projected_failure.PATH) is projected
    assert r.details["localize_transposed"] == (
        "rejected: the VJP and the transposed VJP differ on another probe's cotangent (probe "
        "1 of the others)" if projected else
        "rejected: the VJP and the transposed VJP differ on a random combination of every "
        "element's cotangent")
    assert r.localized is not None and "bisected" in r.localized
    assert r.worst[0].index == (3210,)
    assert r.worst[0].actual == pytest.approx(r.worst[0].expected * (1 + 1e-3), rel=1e-6)


def test_a_transposition_off_at_the_named_element_alone_is_rejected() -> None:
    """Second-order rules off by 1e-11 (relative) at the wrong element only: within the
    rounding of the combination of every element (5000 terms) but not of the named elements'
    own: the second row rejects it, so no value is reported from a transposition that is
    off by more than the rounding of its own terms."""
    f, x = _order2("cumsum", {3210: 1e-3}, {3210: 1e-3 + 1e-11})
    r = _vjp(gradcheck.check(f, x, backend="numpy", modes=("rev",), error_model=SMALL_BLOCKS))
    assert r.details["localize_transposed"] == (
        "rejected: the VJP and the transposed VJP differ on a random combination of the named "
        "elements' cotangents")
    assert "bisected" in str(r.localized) and r.worst[0].index == (3210,)


def test_a_transposition_that_raises_leaves_the_bisection() -> None:
    def raising(t):
        raise RuntimeError("no second-order rule here")

    f = _with_order2(_cumsum({3210: 1e-3}), raising)
    r = _vjp(gradcheck.check(f, X, backend="numpy", modes=("rev",), error_model=SMALL_BLOCKS))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["localize_transposed"].startswith("unavailable: ")
    assert "no second-order rule here" in r.details["localize_transposed"]
    assert "bisected" in str(r.localized) and r.worst[0].index == (3210,)


def test_an_error_on_every_element_is_named_from_the_transposed_vjp() -> None:
    """A cumulative sum off by 1e-3 at every output element: the five worst named, verified
    by the other probes' gradients and the named elements' row."""
    f, x = _order2("cumsum", {e: 1e-3 for e in range(N)})
    r = _vjp(gradcheck.check(f, x, backend="numpy", modes=("rev",), error_model=SMALL_BLOCKS))
    assert r.details["localize_transposed"] == "verified"
    assert len(r.worst) == bisection.WORST
    assert all(abs(w.actual - w.expected) > w.allowed for w in r.worst)
    assert r.details["localize_rows"] == 1


def test_torch_names_a_wrong_gradient_element_of_a_non_diagonal_function() -> None:
    """torch, ``2 tanh(x) + sin(roll(x, 1))`` whose custom backward is wrong at gradient
    element ``e``: output elements ``e`` and ``e + 1`` read it; both are named from the
    transposed VJP (torch differentiates the custom backward), one VJP row in all (the
    named elements'; the probes' gradients reject the diagonal hypothesis and check the
    whole transposition)."""
    torch = pytest.importorskip("torch")
    n, e = 20_000, 7_000

    def f(x):
        return torch.tanh(x) * 2 + torch.sin(torch.roll(x, 1))

    x = np.random.default_rng(0).standard_normal(n)
    r = _vjp(gradcheck.check(backward_wrong_at(f, e, 1.5), x, backend="torch", modes=("rev",)))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["localize_transposed"] == "verified", r.details
    assert sorted(w.index[0] for w in r.worst) == [e, e + 1]
    assert r.details["localize_hypothesis"].startswith("rejected: the probes' gradients")
    assert r.details["localize_rows"] == 1
    assert _vjp(gradcheck.check(f, x, backend="torch", modes=("rev",))).status \
        is gradcheck.Status.PASSED


def test_jax_names_a_wrong_gradient_element_of_a_non_diagonal_function() -> None:
    """The same with a ``jax.custom_vjp`` whose backward is wrong at gradient element ``e``
    (JAX differentiates the custom backward)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    n, e = 20_000, 7_000

    def f(x):
        return jnp.tanh(x) * 2 + jnp.sin(jnp.roll(x, 1))

    @jax.custom_vjp
    def wrong(x):
        return f(x)

    def bwd(x, g):
        grad = jax.vjp(f, x)[1](g)[0]
        return (jnp.where(jnp.arange(grad.shape[-1]) == e, grad * 1.5, grad),)

    wrong.defvjp(lambda x: (f(x), x), bwd)
    x = np.random.default_rng(0).standard_normal(n)
    r = _vjp(gradcheck.check(wrong, x, backend="jax", modes=("rev",)))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["localize_transposed"] == "verified", r.details
    assert sorted(w.index[0] for w in r.worst) == [e, e + 1]
    assert r.details["localize_rows"] == 1
    assert _vjp(gradcheck.check(f, x, backend="jax", modes=("rev",))).status \
        is gradcheck.Status.PASSED


def test_few_output_elements_are_bisected_without_the_transposition() -> None:
    """Below ``TRANSPOSE_ELEMENTS`` output elements the bisection's rows cost less: a
    matrix-vector product of 600 with second-order rules is bisected, not transposed."""
    f, x = _order2("matvec", {321: 1e-3})
    r = _vjp(gradcheck.check(f, x, backend="numpy", modes=("rev",), error_model=SMALL_BLOCKS))
    assert "localize_transposed" not in r.details
    assert "bisected" in str(r.localized) and r.worst[0].index == (321,)


def test_a_backward_torch_cannot_differentiate_is_bisected() -> None:
    """A ``once_differentiable`` custom backward wrong at gradient element ``e``: torch
    differentiates through it as if it were constant, so its transposition is not the VJP's;
    the random combination shows it, and the bisection names the elements that read ``e``."""
    torch = pytest.importorskip("torch")
    from torch.autograd.function import once_differentiable

    n, e = 20_000, 7_000

    def f(x):
        return torch.tanh(x) * 2 + torch.sin(torch.roll(x, 1))

    class Once(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return f(x)

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                xx = x.detach().requires_grad_()
                grad = torch.autograd.grad(f(xx), xx, g)[0]
            grad[e] *= 1.5
            return grad

    x = np.random.default_rng(0).standard_normal(n)
    r = _vjp(gradcheck.check(Once.apply, x, backend="torch", modes=("rev",)))
    assert r.status is gradcheck.Status.FAILED
    assert r.details["localize_transposed"].startswith(
        "rejected: the VJP and the transposed VJP differ")
    assert "bisected" in str(r.localized)
    assert sorted(w.index[0] for w in r.worst) == [e, e + 1]
