"""Hypothesis search of an op's domain for the largest discrepancy ratio.

The strategy draws every floating input elementwise inside the op's *empirical box*: the
per-element range its sampler covers over 32 seeded samples (samplers stay inside the smooth
domain, and every elementwise domain in the catalog is a box).  Ops whose domain is not a box
(``OpSpec.box_domain=False``: SPD matrices, separated spectra, well-conditioned solves) draw
whole samples from their sampler instead, Hypothesis choosing the sampler's seed.  Integer
inputs keep the case's seeded sample.  Inputs outside the true domain (the NumPy reference's
forward raises or is non-finite) are rejected with ``assume``, and so are inputs where an input,
the reference's output or its gradient lies within one unit roundoff of the dtype's subnormal
range (``0 < |value| < tiny / eps``): the error model bounds relative rounding only, and an
engine that flushes subnormals to zero (XLA on CPU) is off by up to ``tiny`` there, as the
special points are kept to normal numbers (:func:`gradcheck.harness.plan.in_rounding_range`).
Each example runs the numeric checks; ``target()`` steers the search towards the largest
``discrepancy / allowed`` ratio of the VJP and JVP checks, and any failed or errored check
fails the test with the falsifying inputs.

Settings come from the ``gradcheck-<profile>`` Hypothesis profiles the plugin registers
(``ci``: derandomized, no deadline; ``thorough``: 40 examples seeded from the case id).
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import lru_cache

import numpy as np
from hypothesis import assume, given, seed, settings, target
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gradcheck import stream
from gradcheck.api import format_failure
from gradcheck.backends.registry import get_backend
from gradcheck.core.results import CheckResult, Report, Status
from gradcheck.core.rules import NumpyFunction
from gradcheck.core.taxonomy import CheckKind
from gradcheck.harness.plan import Planned, in_rounding_range
from gradcheck.harness.runner import Case, case_inputs, numeric_report
from gradcheck.ops import catalog

_BOX_SAMPLES = 32
_TARGETED = (CheckKind.VJP, CheckKind.JVP)


@lru_cache(maxsize=512)
def domain_box(op: str) -> tuple[tuple[float, float, float] | None, ...]:
    """Per input: ``(low, high, gap)`` covered by the sampler (``gap > 0``: the sampler keeps
    ``|x| >= gap``, e.g. away from a pole or kink at 0), or None for an integer input."""
    spec = catalog.get_spec(op)
    rng = np.random.default_rng(0)
    draws = [spec.sample(rng) for _ in range(_BOX_SAMPLES)]
    out: list[tuple[float, float, float] | None] = []
    for k in range(spec.arity):
        arrays = [np.asarray(d[k]) for d in draws]
        if not np.issubdtype(arrays[0].dtype, np.floating):
            out.append(None)
        else:
            lo = float(min(a.min() for a in arrays))
            hi = float(max(a.max() for a in arrays))
            gap = float(min(np.abs(a).min() for a in arrays))
            out.append((lo, hi, gap if lo < 0 < hi and gap > 0.01 * (hi - lo) else 0.0))
    return tuple(out)


def strategy(case: Case) -> st.SearchStrategy[tuple[np.ndarray, ...]]:
    """A Hypothesis strategy of input tuples for ``case`` (shapes of its seeded sample)."""
    spec = catalog.get_spec(case.op)
    if not spec.box_domain:  # structured inputs: Hypothesis chooses among the sampler's draws
        return st.integers(0, 2**32 - 1).map(
            lambda s: tuple(np.asarray(a) for a in spec.sample(np.random.default_rng(s))))
    base = case_inputs(Case(case.backend, case.device, case.dtype, case.op))
    parts: list[st.SearchStrategy[np.ndarray]] = []
    for a, box in zip(base, domain_box(case.op), strict=True):
        if box is None:
            parts.append(st.just(a))
        else:
            lo, hi, gap = box
            elems = (_floats(lo, -gap) | _floats(gap, hi)) if gap else _floats(lo, hi)
            parts.append(hnp.arrays(np.float64, a.shape, elements=elems))
    return st.tuples(*parts)


def _floats(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False,
                     width=64)


def _in_domain(op: str, inputs: tuple[np.ndarray, ...]) -> bool:
    ref = get_backend("numpy").op(op)
    if not isinstance(ref, NumpyFunction):
        return True
    try:
        with np.errstate(all="ignore"):
            outs = ref.forward(*inputs)
    except Exception:
        return False
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return all(np.all(np.isfinite(o)) for o in outs)


def _in_model_range(op: str, inputs: tuple[np.ndarray, ...], dtype: str) -> bool:
    """No input, reference output or reference gradient within one unit roundoff of the
    subnormal range of ``dtype`` (see the module docstring)."""
    floor = 1.0 / float(np.finfo(np.dtype(dtype)).eps)
    try:
        return in_rounding_range(op, inputs, dtype, floor=floor)
    except Exception:  # the reference's VJP is undefined there: outside the smooth domain
        return False


def search_case(planned: Planned, profile: str) -> None:
    """Run the search for ``planned.case``; raise AssertionError on a failed/errored check.

    The search is recorded in the active result stream as one ``search`` result (passed, with
    the largest ratio seen and the number of examples) or, when it finds a discrepancy, as the
    failing checks of the falsifying example followed by a failed ``search`` result."""
    __tracebackhide__ = True
    case = planned.case
    seen = _Progress()

    @settings(settings.get_profile(f"gradcheck-{profile}"))
    @given(inputs=strategy(case))
    def search(inputs: tuple[np.ndarray, ...]) -> None:
        assume(_in_domain(case.op, inputs) and _in_model_range(case.op, inputs, case.dtype))
        report = numeric_report(case, 1, inputs)
        ratios = [r.discrepancy_ratio for r in report.results
                  if r.kind in _TARGETED and r.discrepancy_ratio is not None
                  and np.isfinite(r.discrepancy_ratio)]
        seen.examples += 1
        if ratios:
            target(float(max(ratios)), label="max discrepancy/allowed (VJP, JVP)")
            seen.worst = max(seen.worst, float(max(ratios)))
        bad = [r for r in report.results if r.status in (Status.FAILED, Status.ERROR)]
        if bad:
            seen.bad = bad
            raise AssertionError(f"search of {case.id} found a discrepancy:\n"
                                 + format_failure(Report(bad)))

    try:
        seed(case.seed)(search)()
    except AssertionError:
        seen.record(planned, failed=True)
        raise
    seen.record(planned, failed=False)


class _Progress:
    """What a search saw: examples run, the largest ratio, the last falsifying checks."""

    def __init__(self) -> None:
        self.examples = 0
        self.worst = 0.0
        self.bad: list = []
        self.t0 = time.perf_counter()

    def record(self, planned: Planned, *, failed: bool) -> None:
        case = planned.case
        known = {"known": planned.xfail} if planned.xfail else {}
        summary = CheckResult(
            kind=CheckKind.SEARCH, status=Status.FAILED if failed else Status.PASSED,
            backend=case.backend, device=case.device, dtype=case.dtype, name=case.op,
            discrepancy_ratio=self.worst if self.examples else None, seed=case.seed,
            message=(f"Hypothesis search over the op's domain: {self.examples} examples, "
                     f"largest VJP/JVP discrepancy ratio {self.worst:.3g}"
                     + ("; found a discrepancy (the failing checks are listed with it)"
                        if failed else "")),
            reproducer=f"python -m pytest '{stream.current_test_id() or 'suites'}'",
            duration_s=time.perf_counter() - self.t0,
            details={"examples": self.examples, **known})
        bad = [replace(r, details={**r.details, **known}) for r in self.bad] if failed else []
        stream.record_many([*bad, summary])
