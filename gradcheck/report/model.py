"""What the report shows, computed from the stream: counts, the op matrix, probe and flow tables,
and the compact table data embedded in the page.

Everything here is plain data (no HTML); :mod:`gradcheck.report.html` renders it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gradcheck.core.results import (
    CheckResult,
    ParameterFlow,
    Status,
    number,
    shown,
    shown_element,
)
from gradcheck.core.taxonomy import CheckGroup, kinds
from gradcheck.stream import StreamData

#: order of severity, worst first (also the sort order of the table); ``known`` is a failed check
#: whose failure is a recorded known discrepancy (catalog data or a documented backend behaviour)
SEVERITY = ("error", "failed", "known", "inconclusive", "skipped", "passed")
KNOWN = "known"
#: kinds shown in the semantic-probe table and in flow maps rather than in the op matrix
SEMANTIC_KINDS = kinds(CheckGroup.SEMANTIC)
FLOW_KINDS = kinds(CheckGroup.FLOW)
COLUMNS = ("id", "status", "kind", "name", "backend", "device", "dtype", "test", "ratio",
           "discrepancy", "allowed", "actual", "expected", "seed", "duration", "message",
           "reproducer", "subject", "shapes")


def is_known(r: CheckResult) -> bool:
    """:attr:`CheckResult.known`: an expected failure (a recorded known discrepancy)."""
    return r.known


def status_of(r: CheckResult) -> str:
    """The status the report shows: the check's own, or ``known`` for an expected failure."""
    return KNOWN if is_known(r) else r.status.value


def is_bad(r: CheckResult) -> bool:
    """A check that makes the run fail: failed or errored, and not a known discrepancy."""
    return not r.ok and not is_known(r)


def status_counts(checks: Iterable[CheckResult]) -> dict[str, int]:
    """Number of checks per shown status, every status of :data:`SEVERITY` present."""
    out = dict.fromkeys(SEVERITY, 0)
    for r in checks:
        out[status_of(r)] += 1
    return out


def worst_status(statuses: Iterable[str]) -> str:
    """The most severe of ``statuses`` (``passed`` for none)."""
    present = set(statuses)
    return next((s for s in SEVERITY if s in present), "passed")


@dataclass
class MatrixCell:
    """Checks of one op on one (backend, device, dtype)."""

    counts: Counter = field(default_factory=Counter)
    worst_ratio: float | None = None

    def add(self, r: CheckResult) -> None:
        self.counts[status_of(r)] += 1
        ratio = r.discrepancy_ratio
        if ratio is not None and not math.isnan(ratio) and r.status in (Status.PASSED,
                                                                        Status.FAILED):
            self.worst_ratio = ratio if self.worst_ratio is None else max(self.worst_ratio, ratio)

    @property
    def status(self) -> str:
        return worst_status(self.counts)


@dataclass
class Matrix:
    """Op x (backend, device, dtype), coloured by the worst discrepancy ratio."""

    columns: list[tuple[str, str, str]]
    ops: list[str]
    cells: dict[tuple[str, tuple[str, str, str]], MatrixCell]


def build_matrix(checks: Iterable[CheckResult]) -> Matrix:
    """The op matrix: every check but the semantic probes, the flow records and the checks of
    an audited parameter (the audit's own gradient checks, named by the parameter: they are
    in the flow map, not ops)."""
    checks = list(checks)
    audited = _audited(checks)
    cells: dict[tuple[str, tuple[str, str, str]], MatrixCell] = defaultdict(MatrixCell)
    for r in checks:
        if r.kind in SEMANTIC_KINDS or r.kind in FLOW_KINDS or (
                (r.test_id, r.backend, r.device, r.name) in audited):
            continue
        cells[(r.name, (r.backend, r.device, r.dtype))].add(r)
    columns = sorted({col for _, col in cells})
    ops = sorted({op for op, _ in cells}, key=lambda s: (s.lower(), s))
    return Matrix(columns, ops, dict(cells))


def _audited(checks: Iterable[CheckResult]) -> set[tuple[str, str, str, str]]:
    """(test, backend, device, parameter) of every parameter a model audit recorded."""
    return {(r.test_id, r.backend, r.device, r.flow.name) for r in checks if r.flow is not None}


def counts_by_target(checks: Iterable[CheckResult]) -> list[tuple[tuple[str, str, str], Counter]]:
    """Status counts per (backend, device, dtype), sorted."""
    out: dict[tuple[str, str, str], Counter] = defaultdict(Counter)
    for r in checks:
        out[(r.backend, r.device, r.dtype)][status_of(r)] += 1
    return sorted(out.items())


@dataclass(frozen=True)
class FlowMap:
    """Per-parameter gradient status of one audit (its ``flow`` records, or one record listing
    ``parameters`` in its details)."""

    index: int  # row id of the (first) record in the table
    title: str
    parameters: list[tuple[str, str, str]]  # (parameter name, status, note)
    #: each parameter's flow result message (same order; empty for a map from ``details``)
    messages: list[str] = field(default_factory=list)


def _flow_parameters(details: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Accept ``parameters`` as a list of dicts or a name -> status/dict mapping."""
    params = details.get("parameters", details.get("params"))
    out = []
    if isinstance(params, dict):
        params = [{"name": k, **(v if isinstance(v, dict) else {"status": v})}
                  for k, v in params.items()]
    if not isinstance(params, list):
        return []
    for p in params:
        if not isinstance(p, dict):
            continue
        name = str(p.get("name", p.get("parameter", "?")))
        status = str(p.get("status", p.get("state", "?")))
        note = {k: v for k, v in p.items() if k not in ("name", "parameter", "status", "state")}
        out.append((name, status, ", ".join(f"{k}={v}" for k, v in note.items())))
    return out


def _flow_note(p: ParameterFlow) -> str:
    """The evidence of one parameter's flow status: the numbers the audit measured."""
    parts = [f"|grad| {number(p.ad_norm)}", f"|<grad,u>| AD {number(p.ad_projection)}",
             f"FD {number(p.fd_dependence)} (noise {number(p.fd_noise)})",
             f"FD check {p.gradient_check.value}",
             f"shape {'x'.join(map(str, p.shape)) or '()'}"]
    if p.declared_stopped:
        parts.append("declared stopped")
    if not p.trainable:
        parts.append("not trainable")
    if p.cut_points:
        parts.append("cut points: " + "; ".join(p.cut_points))
    return ", ".join(parts)


def flow_maps(checks: list[CheckResult]) -> list[FlowMap]:
    """One map per audit: the consecutive flow records of one test and backend (a parameter
    seen again starts the next audit's map); a flow-kind check listing ``parameters`` in its
    details is a map of its own, and other flow-kind checks (the audit's determinism and
    declaration checks) are in the checks table only."""
    out: list[FlowMap] = []
    current: tuple[Any, ...] | None = None
    for i, r in enumerate(checks):
        if r.flow is not None:
            key = (r.test_id, r.backend, r.device, r.dtype)
            names = {n for n, _, _ in out[-1].parameters} if current == key else set()
            if current != key or r.flow.name in names:
                title = f"model audit [{r.backend} {r.device} {r.dtype}] {r.test_id}".strip()
                out.append(FlowMap(i, title, []))
                current = key
            out[-1].parameters.append((r.flow.name, r.flow.status.value, _flow_note(r.flow)))
            out[-1].messages.append(r.message)
        elif r.kind in FLOW_KINDS:
            params = _flow_parameters(r.details)
            if params or "parameters" in r.details or "params" in r.details:
                title = f"{r.name} [{r.backend} {r.device} {r.dtype}] {r.test_id}".strip()
                out.append(FlowMap(i, title, params))
    return out


def _jsonable(v: Any) -> Any:
    """inf/nan become strings (JSON has neither); the page's ``num()`` turns them back."""
    if isinstance(v, float) and not math.isfinite(v):
        return "inf" if v > 0 else ("-inf" if v < 0 else "nan")
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


class _Strings:
    """Interns values: rows hold indexes into one shared list (``key``: how two values are
    the same; a string is its own key)."""

    def __init__(self, key: Callable[[Any], Any] = lambda v: v) -> None:
        self.items: list[Any] = []
        self._index: dict[Any, int] = {}
        self._key = key

    def __call__(self, value: Any) -> int:
        k = self._key(value)
        idx = self._index.get(k)
        if idx is None:
            idx = self._index[k] = len(self.items)
            self.items.append(value)
        return idx


def _shapes(r: CheckResult) -> str:
    return " ".join("x".join(map(str, s)) or "scalar" for s in r.shapes)


def _extra(r: CheckResult) -> dict[str, Any]:
    """The evidence of a non-passing check: worst elements, details, FD convergence (the page
    draws the plot from it)."""
    values = shown(r)  # the strings the assert message prints (one helper for both)
    return _jsonable({
        "shown": None if values is None else dataclasses.asdict(values),
        "worst_shown": [list(shown_element(w)) for w in r.worst],
        "allowed_source": r.allowed_source,
        "relative": r.relative_discrepancy,
        "worst": [[list(w.index), w.actual, w.expected, w.allowed] for w in r.worst],
        "details": r.details,
        "convergence": [list(c) for c in r.convergence],
        "input": r.input_index,
        "output": r.output_index,
    })


def _short(v: float | None) -> float | None:
    """4 significant digits: what the table shows and sorts by (actual/expected stay exact)."""
    return float(f"{v:.4g}") if isinstance(v, float) and math.isfinite(v) else v


def table_data(checks: list[CheckResult], *, passed_rows: bool = True) -> dict[str, Any]:
    """The compact table embedded in the page: interned strings, one array per row, the full
    evidence (``extra``) only for checks that did not pass.  ``passed_rows=False`` leaves the
    passed checks out of the rows (a sweep's hundreds of thousands); every row keeps its
    index in ``checks`` as its id, so links to a check stay valid."""
    s, shared = _Strings(), _Strings(key=lambda v: json.dumps(v, sort_keys=True))
    rows, extra = [], {}
    for i, r in enumerate(checks):
        passed = r.status is Status.PASSED
        if passed and not passed_rows:
            continue
        rows.append([
            i, SEVERITY.index(status_of(r)), s(r.kind), s(r.name), s(r.backend), s(r.device),
            s(r.dtype), s(r.test_id), _short(r.discrepancy_ratio), _short(r.discrepancy),
            _short(r.allowed), r.actual, r.expected, r.seed, _short(r.duration_s),
            s("" if passed else r.message), s(r.reproducer),
            s(r.subject), s(_shapes(r)),
        ])
        if not passed:
            extra[str(i)] = _extra(r)
            _share(extra[str(i)], shared)
    return {"columns": list(COLUMNS), "statuses": list(SEVERITY), "strings": s.items,
            "rows": _jsonable(rows), "extra": extra, "shared": shared.items}


#: the details whose values several checks share (the triage's evidence of one call): stored
#: once in the page's ``shared`` list, referred to as ``{"$shared": k}``
SHARED_DETAILS = ("triage",)


def _share(x: dict[str, Any], shared: _Strings) -> None:
    details = x.get("details")
    if isinstance(details, dict):
        for name in SHARED_DETAILS:
            if isinstance(details.get(name), (dict, list)):
                details[name] = {"$shared": shared(details[name])}


def failed_tests_without_checks(data: StreamData) -> list[Any]:
    """Tests that failed but recorded no failing check (the failure is outside the checks)."""
    failing_ids = {c.test_id for c in data.checks if not c.ok}  # known failures included
    return [t for t in data.tests if not t.ok and t.test_id not in failing_ids]
