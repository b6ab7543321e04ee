"""``check`` at the points of real upstream bugs (issue 35; ``benchmarks/check_at_findings.py``
measures all of them): the table covers every torch and jax finding of docs/upstream/README.md,
and a fast subset runs as measured: each finding flagged (with the failing kinds and the known
mark measured) and its correct twin passing at the same point and dtype."""

from __future__ import annotations

import pytest

from benchmarks.check_at_findings import CASES, run_case
from tests.upstream._index import index_rows

FINDINGS = {f"T{i}" for i in range(1, 37)} | {f"J{i}" for i in range(1, 29)}
ENGINES = {"T": "torch", "J": "jax"}


def test_the_table_has_a_case_for_every_torch_and_jax_finding_of_the_index():
    index = {ident: engine for ident, engine, *_ in index_rows()}
    assert FINDINGS <= set(index)
    assert {c.finding for c in CASES} == FINDINGS
    assert len({c.id for c in CASES}) == len(CASES)
    for c in CASES:
        assert index[c.finding] == c.engine == ENGINES[c.id[0]], c.id
        assert (c.fn is None) == bool(c.skip), c.id  # a case never run says why
        assert c.fn is None or (c.twin is not None and c.inputs), c.id


def test_only_the_hanging_findings_are_skipped():
    assert sorted(c.id for c in CASES if c.skip) == ["J19", "J4"]


# case id: (failing kinds that must be among the failures, whether they all carry a known mark)
MEASURED = {
    "T1": ({"vjp", "jvp"}, False),  # asinh' 0 at 1e200
    "T4": ({"vjp", "jvp"}, False),  # hardsigmoid' float32(1/6) in float64
    "T5": ({"vjp_of_vjp", "jvp_of_vjp", "jvp_of_jvp"}, False),  # pow's mixed partial at b = 0
    "T18": ({"jvp_of_jvp"}, False),  # cumprod forward over forward at a zero
    "T23": ({"rounding"}, True),  # bfloat16 erf near 0, the engine's known kernel
    "T26": ({"rounding"}, True),  # bfloat16 logit near 1/2
    "J5": ({"vjp", "jvp"}, False),  # hypot' at (1e200, 3e200)
    "J18": ({"vjp", "jvp"}, False),  # arcsinh' 0 at 1e200
    "J21": ({"rounding"}, True),  # XLA's bfloat16 arcsinh
}


@pytest.mark.parametrize("cid", sorted(MEASURED))
def test_check_flags_the_finding_and_passes_its_twin(cid):
    (case,) = [c for c in CASES if c.id == cid]
    pytest.importorskip(case.engine)
    if case.dtype in ("bfloat16", "float16"):
        pytest.importorskip("ml_dtypes")
    kinds, known = MEASURED[cid]
    bad = run_case(case, "finding")
    assert bad.verdict == "flagged", bad.detail
    assert kinds <= set(bad.failed_kinds), (bad.failed_kinds, bad.detail)
    assert bad.known is known, bad.detail
    good = run_case(case, "twin")
    assert good.verdict == "pass", good.detail
