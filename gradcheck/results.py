"""Typed check results: one frozen record per comparison, serialisable as one JSON line.

A :class:`CheckResult` says what was compared (``kind``, ``input_index``, ``output_index``),
both values (``expected`` from the oracle, ``actual`` from the backend), the discrepancy, the
allowed error and where that allowance came from (``allowed_source``), the verdict
(:class:`Status`) and everything needed to reproduce it (seed, dtype, device, ``reproducer``).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1


class Status(str, enum.Enum):
    """The verdict of one check."""

    PASSED = "passed"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"  # the oracle cannot decide (kink, non-finite, ill-conditioned)
    ERROR = "error"  # the function or backend raised / returned garbage
    SKIPPED = "skipped"  # not applicable (no JVP, op missing, device absent)


class CheckKind(str, enum.Enum):
    """What a check compares.  Values are stable strings used in ids, JSON and reports."""

    VJP = "vjp"  # <J^T v, u> from reverse mode vs <v, J u> from finite differences
    JVP = "jvp"  # <v, J u> from forward mode vs finite differences
    FWD_REV = "fwd_rev"  # forward mode vs reverse mode (rounding bound only)
    EAGER_FUNC = "eager_func"  # e.g. torch .backward() vs torch.func.vjp
    ROUNDING = "rounding"  # low-precision AD vs the backend's own float64 AD
    REFERENCE = "reference"  # backend VJP vs hand-derived NumPy reference VJP
    CROSS_BACKEND = "cross_backend"
    CROSS_DEVICE = "cross_device"
    VJP_OF_VJP = "vjp_of_vjp"  # order 2: reverse over reverse vs FD of the VJP
    JVP_OF_VJP = "jvp_of_vjp"  # order 2: forward over reverse vs FD of the VJP
    JVP_OF_JVP = "jvp_of_jvp"  # order 2: forward over forward vs FD of the JVP
    SEMANTIC = "semantic"  # training-step behaviour probes
    FLOW = "flow"  # gradient-flow map of a model audit
    GRAD_NORM = "grad_norm"
    CALL = "call"  # the function could not even be evaluated


@dataclass(frozen=True)
class WorstElement:
    """One element of a localized (full-Jacobian) comparison."""

    index: tuple[int, ...]
    actual: float
    expected: float
    allowed: float


@dataclass(frozen=True)
class CheckResult:
    """One comparison and its evidence.  ``discrepancy_ratio`` = |actual - expected| / allowed."""

    kind: str
    status: Status
    backend: str
    device: str = "cpu"
    dtype: str = "float64"
    name: str = ""  # function / op / probe name
    input_index: int | None = None
    output_index: int | None = None
    expected: float | None = None
    actual: float | None = None
    discrepancy: float | None = None  # absolute
    relative_discrepancy: float | None = None
    allowed: float | None = None
    allowed_source: str = ""
    discrepancy_ratio: float | None = None
    message: str = ""
    seed: int | None = None
    shapes: tuple[tuple[int, ...], ...] = ()
    worst: tuple[WorstElement, ...] = ()
    reproducer: str = ""
    convergence: tuple[tuple[float, float], ...] = ()  # (step, FD estimate) for plots
    details: dict[str, Any] = field(default_factory=dict)
    test_id: str = ""
    duration_s: float | None = None

    @property
    def ok(self) -> bool:
        """True for passed, inconclusive and skipped: nothing wrong was shown."""
        return self.status in (Status.PASSED, Status.INCONCLUSIVE, Status.SKIPPED)

    @property
    def subject(self) -> str:
        """Human name of what was compared, e.g. ``VJP of output 0 w.r.t. input 1``."""
        label = _KIND_LABELS.get(self.kind, self.kind)
        parts = [label]
        if self.output_index is not None:
            parts.append(f"of output {self.output_index}")
        if self.input_index is not None:
            parts.append(f"w.r.t. input {self.input_index}")
        return " ".join(parts)

    def to_json(self) -> str:
        """One JSON line (no newline) with ``schema`` and ``record`` fields."""
        # shallow field copy (dataclasses.asdict deep-copies everything: ~3x slower, and every
        # result is serialised the moment it completes when a stream is active)
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["status"] = self.status.value
        data["worst"] = [dataclasses.asdict(w) for w in self.worst]
        data = {k: _finite_or_str(v) for k, v in data.items()}
        return json.dumps({"schema": SCHEMA_VERSION, "record": "check", **data}, default=str)

    @classmethod
    def from_json(cls, line: str) -> CheckResult:
        """Inverse of :meth:`to_json`; raises ``ValueError`` on a malformed line."""
        return cls.from_dict(json.loads(line))

    @classmethod
    def from_dict(cls, data: Any) -> CheckResult:
        """:meth:`from_json` for an already-parsed JSON object (stream readers parse once)."""
        if not isinstance(data, dict) or data.get("record") != "check":
            raise ValueError("not a gradcheck check record")
        data = dict(data)
        data.pop("schema", None)
        data.pop("record", None)
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: _from_jsonable(v) for k, v in data.items() if k in names}
        kwargs["status"] = Status(kwargs["status"])
        kwargs["worst"] = tuple(
            WorstElement(tuple(w["index"]), w["actual"], w["expected"], w["allowed"])
            for w in kwargs.get("worst", ())
        )
        kwargs["shapes"] = tuple(tuple(s) for s in kwargs.get("shapes", ()))
        kwargs["convergence"] = tuple(tuple(c) for c in kwargs.get("convergence", ()))
        return cls(**kwargs)


_KIND_LABELS = {
    "vjp": "VJP",
    "jvp": "JVP",
    "fwd_rev": "forward-vs-reverse",
    "eager_func": "eager-vs-functional VJP",
    "rounding": "low-precision rounding of the VJP",
    "reference": "VJP vs NumPy reference",
    "cross_backend": "cross-backend VJP",
    "cross_device": "cross-device VJP",
    "vjp_of_vjp": "VJP of VJP",
    "jvp_of_vjp": "JVP of VJP",
    "jvp_of_jvp": "JVP of JVP",
}


def _finite_or_str(value: Any) -> Any:
    """JSON has no inf/nan: encode them as strings, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _finite_or_str(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_str(v) for v in value]
    return value


def _from_jsonable(value: Any) -> Any:
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, list):
        return [_from_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _from_jsonable(v) for k, v in value.items()}
    return value


@dataclass
class Report:
    """What :func:`gradcheck.check` returns: the list of results and a verdict."""

    results: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no check failed or errored (inconclusive and skipped do not fail)."""
        return all(r.ok for r in self.results)

    @property
    def decided(self) -> list[CheckResult]:
        """The comparisons that reached a verdict (passed or failed)."""
        return [r for r in self.results if r.status in (Status.PASSED, Status.FAILED)]

    @property
    def undecided(self) -> list[CheckResult]:
        """The results that decided nothing: inconclusive (the oracle could not decide) and
        skipped (not applicable).  :func:`gradcheck.assert_gradients` raises
        :class:`gradcheck.errors.NothingDecided` when these are all there is."""
        return [r for r in self.results if r.status in (Status.INCONCLUSIVE, Status.SKIPPED)]

    @property
    def failures(self) -> list[CheckResult]:
        """The failed and errored results."""
        return [r for r in self.results if not r.ok]

    def counts(self) -> dict[str, int]:
        """Number of results per status value."""
        out: dict[str, int] = {s.value: 0 for s in Status}
        for r in self.results:
            out[r.status.value] += 1
        return out

    def extend(self, results: Iterable[CheckResult]) -> None:
        self.results.extend(results)

    def __iter__(self) -> Iterator[CheckResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __bool__(self) -> bool:
        return True

    def to_jsonl(self) -> str:
        """All results, one JSON line each."""
        return "".join(r.to_json() + "\n" for r in self.results)

    def summary(self) -> str:
        """One line: ``12 checks: 11 passed, 1 failed``; with results that decided nothing,
        their number: ``12 checks: 10 passed, 2 inconclusive (2 not decided)``."""
        c = {k: v for k, v in self.counts().items() if v}
        body = ", ".join(f"{v} {k}" for k, v in c.items())
        undecided = len(self.undecided)
        note = f" ({undecided} not decided)" if undecided else ""
        return f"{len(self.results)} checks: {body or 'none'}{note}"
