"""Running catalog ops through the checks: one :class:`Case` = backend x device x dtype x op x
point, with every random choice derived from the case id.

``Case("torch", "cpu", "float64", "atan2").id == "torch-cpu-float64-atan2"`` and a special
point appends ``@name`` (``"torch-cpu-float64-maximum@tie"``).  The seed is a stable hash of
that id, so the inputs, probes and verdict of a suite test are reproducible from its id alone
(:func:`reproduce`).  The check functions memoize their reports per (case, order), so the
suite tests that read different check kinds from one run (VJP, JVP, forward-vs-reverse,
rounding) pay for it once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from gradcheck.api import format_failure
from gradcheck.backends.registry import get_backend
from gradcheck.core.errors import InvalidArgument
from gradcheck.core.results import CheckResult, Report
from gradcheck.core.taxonomy import CheckKind
from gradcheck.numeric import CheckConfig, run_numeric_checks
from gradcheck.numeric.agreement import Side, compare_vjps
from gradcheck.ops import catalog

RANDOM = "random"
PROBES = 3


def stable_seed(text: str) -> int:
    """A 32-bit seed from ``text`` that is the same in every process and Python version."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


@dataclass(frozen=True)
class Case:
    """One combination the suites check.  ``backend`` may be ``"a+b"`` for cross-backend."""

    backend: str
    device: str
    dtype: str
    op: str
    point: str = RANDOM

    @property
    def id(self) -> str:
        base = f"{self.backend}-{self.device}-{self.dtype}-{self.op}"
        return base if self.point == RANDOM else f"{base}@{self.point}"

    @property
    def seed(self) -> int:
        return stable_seed(self.id)

    @classmethod
    def parse(cls, case_id: str) -> Case:
        """Inverse of :attr:`id` (accepts a full pytest id such as ``test_vjp[...]``)."""
        inner = case_id.split("[", 1)[1].rstrip("]") if "[" in case_id else case_id
        head, _, point = inner.partition("@")
        parts = head.split("-", 3)
        if len(parts) != 4:
            raise InvalidArgument(f"case id {case_id!r} is not backend-device-dtype-op[@point]")
        backend, device, dtype, op = parts
        return cls(backend, device, dtype, op, point=point or RANDOM)


def case_inputs(case: Case) -> tuple[np.ndarray, ...]:
    """The float64 inputs of ``case``: a seeded sample, or the named special point."""
    spec = catalog.get_spec(case.op)
    if case.point == RANDOM:
        return tuple(np.asarray(a) for a in spec.sample(np.random.default_rng(case.seed)))
    for sp in spec.special:
        if sp.name == case.point:
            return tuple(np.asarray(a) for a in sp.args)
    raise InvalidArgument.choice("point", case.point,
                                 [RANDOM] + [sp.name for sp in spec.special])


def expected_verdict(case: Case, order: int = 1) -> str:
    """``"passed"``, or ``"inconclusive"`` at a special point that is a kink of the derivative
    of ``order``."""
    spec = catalog.get_spec(case.op)
    return next((sp.expected(order) for sp in spec.special if sp.name == case.point), "passed")


def op_function(backend: str, op: str):
    """``backend``'s implementation of ``op``; :class:`InvalidArgument` if it has none."""
    fn = get_backend(backend).op(op)
    if fn is None:
        raise InvalidArgument(catalog.missing_reason(backend, op))
    return fn


def numeric_report(case: Case, order: int = 1, inputs: tuple[np.ndarray, ...] | None = None
                   ) -> Report:
    """Every numeric check (VJP/JVP vs FD, forward vs reverse, eager vs functional, rounding
    and, for ``order=2``, the second-order checks) of ``case``; memoized unless ``inputs``
    are given explicitly."""
    if inputs is not None:
        return _numeric(case, order, inputs)
    return _numeric_cached(case, order)


@lru_cache(maxsize=4096)
def _numeric_cached(case: Case, order: int) -> Report:
    return _numeric(case, order, case_inputs(case))


def _numeric(case: Case, order: int, inputs: tuple[np.ndarray, ...]) -> Report:
    spec = catalog.get_spec(case.op)
    backend = get_backend(case.backend)
    cfg = CheckConfig(order=order, seed=case.seed, probes=PROBES, name=case.op,
                      reproducer=one_line(case), test_id=case.id, only_inputs=spec.diff_args)
    return Report(run_numeric_checks(backend, op_function(case.backend, case.op), inputs,
                                     device=case.device, dtype=case.dtype, config=cfg))


@lru_cache(maxsize=4096)
def reference_results(case: Case) -> tuple[CheckResult, ...]:
    """``case.backend``'s VJP against the hand-derived NumPy reference (float64)."""
    return _agreement(CheckKind.REFERENCE, case, Side(get_backend(case.backend),
                                              op_function(case.backend, case.op), case.device),
                      Side(get_backend("numpy"), op_function("numpy", case.op)))


@lru_cache(maxsize=4096)
def cross_backend_results(case: Case) -> tuple[CheckResult, ...]:
    """``case.backend == "a+b"``: backend a's VJP against backend b's on identical inputs."""
    a, _, b = case.backend.partition("+")
    return _agreement(CheckKind.CROSS_BACKEND, case,
                      Side(get_backend(a), op_function(a, case.op), case.device),
                      Side(get_backend(b), op_function(b, case.op), case.device))


@lru_cache(maxsize=4096)
def cross_device_results(case: Case, baseline: str = "cpu") -> tuple[CheckResult, ...]:
    """``case.device``'s VJP against the same backend's VJP on ``baseline``."""
    be = get_backend(case.backend)
    fn = op_function(case.backend, case.op)
    return _agreement(CheckKind.CROSS_DEVICE, case, Side(be, fn, case.device),
                      Side(be, fn, baseline))


def _agreement(kind: CheckKind, case: Case, actual: Side, expected: Side
               ) -> tuple[CheckResult, ...]:
    spec = catalog.get_spec(case.op)
    return tuple(compare_vjps(kind, actual, expected, case_inputs(case), diff=spec.diff_args,
                              seed=case.seed, probes=PROBES, name=case.op,
                              reproducer=one_line(case), test_id=case.id))


def one_line(case: Case) -> str:
    """The shortest reproducer: re-run the case from its id."""
    return f"python -m gradcheck.harness.runner {case.id!r}"


def reproducer(case: Case, kind: str, order: int = 1) -> str:
    """A standalone script that recomputes the check of ``kind`` for ``case`` (inputs inlined,
    so it does not depend on the sampler)."""
    arrays = ",\n    ".join(f"np.array({a.tolist()!r}, dtype=np.{a.dtype})"
                            for a in case_inputs(case))
    spec = catalog.get_spec(case.op)
    lines = [
        f"# reproduces {kind} for case {case.id} (seed {case.seed})",
        "import numpy as np",
        "import gradcheck",
        "from gradcheck.numeric import CheckConfig, run_numeric_checks",
        "from gradcheck.core.results import Report",
        f"inputs = (\n    {arrays},\n)",
        f"backend = gradcheck.get_backend({case.backend.partition('+')[0]!r})",
        f"fn = backend.op({case.op!r})",
    ]
    agreement = AGREEMENT_RUNS.get(CheckKind(kind))
    if agreement is not None:
        lines += [f"from gradcheck.harness.runner import Case, {agreement.__name__}",
                  f"results = {agreement.__name__}(Case.parse({case.id!r}))",
                  "for r in results:", "    print(r.status.value, r.message)"]
    else:
        lines += [f"cfg = CheckConfig(order={order}, seed={case.seed}, probes={PROBES}, "
                  f"name={case.op!r}, only_inputs={spec.diff_args!r})",
                  f"report = Report(run_numeric_checks(backend, fn, inputs, device={case.device!r},"
                  f" dtype={case.dtype!r}, config=cfg))",
                  "print(gradcheck.format_failure(report) if report.failures "
                  "else report.summary())"]
    return "\n".join(lines)


#: the function that runs each exact-agreement kind for a case
AGREEMENT_RUNS: dict[CheckKind, Callable[[Case], tuple[CheckResult, ...]]] = {
    CheckKind.REFERENCE: reference_results, CheckKind.CROSS_BACKEND: cross_backend_results,
    CheckKind.CROSS_DEVICE: cross_device_results}


def reproduce(case_id: str, order: int = 1) -> Report:
    """Re-run every check of a case from its id (``"torch-cpu-float64-atan2@zero"``)."""
    case = Case.parse(case_id)
    if "+" in case.backend:
        return Report(list(cross_backend_results(case)))
    report = numeric_report(case, order, case_inputs(case))
    if case.dtype == "float64" and case.backend != "numpy":
        report.extend(replace(r) for r in reference_results(case))
    return report


def _main(argv: list[str]) -> int:
    """``python -m gradcheck.harness.runner [--order 2] CASE_ID...``: print every check's verdict;
    exit status 1 if any failed."""
    import argparse


    parser = argparse.ArgumentParser(prog="python -m gradcheck.harness.runner")
    parser.add_argument("--order", type=int, default=1, choices=(1, 2))
    parser.add_argument("case_ids", nargs="+", metavar="CASE_ID")
    ns = parser.parse_args(argv)
    ok = True
    for case_id in ns.case_ids:
        report = reproduce(case_id, ns.order)
        print(f"{case_id}: {report.summary()}")
        for r in report.results:
            print(f"  [{r.status.value}] {r.kind}: {r.message}")
        if report.failures:  # a kink point's expected verdict is inconclusive: not a failure
            ok = False
            print(format_failure(report))
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    import sys

    raise SystemExit(_main(sys.argv[1:]))
