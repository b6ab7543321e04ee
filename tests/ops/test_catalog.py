"""The op catalog is consistent data; case ids and seeds round-trip; planning follows the
profiles, skips what is absent and turns known discrepancies into strict xfails."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck import InvalidArgument, Status
from gradcheck.engines.numpy.backend import NumpyBackend
from gradcheck.harness.plan import CHECKS, PROFILES, Selection, plan, representable
from gradcheck.harness.runner import (
    RANDOM,
    Case,
    case_inputs,
    expected_verdict,
    numeric_report,
    stable_seed,
)
from gradcheck.ops import catalog


def test_catalog_has_at_least_fifty_ops_in_these_families_with_unique_names():
    names = [s.name for s in catalog.all_specs()]
    assert len(names) == len(set(names)) >= 50


@pytest.mark.parametrize("spec", catalog.all_specs(), ids=lambda s: s.name)
def test_spec_is_consistent(spec):
    sample = spec.sample(np.random.default_rng(0))
    assert len(sample) == spec.arity
    assert spec.family in catalog.FAMILIES
    for sp in spec.special:
        assert len(sp.args) == spec.arity, sp.name
        assert [a.shape for a in sp.args] == [np.shape(a) for a in sample], sp.name
        assert sp.expect in ("passed", "inconclusive")
        assert sp.expect_order2 in (None, "passed", "inconclusive")
    for k in spec.known:
        assert k.reason and k.backend


@pytest.mark.parametrize("spec", [s for s in catalog.all_specs() if s.known], ids=lambda s: s.name)
def test_known_discrepancies_name_real_checks_points_and_dtypes(spec):
    """A known entry that names a point, check or dtype the suites never plan is dead data: it
    can neither xfail nor report a fix (a merge once moved such entries onto another op)."""
    points = {sp.name for sp in spec.special} | {RANDOM, "*"}
    for k in spec.known:
        assert k.subject in (spec.name, "*"), f"{spec.name}: known entry for {k.subject!r}"
        for p in k.points:
            assert p in points, f"{spec.name}: known entry for point {p!r}"
        for c in k.checks:
            assert c in (*CHECKS, "*"), f"{spec.name}: known entry for check {c!r}"
        for d in k.dtypes:
            assert d in (*spec.dtypes, "*"), f"{spec.name}: known entry for dtype {d!r}"
        assert k.profile in (*PROFILES, "*"), f"{spec.name}: known entry for {k.profile!r}"


def test_unknown_op_is_a_clear_error():
    with pytest.raises(InvalidArgument, match="did you mean: atan2"):
        catalog.get_spec("atan3")


def test_case_id_round_trips_and_seeds_are_stable():
    case = Case("torch", "cpu", "float64", "maximum", "tie")
    assert case.id == "torch-cpu-float64-maximum@tie"
    assert Case.parse(f"test_vjp[{case.id}]") == case
    assert Case.parse("jax-cpu:1-float32-sin") == Case("jax", "cpu:1", "float32", "sin")
    assert case.seed == stable_seed(case.id) == 3342138532  # pinned: ids must keep their seeds
    assert Case("numpy", "cpu", "float64", "sin").point == RANDOM


def test_inputs_come_from_the_id_alone():
    a = case_inputs(Case("torch", "cpu", "float64", "atan2"))
    b = case_inputs(Case.parse("torch-cpu-float64-atan2"))
    c = case_inputs(Case("jax", "cpu", "float64", "atan2"))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])


def test_points_outside_a_dtype_range_are_not_planned_for_it():
    spec = catalog.get_spec("exp")
    assert representable(spec, RANDOM, "float32")
    assert not representable(spec, "near_overflow", "float32")
    assert not representable(spec, "underflow", "float32")
    assert representable(spec, "near_overflow", "float64")


def _ids(check, **kw):
    return [p.id for p in plan(check, Selection(**kw))]


def test_plan_quick_is_a_subset_and_filters_apply():
    quick = _ids("vjp", profile="quick", backends=("numpy",))
    ci = _ids("vjp", profile="ci", backends=("numpy",))
    assert set(quick) < set(ci)
    assert _ids("vjp", profile="ci", backends=("numpy",), ops=("atan2",), dtypes=("float64",)) \
        == ["numpy-cpu-float64-atan2", "numpy-cpu-float64-atan2@on_axes",
            "numpy-cpu-float64-atan2@huge"]
    assert "numpy-cpu-float64-arccosh" in _ids("vjp", profile="ci", backends=("numpy",),
                                               ops=("arc*h",))


def test_plan_kinks_only_for_fd_checks_and_fd_blind_points_only_for_exact_checks():
    vjp = _ids("vjp", profile="ci", backends=("numpy",), ops=("maximum",))
    fwd_rev = _ids("fwd_rev", profile="ci", backends=("numpy",), ops=("maximum",))
    assert "numpy-cpu-float64-maximum@tie" in vjp
    assert not any("@tie" in i for i in fwd_rev)
    ref = _ids("reference", profile="ci", backends=("jax",), ops=("tan",))
    assert "jax-cpu-float64-tan@near_pole" in ref
    assert "numpy-cpu-float64-tan@near_pole" not in _ids("vjp", profile="ci",
                                                          backends=("numpy",), ops=("tan",))


def test_a_point_smooth_at_order_1_only_is_judged_a_kink_by_order_2_alone():
    """huber_loss at |a - b| = delta: the first derivative is continuous, the second jumps.
    The first-order checks must pass there and the second-order checks (thorough) must see the
    kink; points where the first derivative itself jumps get no order-2 checks."""
    case = Case("jax", "cpu", "float64", "huber_loss", "at_delta")
    assert expected_verdict(case, 1) == "passed"
    assert expected_verdict(case, 2) == "inconclusive"
    assert "jax-cpu-float64-huber_loss@at_delta" in _ids("vjp_of_vjp", profile="thorough",
                                                          backends=("jax",), ops=("huber_loss",))
    assert not any("@zero" in i for i in _ids("vjp_of_vjp", profile="thorough",
                                              backends=("jax",), ops=("relu",)))
    report = numeric_report(case, order=2)
    first = [r for r in report.results if r.order == 1 and r.kind.value in ("vjp", "jvp")]
    second = [r for r in report.results if r.order == 2]
    assert first and all(r.status.value == "passed" for r in first)
    assert second and all(r.status.value == "inconclusive" for r in second)
    assert all("not differentiable" in r.message for r in second)


def test_plan_skips_absent_devices_with_a_reason():
    planned = plan("vjp", Selection(profile="ci", backends=("numpy",), ops=("sin",),
                                    devices=("cpu", "cuda"), dtypes=("float64",)))
    by_device = {p.case.device: p.skip for p in planned if p.case.point == RANDOM}
    assert by_device["cpu"] == ""
    assert "device 'cuda' not available for backend 'numpy'" in by_device["cuda"]


def test_plan_capabilities_decide_checks():
    (p,) = plan("vjp_of_vjp", Selection(profile="ci", backends=("numpy",), ops=("tanh",)))
    assert p.id == "numpy-cpu-float64-tanh" and p.skip == "" and p.order == 2
    # ci: order 2 on the QUICK ops only, selected or not (sin is not one of them)
    assert plan("vjp_of_vjp", Selection(profile="ci", backends=("numpy",), ops=("sin",))) == []
    # the references' VJPs are plain callables: the run itself reports order 2 as skipped
    report = numeric_report(p.case, 2)
    assert {r.status for r in report.results if r.kind == "vjp_of_vjp"} == {Status.SKIPPED}
    assert _ids("reference", profile="ci", backends=("numpy",)) == []
    assert _ids("rounding", profile="ci", backends=("numpy",), ops=("sin",),
                dtypes=("float64",)) == []
    assert _ids("search", profile="quick", backends=("numpy",)) == []


class Float32Numpy(NumpyBackend):
    """A float32-only engine (like TensorFlow.js): float64 cases skip with a reason."""

    name = "numpy-f32"
    dtypes = ("float32",)


def test_plan_skips_dtypes_a_backend_lacks_with_a_reason():
    sel = Selection(profile="ci", backends=("tests.ops.test_catalog:Float32Numpy",), ops=("sin",))
    skips = {p.case.dtype: p.skip for p in plan("vjp", sel) if p.case.point == RANDOM}
    assert skips["float32"] == ""
    assert "has no float64" in skips["float64"]
    pairs = plan("cross_backend", Selection(profile="ci", ops=("sin",), backends=(
        "torch", "tests.ops.test_catalog:Float32Numpy")))
    assert pairs and all("has no float64" in p.skip for p in pairs)


def test_known_discrepancies_are_one_record_with_a_check_kind():
    from gradcheck.core.known import SEMANTIC, KnownDiscrepancy, known_behaviour
    from gradcheck.core.taxonomy import CheckKind
    from gradcheck.ops import engine_known

    with pytest.raises(ValueError):
        KnownDiscrepancy("torch", "a typo in a check name", checks=("vjpp",))
    with pytest.raises(ValueError):
        KnownDiscrepancy("torch", "a typo in a nature", nature="bugg")
    with pytest.raises(TypeError):
        KnownDiscrepancy("torch", "a check name, not a tuple of them", checks="vjp")
    reasons = set(engine_known.REASONS.values())
    assert all(type(k) is KnownDiscrepancy and k.checks and k.reason in reasons
               and k.subject != "*" and k.backend == backend
               for backend, table in engine_known.TABLES.items() for k in table)
    sin = engine_known.known_for_op("sin")
    assert {(k.backend, k.dtypes, k.points, k.checks) for k in sin} >= {
        ("mlx", ("float32",), ("random",), ("rounding",)),
        ("mlx", ("float64",), ("mixed",), ("reference",))}
    assert all(type(k) is KnownDiscrepancy and k.subject == "sin" and len(k.checks) == 1
               and type(k.checks[0]) is CheckKind for k in sin)
    probe = known_behaviour("torch", "clip.threshold_validation")
    assert probe in SEMANTIC and probe.checks == ("semantic",) and probe.evidence


def test_a_known_entry_can_be_limited_to_one_profile():
    """A search entry limited to one profile (torch's layer_norm: the thorough search reaches a
    row of equal values) is a strict xfail in that profile and not in the other."""
    def xfail(op: str, profile: str, backend: str = "torch") -> str:
        (p,) = [p for p in plan("search", Selection(profile, backends=(backend,),
                                                    dtypes=("float64",), ops=(op,)))
                if p.case.device == "cpu"]
        return p.xfail

    limited = [k for s in catalog.all_specs() for k in s.known
               if k.profile not in ("*",) and "search" in k.checks]
    assert limited, "no known entry limited to one profile left to test"
    k = limited[0]
    op = next(s.name for s in catalog.all_specs() if k in s.known)
    other = "ci" if k.profile == "thorough" else "thorough"
    assert xfail(op, k.profile, k.backend) != ""
    assert xfail(op, other, k.backend) == ""
