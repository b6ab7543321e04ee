"""The report's sweep sections: the triaged findings (one row per de-duplicated finding, with
its class, evidence and reproducer) and the names each backend's inventory left out, by reason.

Both read only the stream: a sweep result carries :attr:`CheckResult.sweep` (its point, or
``left_out``) and a triaged one :attr:`CheckResult.triage` (:mod:`gradcheck.sweep.triage`).  A
stream without sweep results renders nothing here.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

from gradcheck.core.results import number
from gradcheck.stream import StreamData
from gradcheck.sweep.triage import findings

Section = Callable[[str, str, str, str], str]
Escape = Callable[[object], str]


def _evidence_text(ev: dict) -> str:
    parts = []
    fd = ev.get("fd", {})
    if "ad" in fd:
        parts.append(f"scaled FD (order {fd.get('order', 1)}): AD {number(fd['ad'], 10)}, FD 2^-k "
                     f"{number(fd['fd_pow2'], 10)}, 3^-k {number(fd['fd_pow3'], 10)}, families "
                     f"{'agree' if fd.get('fd_families_agree') else 'do not converge/agree'}")
    elif "error" in fd:
        parts.append(f"scaled FD: {fd['error']}")
    mp = ev.get("mpmath", {})
    if "max_relative_error" in mp:
        parts.append(f"mpmath: max relative error {number(mp['max_relative_error'])} over "
                     f"{mp['elements']} element(s) (at x = {number(mp['at'], 6)}: AD "
                     f"{number(mp['ad'], 10)}, mpmath {number(mp['mpmath'], 10)})")
    ref = ev.get("reference", {})
    if "function" in ref:
        forward = number(ref["forward_max_relative"])
        parts.append(f"{ref['function']}: forward max relative {forward}, AD vs its FD "
                     f"{number(ref.get('ad_vs_reference_fd'))}")
    eng = ev.get("engines", {})
    if "vjp" in eng:
        parts.append(f"{eng['op']}: VJP {number(eng['vjp'], 10)} (vs AD "
                     f"{number(eng.get('vs_ad'))}, vs FD {number(eng.get('vs_fd'))})")
    if ev.get("upstream_skips"):
        parts.append("the backend's own suite skips/xfails " + ", ".join(ev["upstream_skips"]))
    return "; ".join(parts) or json.dumps(ev, default=str)[:300]


def findings_section(data: StreamData, section: Section, esc: Escape,
                     link: Callable[[int], str]) -> str:
    """The findings of the sweep results in ``data`` ('' where none was triaged)."""
    found = findings(data.checks)
    left = [r for r in data.checks if r.sweep is not None and r.sweep.left_out is not None]
    if not found and not left:
        return ""
    index = {id(r): i for i, r in enumerate(data.checks)}
    counts = Counter(f.cls for f in found)
    rows = []
    for f in found:
        i = index.get(id(f.worst), 0)
        rows.append(
            f'<tr><td class="s-{"failed" if f.cls == "confirmed" else "inconclusive"}">'
            f"{esc(f.cls)}</td><td><a href=\"{esc(link(i))}\">{esc(f.op)}</a></td>"
            f"<td>{esc(f.kind_family)}</td><td>{esc(f.symptom)}</td><td>{f.count}</td>"
            f"<td>{esc(', '.join(f.dtypes))}</td><td>{esc(', '.join(f.points))}</td>"
            f"<td>{esc(_evidence_text(f.evidence))}<details><summary>reproducer</summary>"
            f"<pre>{esc(f.reproducer)}</pre></details></td></tr>")
    summary = ", ".join(f"{n} {c}" for c, n in counts.most_common()) or "none"
    table = ('<table class="grid"><thead><tr><th>class</th><th>op</th><th>check</th>'
             "<th>symptom</th><th>results</th><th>dtypes</th><th>points</th><th>evidence</th>"
             f"</tr></thead><tbody>{''.join(rows)}</tbody></table>") if rows else ""
    reasons = Counter((r.backend, str(r.sweep.left_out).split(":")[0]) for r in left
                      if r.sweep is not None)
    left_rows = "".join(f"<tr><td>{esc(b)}</td><td>{esc(why)}</td><td>{n}</td></tr>"
                        for (b, why), n in sorted(reasons.items(), key=lambda t: -t[1]))
    left_html = ('<h3>Left out of the inventory</h3><table class="grid"><thead><tr><th>backend'
                 f"</th><th>reason</th><th>names</th></tr></thead><tbody>{left_rows}</tbody>"
                 "</table>") if left_rows else ""
    return section("findings", "Sweep findings", f"{table}{left_html}",
                   f"{len(found)} de-duplicated finding(s): {summary}. Each failed or errored "
                   "sweep check is classified by independent evidence (docs/sweep.md); the "
                   "row links to its worst result.")
