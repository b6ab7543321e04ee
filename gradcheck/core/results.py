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

from gradcheck.core.taxonomy import INFO, CheckKind

SCHEMA_VERSION = 1


class Status(str, enum.Enum):
    """The verdict of one check."""

    PASSED = "passed"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"  # the oracle cannot decide (kink, non-finite, ill-conditioned)
    ERROR = "error"  # the function or backend raised / returned garbage
    SKIPPED = "skipped"  # not applicable (no JVP, op missing, device absent)


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

    kind: CheckKind
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
    # typed fields that older streams (and producers not yet migrated) carry in ``details``:
    # the derivative order, the output's path in a dict/pytree output, the semantic bug class,
    # the conformance section.  Read from ``details`` when not given; written to both.
    order: int = 1
    path: str | None = None
    bug_class: str | None = None
    section: str | None = None

    def __post_init__(self) -> None:
        if type(self.kind) is not CheckKind:
            try:
                kind = CheckKind(self.kind)
            except ValueError:
                raise ValueError(f"kind={self.kind!r} is not a check kind; known: "
                                 f"{', '.join(k.value for k in CheckKind)}") from None
            object.__setattr__(self, "kind", kind)
        d = self.details
        if d:
            for name, key in _DETAIL_KEYS:
                if key in d and getattr(self, name) == _DEFAULTS[name]:
                    object.__setattr__(self, name, d[key])

    @property
    def ok(self) -> bool:
        """True for passed, inconclusive and skipped: nothing wrong was shown."""
        return self.status in (Status.PASSED, Status.INCONCLUSIVE, Status.SKIPPED)

    @property
    def known(self) -> bool:
        """A failed (or errored) check whose outcome is expected: a recorded known discrepancy
        of the catalog (``details["known"]``, a strict xfail in the suites) or a documented
        backend behaviour of the semantic probes (``details["known_behaviour"]``).  It keeps its
        status; the report shows it as ``known`` and it does not fail a run."""
        return self.status in (Status.FAILED, Status.ERROR) and bool(
            self.details.get("known") or self.details.get("known_behaviour"))

    @property
    def subject(self) -> str:
        """Human name of what was compared, e.g. ``VJP of output 0 w.r.t. input 1``."""
        parts = [INFO[self.kind].label]
        if self.output_index is not None:  # by its path where the output is a dict/pytree
            parts.append(f"of output {self.output_index if self.path is None else self.path}")
        if self.input_index is not None:
            parts.append(f"w.r.t. input {self.input_index}")
        return " ".join(parts)

    def to_json(self) -> str:
        """One JSON line (no newline) with ``schema`` and ``record`` fields."""
        # shallow field copy (dataclasses.asdict deep-copies everything: ~3x slower, and every
        # result is serialised the moment it completes when a stream is active)
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["status"] = self.status.value
        data["kind"] = self.kind.value
        mirrored = {key: getattr(self, name) for name, key in _DETAIL_KEYS
                    if key not in self.details and getattr(self, name) != _DEFAULTS[name]}
        if mirrored:  # readers of streams written before the typed fields read `details`
            data["details"] = {**self.details, **mirrored}
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


#: (typed field, its key in ``details``) of the fields older streams carry in ``details``
_DETAIL_KEYS = (("order", "order"), ("path", "output_path"), ("bug_class", "bug_class"),
                ("section", "section"))
_DEFAULTS: dict[str, Any] = {"order": 1, "path": None, "bug_class": None, "section": None}


# -- how values are written: one helper for the assert message, the result messages and the
# HTML report's detail panel, so that they show the same strings ---------------------------------


def number(x: float | None, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits (``nan``, ``inf`` and ``-`` for None as such)."""
    if x is None:
        return "-"
    x = float(x)
    return repr(x) if not math.isfinite(x) else f"{x:.{digits}g}"


def distinct(a: float, b: float, least: int = 10) -> tuple[str, str]:
    """``a`` and ``b`` with at least ``least`` significant digits and as many more (up to 17,
    all a float64 has) as it takes for two different values to print differently:
    ``1.0000001`` and ``1.0000002`` never both print as ``1``."""
    a, b = float(a), float(b)
    digits = least
    if a != b and math.isfinite(a) and math.isfinite(b):
        scale = max(abs(a), abs(b))
        digits = min(17, max(least, math.ceil(math.log10(scale / abs(a - b))) + 2))
        while digits < 17 and f"{a:.{digits}g}" == f"{b:.{digits}g}":
            digits += 1
    return number(a, digits), number(b, digits)


@dataclass(frozen=True)
class Shown:
    """The written form of one comparison: what the messages and the report print."""

    actual: str
    expected: str
    difference: str  # |actual - expected|, always printed
    relative: str
    allowed: str
    ratio: str


def shown(r: CheckResult) -> Shown | None:
    """How ``r``'s comparison is written (None for a result that compared no values)."""
    if r.actual is None or r.expected is None:
        return None
    actual, expected = distinct(r.actual, r.expected)
    diff = r.discrepancy if r.discrepancy is not None else abs(r.actual - r.expected)
    return Shown(actual, expected, number(diff), number(r.relative_discrepancy),
                 number(r.allowed), number(r.discrepancy_ratio))


def shown_element(w: WorstElement) -> tuple[str, str, str, str, str]:
    """One worst element written out: AD, oracle, |difference|, allowed, ratio."""
    ad, oracle = distinct(w.actual, w.expected)
    diff = abs(w.actual - w.expected)
    ratio = diff / w.allowed if w.allowed else (0.0 if diff == 0 else math.inf)
    return ad, oracle, number(diff), number(w.allowed), number(ratio)


_OPENING, _CLOSING = "([{", ")]}"


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a boundary, ending in ``...``: after a
    space outside any bracket where one is in the second half, else at an earlier space with
    the brackets open there closed (``f([1.0, 2.0, ...])``), never inside a bracket's content
    without closing it."""
    if len(text) <= limit:
        return text
    spaces = [pos for pos, ch in enumerate(text[:limit]) if ch == " "]
    depth, top_level = 0, []  # spaces outside any bracket
    for pos, ch in enumerate(text[:limit]):
        depth += (ch in _OPENING) - (ch in _CLOSING and depth > 0)
        if ch == " " and depth == 0:
            top_level.append(pos)
    if top_level and top_level[-1] >= limit // 2:
        spaces = top_level
    for pos in reversed(spaces):
        head = text[:pos].rstrip(",;: ")
        closing = _still_open(head)
        cut = head + (", ..." if closing else " ...") + closing
        if len(cut) <= limit:
            return cut
    return text[:max(limit - 4, 0)] + " ..."


def _still_open(text: str) -> str:
    """The closing brackets of the brackets still open at the end of ``text``, innermost
    first."""
    closing: list[str] = []
    for ch in text:
        if ch in _OPENING:
            closing.append(_CLOSING[_OPENING.index(ch)])
        elif ch in _CLOSING and closing:
            closing.pop()
    return "".join(reversed(closing))


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
        :class:`gradcheck.core.errors.NothingDecided` when these are all there is."""
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
