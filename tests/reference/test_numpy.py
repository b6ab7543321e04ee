"""The hand-derived NumPy references are themselves verified: VJP and JVP of every catalog op
against the finite-difference oracle, at the seeded sample and at every special point the
oracle can judge; plus mutants showing that a wrong rule is caught."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck import NumpyFunction, Status, check
from gradcheck.harness.runner import RANDOM, Case, case_inputs, numeric_report
from gradcheck.ops import catalog
from gradcheck.reference.numpy import get_op


def _points():
    for spec in catalog.all_specs():
        yield pytest.param(spec.name, RANDOM, "passed", id=spec.name)
        for sp in spec.special:
            if sp.fd:
                yield pytest.param(spec.name, sp.name, sp.expect, id=f"{spec.name}@{sp.name}")


@pytest.mark.parametrize(("op", "point", "expect"), list(_points()))
def test_reference_rules_match_finite_differences(op, point, expect):
    report = numeric_report(Case("numpy", "cpu", "float64", op, point))
    kinds = {r.kind: r for r in report.results}
    assert {"vjp", "jvp"} <= set(kinds), report.summary()
    for r in report.results:
        assert r.status.value == expect or r.status is Status.SKIPPED, r.message


def test_every_catalog_op_has_a_numpy_reference():
    missing = [s.name for s in catalog.all_specs() if get_op(s.name) is None]
    assert missing == []


def _scaled(ref: NumpyFunction, factor: float, where: str) -> NumpyFunction:
    """A mutant reference whose VJP or JVP is off by ``factor``."""

    def vjp(args, cts):
        g = ref.vjp(args, cts)
        return [x * factor for x in g] if where == "vjp" else g

    def jvp(args, tans):
        t = ref.jvp(args, tans)
        return [x * factor for x in t] if where == "jvp" else t

    return NumpyFunction(ref.forward, vjp, jvp, name=f"{ref.__name__}_mutant")


@pytest.mark.parametrize("op", ["sin", "atan2", "logsumexp", "cumprod_axis1", "betaln"])
@pytest.mark.parametrize("where", ["vjp", "jvp"])
def test_a_rule_off_by_one_part_in_a_million_is_caught(op, where):
    inputs = case_inputs(Case("numpy", "cpu", "float64", op))
    good = check(get_op(op), *inputs, backend="numpy")
    bad = check(_scaled(get_op(op), 1.0 + 1e-6, where), *inputs, backend="numpy")
    assert good.passed, good.summary()
    failed = {r.kind for r in bad.results if r.status is Status.FAILED}
    assert where in failed, bad.summary()


def test_a_sign_error_in_one_element_is_caught_and_localized():
    ref = get_op("cumsum_axis1")

    def vjp(args, cts):
        (g,) = ref.vjp(args, cts)
        g = g.copy()
        g[1, 2] = -g[1, 2]
        return [g]

    inputs = case_inputs(Case("numpy", "cpu", "float64", "cumsum_axis1"))
    bad = check(NumpyFunction(ref.forward, vjp, ref.jvp), *inputs, backend="numpy")
    (r,) = [r for r in bad.results if r.kind == "vjp"]
    assert r.status is Status.FAILED
    assert r.worst and r.worst[0].index[-2:] == (1, 2)


def test_references_keep_float32():
    for op in ("sin", "atan2", "prod", "betaln"):
        ref = get_op(op)
        args = [a.astype(np.float32) for a in case_inputs(Case("numpy", "cpu", "float64", op))]
        out = ref.forward(*args)
        grads = ref.vjp(args, [np.ones_like(out)])
        assert out.dtype == np.float32
        assert all(g.dtype == np.float32 for g in grads if g is not None)
