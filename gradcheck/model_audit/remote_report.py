"""The report of a model checked over the model protocol (:func:`gradcheck.audit_process`):
:class:`ProcessAuditReport`, its text summary, and where a cut lies by name prefix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.backends.model_peer import PeerTraffic
from gradcheck.core.results import FlowStatus, ParameterFlow
from gradcheck.model_audit.flow import AuditReport

__all__ = ["ProcessAuditReport", "localize"]


@dataclass
class ProcessAuditReport(AuditReport):
    """An :class:`~gradcheck.AuditReport` of a model checked over the model protocol, with what
    the summary shows: the program, its engine, the dtypes it built or refused, the FD dtype and
    its resolution, and the cost (requests, bytes, forwards)."""

    command: str = ""
    hello: dict[str, Any] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ()
    refused: dict[str, str] = field(default_factory=dict)
    fd_dtype: str = ""
    notes: tuple[str, ...] = ()
    traffic: PeerTraffic | None = None
    forwards: int = 0
    #: the measured time of one forward (``model.loss``, seconds); requests' timeouts scale by it
    forward_s: float = 0.0
    localization: str = ""
    reproduce: str = ""

    def summary(self) -> str:
        """The text report: header, cost, the flow table, the other checks."""
        h = self.hello
        size = sum(int(np.prod(p.shape)) if p.shape else 1 for p in self.parameters)
        lines = [f"gradcheck model  {self.command}   {h.get('engine', '?')} "
                 f"{h.get('engine_version', '')}, {h.get('library', '?')} "
                 f"{h.get('library_version', '')}".rstrip(),
                 f"{len(self.parameters)} tensors, {size:,} parameters; "
                 f"FD in {self.fd_dtype or '-'}"]
        for d, why in self.refused.items():
            lines.append(f"{d} build refused: {why!r}")
        lines.extend(self.notes)
        if self.traffic is not None:
            lines.append(f"cost: {self.forwards} forwards, {self.traffic.total_requests} "
                         f"requests, {self.traffic.total_bytes:,} bytes over the pipe; "
                         f"one forward {self.forward_s * 1e3:.3g} ms")
        lines.append("")
        by_name = {r.name: r for r in self.results}
        rows = [("name", "shape", "flow", "|g|", "FD check")]
        for p in self.parameters:
            g = by_name.get(f"grad[{p.name}]")
            rows.append((p.name, "x".join(map(str, p.shape)) or "()", _flow_word(p),
                         f"{p.ad_norm:.4g}" if p.ad_norm > 0 else "-",
                         g.status.value if g is not None else "-"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                  for r in rows]
        if self.localization:
            lines.append("  " + self.localization)
        lines.append("")
        several = len({r.dtype for r in self.results}) > 1
        for r in self.results:
            if r.name.startswith(("flow[", "grad[")) and r.ok:
                continue
            name = f"{r.name} ({r.dtype})" if several else r.name
            lines.append(f"{name:<28} {r.status.value.upper():<12} {r.message}")
        if self.reproduce:
            lines.append(f"reproduce: {self.reproduce}")
        return "\n".join(lines)


def _flow_word(p: ParameterFlow) -> str:
    if p.status is FlowStatus.BLOCKED_UNINTENTIONALLY:
        return "BLOCKED: " + ("absent from the store" if "absent" in p.message else
                              "present but zero")
    return p.status.value.upper() if p.status in (FlowStatus.LEAK, FlowStatus.UNUSED,
                                                  FlowStatus.INCONCLUSIVE) else p.status.value



def localize(records: Sequence[ParameterFlow]) -> str:
    """Where the cut is, by name prefix: "every fc1.*, none of fc2.*, fc3.*"."""
    blocked = {p.name for p in records if p.status is FlowStatus.BLOCKED_UNINTENTIONALLY}
    if not blocked:
        return ""
    groups: dict[str, list[str]] = {}
    for p in records:
        prefix = p.name.rsplit(".", 1)[0] if "." in p.name else p.name
        groups.setdefault(prefix, []).append(p.name)
    every = [g for g, ns in groups.items() if all(n in blocked for n in ns)]
    some = [g for g, ns in groups.items() if any(n in blocked for n in ns)
            and not all(n in blocked for n in ns)]
    flowing = [g for g, ns in groups.items() if not any(n in blocked for n in ns)]
    parts = []
    if every:
        parts.append("blocked: every " + ", ".join(f"{g}.*" if g != groups[g][0] else g
                                                   for g in every))
    if some:
        parts.append("part of " + ", ".join(
            f"{g}.* ({', '.join(n for n in groups[g] if n in blocked)})" for g in some))
    if flowing:
        parts.append("none of " + ", ".join(f"{g}.*" if g != groups[g][0] else g
                                            for g in flowing))
    return "; ".join(parts)
