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


class FlowStatus(str, enum.Enum):
    """How the gradient reaches one parameter of an audited model."""

    FLOWS = "flows"
    BLOCKED_AS_INTENDED = "blocked as intended"
    BLOCKED_UNINTENTIONALLY = "blocked unintentionally"
    LEAK = "leak"
    UNUSED = "unused"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class ParameterFlow:
    """The audit of one parameter (:func:`gradcheck.audit`; carried by its ``flow`` result as
    :attr:`CheckResult.flow`).  ``ad_norm``: L2 norm of its AD gradient in the model's dtype
    (0 where none arrives); ``fd_dependence``: largest ``|<dL/dp, u>|`` measured by FD along the
    random directions, significant when above ``fd_noise`` (10 x the FD error estimate);
    ``gradient_check``: verdict of the projected FD check of its gradient; ``ad_projection``:
    largest ``|<dL/dp, u>|`` from AD on the float64 copy along the same directions (comparable
    with ``fd_dependence``; ``ad_norm`` is not).  A number the audit did not measure is nan."""

    name: str
    shape: tuple[int, ...]
    status: FlowStatus
    declared_stopped: bool
    trainable: bool
    ad_norm: float
    fd_dependence: float
    fd_noise: float
    gradient_check: Status
    cut_points: tuple[str, ...] = ()
    message: str = ""
    ad_projection: float = float("nan")

    def to_dict(self) -> dict[str, Any]:
        """A JSON object (enums as their values, tuples as lists)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out.update(status=self.status.value, gradient_check=self.gradient_check.value,
                   shape=list(self.shape), cut_points=list(self.cut_points))
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParameterFlow:
        """Inverse of :meth:`to_dict` (numbers as ``"inf"``/``"nan"`` strings accepted)."""
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: _from_jsonable(v) for k, v in data.items() if k in names}
        kw["status"] = FlowStatus(kw["status"])
        kw["gradient_check"] = Status(kw["gradient_check"])
        kw["shape"] = tuple(kw.get("shape", ()))
        kw["cut_points"] = tuple(kw.get("cut_points", ()))
        return cls(**kw)


@dataclass(frozen=True)
class KnownMark:
    """The known discrepancy a failed result is expected to show (its record is
    :class:`gradcheck.core.known.KnownDiscrepancy`): the reason, its nature (``bug``,
    ``by_design``, ``limitation``), the upstream link where one exists, and ``behaviour``: a
    documented backend behaviour of the semantic probes rather than an entry of the catalog or
    the sweep (streams carry it as ``details["known_behaviour"]`` instead of ``"known"``)."""

    reason: str
    nature: str = "bug"
    link: str | None = None
    behaviour: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The record as streams carry it in ``details`` (``known`` or ``known_behaviour``,
        ``known_nature``, ``upstream``)."""
        if self.behaviour:
            return {"known_behaviour": self.reason}
        out: dict[str, Any] = {"known": self.reason, "known_nature": self.nature}
        if self.link:
            out["upstream"] = self.link
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KnownMark | None:
        """Inverse of :meth:`to_dict` (None where ``data`` marks nothing as known)."""
        if data.get("known"):
            link = data.get("upstream")
            return cls(str(data["known"]), str(data.get("known_nature", "bug")),
                       link if isinstance(link, str) else None)
        if data.get("known_behaviour"):
            return cls(str(data["known_behaviour"]), "by_design", None, True)
        return None


@dataclass(frozen=True)
class SweepInfo:
    """Where a result of the op sweep (:mod:`gradcheck.sweep`) comes from: the point, order,
    profile, op family, elements repaired into the domain and the oracle that judged it
    (``check`` or a resolution check); or why it was not checked (``skipped`` at a point,
    ``left_out`` of the inventory, a worker crash's ``exitcode``/``hung_s``); ``overruled``:
    why the sweep's own resolution checks overrule a failed verdict.  Unset is None."""

    point: str | None = None
    order: int | None = None
    profile: str | None = None
    family: str | None = None
    repaired: int | None = None
    oracle: str | None = None
    skipped: str | None = None
    exitcode: int | None = None
    hung_s: float | None = None
    left_out: str | None = None
    overruled: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The set fields, in declaration order (``details["sweep"]`` as streams carry it)."""
        return {f.name: v for f in dataclasses.fields(self)
                if (v := getattr(self, f.name)) is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepInfo:
        """Inverse of :meth:`to_dict`; keys it does not know are left out."""
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


@dataclass(frozen=True)
class Triage:
    """The sweep triage of a failed or errored result (:mod:`gradcheck.sweep.triage`): its
    class (``confirmed``, ``false_alarm``, ``crash``, ...), symptom, de-duplication key, the
    independent evidence it was classified from (None where none was collected) and a
    reproducer script."""

    cls: str
    symptom: str = ""
    key: str | None = None  # None: an older stream's triage without one (not a finding)
    evidence: dict[str, Any] | None = None
    reproducer: str = ""

    def to_dict(self) -> dict[str, Any]:
        """``details["triage"]`` as streams carry it (``class`` for :attr:`cls`)."""
        out: dict[str, Any] = {"class": self.cls, "symptom": self.symptom}
        if self.key is not None:
            out["key"] = self.key
        if self.evidence is not None:
            out["evidence"] = self.evidence
        out["reproducer"] = self.reproducer
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Triage:
        """Inverse of :meth:`to_dict`."""
        evidence, key = data.get("evidence"), data.get("key")
        return cls(str(data.get("class", "")), str(data.get("symptom", "")),
                   key if isinstance(key, str) else None,
                   evidence if isinstance(evidence, dict) else None,
                   str(data.get("reproducer", "")))


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
    # typed fields of the keys read outside the package that writes them: the dtype a numeric
    # comparison was computed in where it is not the check's (``computed_in``), the rounding
    # level a failed comparison lies within (``rounding_level``, docs/error-model.md section
    # 5b), an audited parameter's gradient flow (``flow``), the sweep's records.  Read from
    # ``details`` when not given; when given, ``details`` mirrors them (what older readers and
    # the report's detail panel read).
    computed_in: str | None = None
    rounding_level: float | None = None
    flow: ParameterFlow | None = None
    sweep: SweepInfo | None = None  # a sweep result's origin
    triage: Triage | None = None  # the sweep's triage of a failed one
    known_as: KnownMark | None = None  # the known discrepancy it is expected to show
    # which probe (0-based) of how many was the worst; the alternative derivative path
    # compared (eager vs functional: ``details["path"]``); a Jacobian block's localization
    # (``localized``: the block compared, or why not) and its element summary
    probe: int | None = None
    probes: int | None = None
    alternative: str | None = None
    localized: str | None = None
    max_abs_discrepancy: float | None = None
    max_rel_discrepancy: float | None = None
    elements_over: int | None = None
    # the input's path where the inputs are nested or complex (``params['w']``, ``z.imag``:
    # docs/pytrees.md); None: the input is named by its position
    input_path: str | None = None

    def __post_init__(self) -> None:
        if type(self.kind) is not CheckKind:
            try:
                kind = CheckKind(self.kind)
            except ValueError:
                raise ValueError(f"kind={self.kind!r} is not a check kind; known: "
                                 f"{', '.join(k.value for k in CheckKind)}") from None
            object.__setattr__(self, "kind", kind)
        d = self.details
        mirrored: dict[str, Any] = {}
        for name, key in _DETAIL_KEYS:
            value = getattr(self, name)
            if value is None or value == _DEFAULTS[name]:
                if key in d:  # an older stream, or a producer that writes only ``details``
                    read = _FROM_DETAILS.get(name)
                    value = d[key] if read is None else read(self)
                    if value is not None:
                        object.__setattr__(self, name, value)
            else:  # written to both: ``details`` is what older readers and the report read
                write = _TO_DETAILS.get(name)
                for k, v in ({key: value} if write is None else write(value)).items():
                    if k not in d or (name in _FIELD_WINS and d[k] != v):
                        mirrored[k] = v
        if mirrored:
            object.__setattr__(self, "details", {**d, **mirrored})

    @property
    def ok(self) -> bool:
        """True for passed, inconclusive and skipped: nothing wrong was shown."""
        return self.status in (Status.PASSED, Status.INCONCLUSIVE, Status.SKIPPED)

    @property
    def known(self) -> bool:
        """A failed (or errored) check whose outcome is expected: a recorded known discrepancy
        of the catalog (a strict xfail in the suites) or of the sweep, or a documented backend
        behaviour of the semantic probes (:attr:`known_as`).  It keeps its
        status; the report shows it as ``known`` and it does not fail a run."""
        return self.status in (Status.FAILED, Status.ERROR) and self.known_as is not None

    @property
    def subject(self) -> str:
        """Human name of what was compared, e.g. ``VJP of output 0 w.r.t. input 1``."""
        parts = [INFO[self.kind].label]
        if self.output_index is not None:  # by its path where the output is a dict/pytree
            parts.append(f"of output {self.output_index if self.path is None else self.path}")
        if self.input_index is not None:  # by its path where the inputs are nested/complex
            parts.append(f"w.r.t. input "
                         f"{self.input_index if self.input_path is None else self.input_path}")
        return " ".join(parts)

    def to_json(self) -> str:
        """One JSON line (no newline) with ``schema`` and ``record`` fields."""
        # shallow field copy (dataclasses.asdict deep-copies everything: ~3x slower, and every
        # result is serialised the moment it completes when a stream is active)
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["status"] = self.status.value
        data["kind"] = self.kind.value
        # readers of streams written before the typed fields read them in ``details``, which
        # holds every set one (__post_init__)
        data["worst"] = [dataclasses.asdict(w) for w in self.worst]
        for name in ("flow", "sweep", "triage", "known_as"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value.to_dict()
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
        for name, record in (("flow", ParameterFlow), ("sweep", SweepInfo), ("triage", Triage),
                             ("known_as", KnownMark)):
            if isinstance(kwargs.get(name), dict):
                kwargs[name] = record.from_dict(kwargs[name])
        return cls(**kwargs)


#: (typed field, its key in ``details``) of the fields older streams carry in ``details``
_DETAIL_KEYS = (("order", "order"), ("path", "output_path"), ("bug_class", "bug_class"),
                ("section", "section"), ("computed_in", "computed_in"),
                ("rounding_level", "rounding_level"), ("flow", "flow"), ("sweep", "sweep"),
                ("triage", "triage"), ("probe", "probe"), ("probes", "probes"),
                ("alternative", "path"), ("localized", "localized"),
                ("max_abs_discrepancy", "max_abs_discrepancy"),
                ("max_rel_discrepancy", "max_rel_discrepancy"),
                ("elements_over", "elements_over"), ("known_as", "known"),
                ("known_as", "known_behaviour"), ("input_path", "input_path"))
_DEFAULTS: dict[str, Any] = {"order": 1, "path": None, "bug_class": None, "section": None,
                             **{name: None for name, _ in _DETAIL_KEYS[4:]}}
#: the fields whose value replaces a different one in ``details`` (a record updated with
#: ``dataclasses.replace`` keeps ``details`` in step); the older ones only fill a missing key
_FIELD_WINS = frozenset(name for name, _ in _DETAIL_KEYS[4:])


def _flow_from_details(r: CheckResult) -> ParameterFlow | None:
    """The flow record of a stream written before :attr:`CheckResult.flow`: the status and
    cut points the audit wrote in ``details``; the numbers it did not write are nan."""
    status = r.details.get("flow")
    if not isinstance(status, str) or status not in {s.value for s in FlowStatus}:
        return None
    cuts = r.details.get("cut_points")
    nan = float("nan")
    return ParameterFlow(r.name, (), FlowStatus(status),
                         status == FlowStatus.BLOCKED_AS_INTENDED.value, True, nan, nan, nan,
                         Status.SKIPPED, tuple(map(str, cuts)) if isinstance(cuts, list) else (),
                         r.message)


def _flow_to_details(flow: ParameterFlow) -> dict[str, Any]:
    return {"flow": flow.status.value, "cut_points": list(flow.cut_points)}


#: how a field is read from (the result, its ``details`` set) and written to ``details`` where
#: it is not the value itself
def _record_from_details(name: str, record: Any) -> Any:
    def read(r: CheckResult) -> Any:
        value = r.details.get(name)
        return record.from_dict(value) if isinstance(value, dict) else None
    return read


_FROM_DETAILS: dict[str, Any] = {"flow": _flow_from_details,
                                 "known_as": lambda r: KnownMark.from_dict(r.details),
                                 "sweep": _record_from_details("sweep", SweepInfo),
                                 "triage": _record_from_details("triage", Triage)}
_TO_DETAILS: dict[str, Any] = {"flow": _flow_to_details,
                               "sweep": lambda v: {"sweep": v.to_dict()},
                               "triage": lambda v: {"triage": v.to_dict()},
                               "known_as": lambda v: v.to_dict()}


#: the fields no other field or ``details`` mirrors (neither ``kind``, ``details`` nor a typed
#: field of ``_DETAIL_KEYS``): a record with another value in one of them is the same record with
#: that field changed, ``__post_init__`` has nothing to redo (:func:`replaced`)
_PLAIN_FIELDS = frozenset(f.name for f in dataclasses.fields(CheckResult)) - {
    "kind", "details", *(name for name, _ in _DETAIL_KEYS)}


def replaced(r: CheckResult, **changes: Any) -> CheckResult:
    """``dataclasses.replace(r, **changes)``, the same record; where every changed field is
    plain (``message``, ``duration_s``, ...: :data:`_PLAIN_FIELDS`) without rebuilding it
    through ``__init__`` and ``__post_init__`` (a tenth of the time: the numeric pipeline
    sets the message and the duration of every result this way)."""
    if not changes.keys() <= _PLAIN_FIELDS:
        return dataclasses.replace(r, **changes)
    new = object.__new__(type(r))
    new.__dict__.update(r.__dict__)
    new.__dict__.update(changes)
    return new


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
        """True when no check failed or errored and at least one was decided (passed or
        failed): a report that decided nothing (every result inconclusive or skipped, or no
        result) is not passed, the rule :func:`gradcheck.assert_gradients` applies when it
        raises :class:`gradcheck.core.errors.NothingDecided`."""
        return all(r.ok for r in self.results) and bool(self.decided)

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
        their number: ``12 checks: 10 passed, 2 inconclusive (2 not decided)``; with failures
        that are recorded known defects of the engine (:attr:`CheckResult.known`), theirs:
        ``6 checks: 5 passed, 1 failed (1 known)``."""
        c = {k: v for k, v in self.counts().items() if v}
        body = ", ".join(f"{v} {k}" for k, v in c.items())
        undecided = len(self.undecided)
        known = sum(r.known for r in self.results)
        notes = [f"{known} known"] if known else []
        notes += [f"{undecided} not decided"] if undecided else []
        note = f" ({', '.join(notes)})" if notes else ""
        return f"{len(self.results)} checks: {body or 'none'}{note}"
