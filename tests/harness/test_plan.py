"""``gradcheck.harness.plan``: a selection of ops filters what the profile runs.

A known discrepancy must be reported the same way under any ``--op`` selection as in the full
run: the selection plans, for each selected op, exactly the cases of the full plan (the same
checks, points, memoized order, skip reason, xfail and strictness) and nothing else.  Before
this held, ``ci`` ran order 2 and the Hypothesis search on any selected op, where the full run
runs them on the ``QUICK`` ops only: ``gradcheck run --backend candle --op gelu`` failed a
search the full run never runs (Candle's 6-digit gelu constants, known for the VJP and the
reference), and a selected non-``QUICK`` op read its first-order checks from the order-2 run.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from gradcheck.core.known import KnownDiscrepancy
from gradcheck.harness.plan import CHECKS, Planned, Selection, plan
from gradcheck.ops import catalog
from tests.support.child_env import gradcheck_cli


def _key(p: Planned) -> tuple:
    """Everything a planned case decides: which test, which memoized run, skip, xfail."""
    return (p.check, p.id, p.order, p.skip, p.xfail, p.strict)


def _full(check: str, profile: str, backends: tuple[str, ...]) -> list[Planned]:
    return plan(check, Selection(profile, backends=backends))


def _restricted(full: list[Planned], ops: set[str]) -> list[tuple]:
    return [_key(p) for p in full if p.case.op in ops]


def _selected(check: str, profile: str, backends: tuple[str, ...], ops: tuple[str, ...]
              ) -> list[tuple]:
    return [_key(p) for p in plan(check, Selection(profile, backends=backends, ops=ops))]


def _quick_and_not() -> tuple[list[str], list[str]]:
    quick = set(catalog.quick_names())
    names = list(catalog.names())
    return [n for n in names if n in quick], [n for n in names if n not in quick]


@pytest.mark.parametrize("profile", ["ci", "thorough"])
def test_a_selection_of_ops_plans_exactly_the_full_plans_cases_of_those_ops(profile):
    # synthetic selections: one op, two ops, a QUICK op with one outside the QUICK list
    rng = random.Random(20261203)
    quick, other = _quick_and_not()
    selections = [(rng.choice(quick),), (rng.choice(other),), tuple(rng.sample(other, 2)),
                  (rng.choice(quick), rng.choice(other)), ("tanh", "mul")]
    backends = ("numpy", "torch")
    for check in CHECKS:
        full = _full(check, profile, backends)
        for ops in selections:
            assert _selected(check, profile, backends, ops) == _restricted(full, set(ops)), \
                (check, profile, ops)


def test_ci_runs_order_2_and_the_search_on_a_selected_op_only_where_the_full_run_does():
    quick, other = _quick_and_not()
    for check in ("vjp_of_vjp", "search"):
        assert plan(check, Selection("ci", backends=("numpy",), ops=(other[0],))) == []
        assert plan(check, Selection("ci", backends=("numpy",), ops=(quick[0],)))
        # thorough runs them on every op, selected or not
        assert plan(check, Selection("thorough", backends=("numpy",), ops=(other[0],)))
    # quick has no order 2 or search; its first-order checks still run on any selected op
    assert plan("vjp", Selection("quick", backends=("numpy",), ops=(other[0],)))


def test_a_synthetic_known_record_matches_the_same_way_under_any_selection(monkeypatch):
    """Records a selection used to treat differently: the search and order 2 of an op outside
    the QUICK list, a first-order record at the random point of such an op (read from the
    memoized order-1 or order-2 run), a non-strict record of a cross-backend pair."""
    quick, other = _quick_and_not()
    target = next(n for n in other if catalog.get_spec(n).order2)
    records = (
        KnownDiscrepancy("torch", "synthetic: search", subject=target, checks=("search",)),
        KnownDiscrepancy("torch", "synthetic: order 2", subject=target,
                         checks=("vjp_of_vjp",), dtypes=("float64",)),
        KnownDiscrepancy("torch", "synthetic: vjp", subject=target, checks=("vjp",),
                         points=("random",)),
        KnownDiscrepancy("torch", "synthetic: pair", subject=target,
                         checks=("cross_backend",), strict=False),
    )
    spec = catalog.get_spec(target)
    patched = replace(spec, known=spec.known + records)
    index = {**catalog._index(), target: patched}
    monkeypatch.setattr(catalog, "_index", lambda: index)
    real_specs = catalog.all_specs
    monkeypatch.setattr(catalog, "all_specs", lambda families=None: tuple(
        patched if s.name == target else s for s in real_specs(families)))
    backends = ("torch", "jax")
    for profile in ("ci", "thorough"):
        for check in CHECKS:
            full = _full(check, profile, backends)
            for ops in ((target,), (target, quick[0])):
                assert _selected(check, profile, backends, ops) == _restricted(full, set(ops)), \
                    (check, profile, ops)
    for check in CHECKS:  # quick: an op outside its list gets the ci run's first-order cases
        expected = [] if plan(check, Selection("quick", backends=backends)) == [] else \
            _restricted(_full(check, "ci", backends), {target})
        assert _selected(check, "quick", backends, (target,)) == expected, check
    # and the records are in force where the profile runs their checks
    thorough = plan("search", Selection("thorough", backends=("torch",), ops=(target,)))
    assert any("synthetic: search" in p.xfail for p in thorough)
    pairs = plan("cross_backend", Selection("ci", backends=backends, ops=(target,)))
    assert pairs and all("synthetic: pair" in p.xfail and not p.strict for p in pairs)
    (vjp,) = [p for p in plan("vjp", Selection("ci", backends=("torch",), ops=(target,),
                                               dtypes=("float64",), devices=("cpu",)))
              if p.case.point == "random"]
    assert "synthetic: vjp" in vjp.xfail and vjp.order == 1


def _known_sample(backend: str, k: int) -> list[tuple[str, KnownDiscrepancy]]:
    """A deterministic sample of ``k`` catalog records of ``backend`` (op, record)."""
    records = [(s.name, r) for s in catalog.all_specs() for r in s.known if r.backend == backend]
    return random.Random(f"known-{backend}").sample(records, min(k, len(records)))


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_a_sample_of_known_entries_match_with_only_their_op_selected(backend):
    """Property over the catalog's records: planned with only its op selected, the op of each
    sampled record gets exactly the full plan's cases, so the record marks the same cases with
    the same order, reason and strictness."""
    sample = _known_sample(backend, 30)
    assert sample
    for profile in ("ci", "thorough"):
        fulls = {check: _full(check, profile, (backend,)) for check in CHECKS}
        marked_somewhere = False
        for op, record in sample:
            for check in CHECKS:
                alone = _selected(check, profile, (backend,), (op,))
                assert alone == _restricted(fulls[check], {op}), (profile, check, op)
                marked_somewhere |= any(record.shown == key[4] for key in alone)
        assert marked_somewhere, profile


# ---- the real engines outside Python: gradcheck run on a selection, as a user runs it ----

def _built(name: str) -> str | None:
    from gradcheck.backends.registry import unavailable_reason

    return unavailable_reason(name)


def _full_plan_marks(backend: str, ops: tuple[str, ...]) -> set[str]:
    """The test ids the full ci plan of ``backend`` expects to fail (known), for ``ops``."""
    out = set()
    for check in CHECKS:
        for p in plan(check, Selection("ci", backends=(backend,))):
            if p.xfail and not p.skip and p.case.op in ops:
                out.add(f"test_{check.value}[{p.id}]")
    return out


@pytest.mark.parametrize("backend, ops", [
    ("candle", ("tanh", "mul")), ("candle", ("tanh",)), ("candle", ("gelu",)),
    ("candle", ("sigmoid", "layer_norm")),
    ("gorgonia", ("tanh", "mul")), ("gorgonia", ("tanh",)), ("gorgonia", ("log_softmax",)),
    ("gorgonia", ("softmax", "norm_axis1")),
], ids=lambda v: "+".join(v) if isinstance(v, tuple) else v)
def test_gradcheck_run_on_a_selection_reports_the_known_records_of_the_full_run(
        backend, ops, tmp_path):
    reason = _built(backend)
    if reason:
        pytest.skip(f"{backend} backend: {reason}")
    args = ["run", "--backend", backend, "--report-dir", str(tmp_path / "r")]
    for op in ops:
        args += ["--op", op]
    proc = gradcheck_cli(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").open()]
    checks = [r for r in results if r.get("kind") and r.get("status")]
    failed = [r for r in checks if r["status"] in ("failed", "error")]
    assert all(r.get("known_as") for r in failed), [r["test_id"] for r in failed
                                                   if not r.get("known_as")]
    known = {r["test_id"].split("::", 1)[1] for r in failed}
    assert known == _full_plan_marks(backend, ops)
    if "tanh" in ops:  # the recorded saturation discrepancy of tanh' = 1 - y^2
        assert f"test_reference[{backend}-cpu-float64-tanh@saturated]" in known


_FIRST_ORDER = {"vjp", "jvp", "fwd_rev", "reference"}


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_a_sample_of_known_entries_still_fail_and_match_when_only_their_op_runs(backend):
    """The same property, run: for a few first-order records, the cases a selection of only
    their op plans as known still fail, and their failures are matched by the record."""
    from gradcheck.harness import runner
    from gradcheck.plugin.assertions import relevant, results_for

    pytest.importorskip(backend)
    rng = random.Random(f"run-{backend}")
    records = [(s.name, r) for s in catalog.all_specs() for r in s.known
               if r.backend == backend and set(r.checks) <= _FIRST_ORDER
               and r.dtypes == ("float64",) and r.profile == "*" and r.strict]
    for op, record in rng.sample(records, 3):
        cases = [p for check in sorted(_FIRST_ORDER)
                 for p in plan(check, Selection("ci", backends=(backend,), ops=(op,),
                                                devices=("cpu",)))
                 if p.xfail == record.shown and not p.skip]
        assert cases, (op, record.reason[:80])
        for p in cases:
            expected = runner.expected_verdict(p.case, 1)
            wrong = [r for r in relevant(p, results_for(p))
                     if r.status.value not in (expected, "skipped")]
            assert wrong, f"{p.check.value}[{p.id}] no longer fails: {record.reason[:80]}"
            spec = catalog.get_spec(op)
            assert spec.known_for(backend, p.case.dtype, p.check, p.case.point) is not None
