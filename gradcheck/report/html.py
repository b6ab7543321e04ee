"""The self-contained HTML report: one file, inline CSS/JS/SVG, no network, strict CSP.

The summary sections are rendered here (every string through :func:`esc`); the table of all
checks and the per-check detail panel are drawn by ``assets/report.js`` from the JSON embedded
in a ``<script type="application/json">`` block (parsed with ``JSON.parse``, never evaluated).
The page's Content-Security-Policy allows only its own inline script and style, by hash:
``default-src 'none'`` forbids every network request, and there is no ``unsafe-eval``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from collections import Counter
from importlib import resources
from typing import Any
from urllib.parse import quote

from gradcheck.core.results import Status, shorten
from gradcheck.report import findings, model
from gradcheck.stream import StreamData, expected
from gradcheck.stream.reader import well_formed

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def esc(value: Any) -> str:
    """HTML-escape any value for text or a quoted attribute (control characters replaced, lone
    surrogates written as escapes: see :func:`~gradcheck.stream.reader.well_formed`)."""
    text = _CONTROL.sub("\ufffd", well_formed(value))
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#x27;"))


def _asset(name: str) -> str:
    return (resources.files("gradcheck.report") / "assets" / name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def embed_json(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&`` or
    non-ASCII characters survive literally, so no string can close the element."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _hash_link(**params: str | int) -> str:
    return "#" + "&".join(f"{k}={quote(well_formed(v), safe='')}" for k, v in params.items())


def _ratio_class(cell: model.MatrixCell) -> str:
    status, r = cell.status, cell.worst_ratio
    if status == "error":
        return "err"
    if status == "failed":
        return "f3" if r is None or r > 1e3 else ("f2" if r > 10 else "f1")
    if status == model.KNOWN:
        return "known"
    if r is not None and status == "passed":
        return "m0" if r < 1e-2 else ("m1" if r < 1e-1 else "m2")
    return {"inconclusive": "inc", "skipped": "skip"}.get(status, "m0")


def _fmt_ratio(r: float | None) -> str:
    return "" if r is None else (f"{r:.2g}" if r < 1e4 else f"{r:.0e}")


def _cell_text(cell: model.MatrixCell) -> str:
    labels = {"error": "error", model.KNOWN: "known", "inconclusive": "inconcl.",
              "skipped": "skipped"}
    if cell.status in labels:
        return labels[cell.status]
    return _fmt_ratio(cell.worst_ratio) or cell.status


def _counts_cells(counts: Counter) -> str:
    return "".join(f'<td class="num s-{s}">{counts.get(s, 0) or ""}</td>' for s in model.SEVERITY)


def _section(ident: str, title: str, body: str, note: str = "") -> str:
    note_html = f'<p class="note">{esc(note)}</p>' if note else ""
    return f'<section id="{ident}"><h2>{esc(title)}</h2>{note_html}{body}</section>'


def _summary(data: StreamData) -> str:
    counts = model.status_counts(data.checks)
    cards = "".join(f'<div class="card s-{s}"><b>{counts[s]}</b>{s}</div>' for s in model.SEVERITY)
    head = "".join(f"<th>{s}</th>" for s in model.SEVERITY)
    rows = "".join(
        f"<tr><td>{esc(b)}</td><td>{esc(d)}</td><td>{esc(t)}</td>{_counts_cells(c)}</tr>"
        for (b, d, t), c in model.counts_by_target(data.checks))
    table = (f'<table class="grid"><thead><tr><th>backend</th><th>device</th><th>dtype</th>'
             f"{head}</tr></thead><tbody>{rows}</tbody></table>")
    tests = Counter(t.outcome for t in data.tests)
    tline = ", ".join(f"{n} {o}" for o, n in sorted(tests.items()))
    tests_html = f'<p class="note">pytest tests: {esc(tline)}</p>' if tests else ""
    return _section("summary", "Summary", f'<div class="cards">{cards}</div>{tests_html}{table}')


def _matrix(data: StreamData) -> str:
    m = model.build_matrix(data.checks)
    if not m.ops:
        return ""
    head = "".join(f'<th class="col"><span>{esc(b)}<br>{esc(d)}<br>{esc(t)}</span></th>'
                   for b, d, t in m.columns)
    body = []
    for op in m.ops:
        cells = []
        for col in m.columns:
            cell = m.cells.get((op, col))
            if cell is None:
                cells.append('<td class="none"></td>')
                continue
            counts = ", ".join(f"{n} {s}" for s, n in sorted(cell.counts.items()))
            title = f"{op} on {' '.join(col)}: {counts}; worst ratio {_fmt_ratio(cell.worst_ratio)}"
            link = _hash_link(name=op, backend=col[0], device=col[1], dtype=col[2])
            cells.append(f'<td class="{_ratio_class(cell)}" title="{esc(title)}">'
                         f'<a href="{esc(link)}">{esc(_cell_text(cell))}'
                         "</a></td>")
        body.append(f'<tr><th class="op">{esc(op)}</th>{"".join(cells)}</tr>')
    legend = "".join(f'<span class="{c}">{esc(t)}</span>' for c, t in (
        ("m0", "ratio < 0.01"), ("m1", "< 0.1"), ("m2", "<= 1"), ("f1", "failed, <= 10"),
        ("f2", "failed, <= 1e3"), ("f3", "failed, > 1e3"), ("err", "error"),
        ("known", "known discrepancy"), ("inc", "inconclusive"), ("skip", "skipped")))
    return _section("matrix", "Op matrix", f'<div class="legend">{legend}</div>'
                    f'<div class="scroll"><table class="matrix"><thead><tr><th>op</th>{head}'
                    f'</tr></thead><tbody>{"".join(body)}</tbody></table></div>',
                    "Worst discrepancy ratio (|AD - oracle| / allowed) of each op per backend, "
                    "device and dtype; click a cell to list its checks.")


def _semantics(data: StreamData) -> str:
    rows = [(i, r) for i, r in enumerate(data.checks) if r.kind in model.SEMANTIC_KINDS]
    if not rows:
        return ""
    body = "".join(
        f'<tr><td><a href="{esc(_hash_link(check=i))}">{esc(r.name)}</a></td><td>{esc(r.kind)}'
        f"</td><td>{esc(r.backend)}</td><td>{esc(r.device)}</td><td>{esc(r.dtype)}</td>"
        f'<td class="s-{model.status_of(r)}">{model.status_of(r)}</td><td>{esc(r.message)}'
        "</td></tr>" for i, r in rows)
    return _section("semantics", "Semantic probes", '<table class="grid"><thead><tr><th>probe'
                    "</th><th>kind</th><th>backend</th><th>device</th><th>dtype</th><th>status"
                    f"</th><th>outcome</th></tr></thead><tbody>{body}</tbody></table>")


def _flow(data: StreamData) -> str:
    maps = model.flow_maps(data.checks)
    if not maps:
        return ""
    blocks = []
    for fm in maps:
        if not fm.parameters:
            blocks.append(f'<h3><a href="{esc(_hash_link(check=fm.index))}">{esc(fm.title)}</a>'
                          "</h3><p class=\"note\">no per-parameter records</p>")
            continue
        cells = "".join(
            f'<div class="param fl-{esc(_flow_class(s))}" '
            f'title="{esc(f"{n}: {s}" + (f" ({note})" if note else ""))}">'
            f"<span>{esc(n)}</span><b>{esc(s)}</b></div>" for n, s, note in fm.parameters)
        blocks.append(f'<h3><a href="{esc(_hash_link(check=fm.index))}">{esc(fm.title)}</a>'
                      f'</h3><div class="flowmap">{cells}</div>{_flow_table(fm)}')
    return _section("flow", "Gradient flow", "".join(blocks),
                    "Per-parameter gradient status from model audits.")


def _flow_class(status: str) -> str:
    return re.sub("[^a-z_]", "", status.lower().replace(" ", "_"))


#: a flow map's table of evidence is shown open up to this many parameters (folded above)
FLOW_TABLE_OPEN = 64


def _flow_table(fm: model.FlowMap) -> str:
    """The map's per-parameter evidence as a table under its cells: status, the numbers the
    audit measured and, for records carried by flow results, their message."""
    msgs = fm.messages if len(fm.messages) == len(fm.parameters) else [""] * len(fm.parameters)
    rows = "".join(
        f'<tr><td class="mono">{esc(n)}</td><td class="flowcell fl-{esc(_flow_class(s))}">'
        f"{esc(s)}</td><td>{esc(note)}</td><td>{esc(msg)}</td></tr>"
        for (n, s, note), msg in zip(fm.parameters, msgs, strict=True))
    opened = " open" if len(fm.parameters) <= FLOW_TABLE_OPEN else ""
    return (f'<details class="flowtable"{opened}><summary>per-parameter evidence '
            f"({len(fm.parameters)})</summary><table><thead><tr><th>parameter</th><th>flow</th>"
            f"<th>measured</th><th>message</th></tr></thead><tbody>{rows}</tbody></table>"
            "</details>")


def _failures(data: StreamData) -> str:
    bad = sorted(((i, r) for i, r in enumerate(data.checks) if model.is_bad(r)),
                 key=lambda t: (model.SEVERITY.index(t[1].status.value),
                                -(t[1].discrepancy_ratio or 0)))
    items = "".join(
        f'<li><a href="{esc(_hash_link(check=i))}"><span class="badge s-{r.status.value}">'
        f"{r.status.value}</span> {esc(r.name)}: {esc(r.subject)} [{esc(r.backend)} "
        f"{esc(r.device)} {esc(r.dtype)}]</a>"
        + (f" in <code>{esc(r.test_id)}</code>" if r.test_id else "")
        + f" <span class=\"note\">{esc(shorten(r.message, 200))}</span></li>" for i, r in bad[:50])
    more = f'<p class="note">{len(bad) - 50} more in the table below.</p>' if len(bad) > 50 else ""
    outside = model.failed_tests_without_checks(data)
    tests = "".join(f"<li><code>{esc(t.test_id)}</code> {esc(t.outcome)}<pre>"
                    f"{esc(t.message[-3000:])}</pre></li>" for t in outside[:100])
    if not items and not tests:
        return ""
    body = (f'<ol class="failures">{items}</ol>{more}' if items else "")
    if tests:
        body += f'<h3>Tests that failed outside any check</h3><ul class="tests">{tests}</ul>'
    return _section("failures", "Failures", body)


def _expected(data: StreamData) -> str:
    """The known discrepancies the tests declared (``gradcheck_known``) or expected (xfail,
    ``pytest.raises``): per test, its reason, its link and how many checks it covers; the
    catalog's own known discrepancies are in the table and the matrix only."""
    groups: dict[tuple[str, str, str, str], list[int]] = {}
    for i, r in enumerate(data.checks):
        mark = r.known_as
        if r.known and mark is not None and mark.nature in (expected.DECLARED,
                                                             expected.EXPECTED):
            groups.setdefault((r.test_id, mark.nature, mark.reason, mark.link or ""),
                              []).append(i)
    if not groups:
        return ""
    items = []
    for (test_id, nature, reason, link), rows in list(groups.items())[:200]:
        href = (f' <a href="{esc(link)}" rel="noopener noreferrer">{esc(link)}</a>'
                if link.startswith(("https://", "http://")) else (f" {esc(link)}" if link
                                                                   else ""))
        items.append(f'<li><span class="badge s-known">{esc(nature)}</span> '
                     f"<code>{esc(test_id)}</code>: {esc(reason)}{href} "
                     f'(<a href="{esc(_hash_link(check=rows[0]))}">{len(rows)} check(s)</a>)'
                     "</li>")
    return _section("known", "Known discrepancies declared or expected by tests",
                    f'<ul class="tests">{"".join(items)}</ul>',
                    "Failed checks inside a test pytest counted as expected (xfailed, or "
                    "passed: pytest.raises) or marked gradcheck_known; they do not fail the run.")


def _problems(data: StreamData) -> str:
    items = [esc(str(p)) for p in data.problems[:200]]
    if len(data.problems) > 200:
        items.append(f"... and {len(data.problems) - 200} more")
    unfinished = [r for r in data.runs.values() if not r.ended]
    for r in unfinished:
        role = r.environment.get("role", "?")
        items.append(esc(f"process {r.run_id} ({role}, {r.source}) has no end record: it was "
                         "killed, crashed or is still running; its completed results are included"))
    if not items:
        return ""
    return _section("problems", "Stream problems",
                    "<ul>" + "".join(f"<li>{t}</li>" for t in items) + "</ul>",
                    "Inputs and lines that could not be read, and records of an unknown schema "
                    "version, were skipped; everything else is shown.")


def _environment(data: StreamData) -> str:
    envs: dict[str, dict[str, Any]] = {}
    backends: dict[str, dict[str, Any]] = {}
    roles: Counter[str] = Counter()
    for run in data.runs.values():
        env = {k: v for k, v in run.environment.items() if k not in ("role", "pid", "started")}
        if env:
            envs.setdefault(json.dumps(env, sort_keys=True, default=str), env)
        roles[run.environment.get("role", "unknown")] += 1
        for b in run.backends:
            backends.setdefault(str(b.get("name")), b)
    blocks = []
    for env in envs.values():
        git = env.get("git") or {}
        rev = f"{git.get('commit', '')}{' (dirty)' if git.get('dirty') else ''}" if git else "n/a"
        rows = [("gradcheck", env.get("gradcheck")), ("git revision", rev),
                ("python", f"{env.get('python')} ({env.get('implementation')})"),
                ("platform", env.get("platform")), ("machine", env.get("machine")),
                ("host", env.get("host"))]
        rows += [(f"package {k}", v) for k, v in sorted((env.get("packages") or {}).items())]
        blocks.append('<table class="kv">' + "".join(
            f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows) + "</table>")
    brow = "".join(
        f"<tr><td>{esc(n)}</td><td>{esc(b.get('version'))}</td><td>{esc(_join(b.get('devices')))}"
        f"</td><td>{esc(_join(b.get('dtypes')))}</td><td>{esc(_semantics_text(b))}</td></tr>"
        for n, b in sorted(backends.items()))
    if brow:
        blocks.append('<table class="grid"><thead><tr><th>backend</th><th>version</th><th>devices'
                      "</th><th>dtypes</th><th>declared semantics</th></tr></thead>"
                      f"<tbody>{brow}</tbody></table>")
    procs = ", ".join(f"{n} {r}" for r, n in sorted(roles.items()))
    return _section("environment", "Environment", "".join(blocks) or "<p>not recorded</p>",
                    f"writing processes: {procs or 'none recorded'}")


def _join(v: Any) -> str:
    return ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v or "")


def _semantics_text(b: dict[str, Any]) -> str:
    sem = b.get("semantics") or {}
    return "; ".join(f"{k}={v}" for k, v in sem.items() if v not in ("", None))


def render(data: StreamData, *, title: str = "gradcheck report", passed_rows: bool = True
           ) -> str:
    """The complete HTML page for ``data``; ``passed_rows=False``: the table of all checks
    lists the checks that did not pass only (the counts above still count every check)."""
    css, js = _asset("report.css"), _asset("report.js")
    if "</script" in js.lower() or "</style" in css.lower():  # pragma: no cover - asset bug
        raise RuntimeError("report assets must not contain closing tags")
    counts = model.status_counts(data.checks)
    verdict = "passed" if data.passed else "failed"
    badge = verdict
    if data.passed and (data.unread_inputs or data.unknown_schema):  # a pass of part only
        verdict, badge = "incomplete", "inconclusive"
    csp = (f"default-src 'none'; script-src 'sha256-{_sha256(js)}'; "
           f"style-src 'sha256-{_sha256(css)}'; img-src data:; base-uri 'none'; "
           "form-action 'none'")
    summary_line = f"{len(data.checks)} checks: " + ", ".join(
        f"{n} {s}" for s, n in counts.items() if n)
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    sources = ", ".join(data.sources)
    sweep = findings.findings_section(data, _section, esc, lambda i: _hash_link(check=i))
    sections = "".join([_problems(data), _summary(data), sweep, _failures(data),
                        _expected(data), _matrix(data),
                        _semantics(data), _flow(data), _table_shell(data, passed_rows),
                        _environment(data)])
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}: {verdict}</title><style>{css}</style></head><body>"
        f'<header><h1>{esc(title)} <span class="badge s-{badge}">{verdict}</span></h1>'
        f'<p>{esc(summary_line)}</p><p class="note">generated {esc(generated)} from '
        f"{esc(sources)}</p><nav>"
        + "".join(f'<a href="#{s}">{s}</a>' for s in ("summary", "failures", "matrix",
                                                       "checks", "environment"))
        + f"</nav></header><main>{sections}</main>"
        '<aside id="detail" hidden></aside>'
        f'<script type="application/json" id="gc-data">'
        f"{embed_json(model.table_data(data.checks, passed_rows=passed_rows))}"
        f"</script><script>{js}</script></body></html>\n"
    )


def _table_shell(data: StreamData, passed_rows: bool = True) -> str:
    left = 0 if passed_rows else sum(r.status is Status.PASSED for r in data.checks)
    note = (f"{left} passed checks are not listed here: the result stream "
            f"({', '.join(data.sources)}) has every result." if left else "")
    return _section("checks", "All checks" if not left else "Checks that did not pass", (
        '<div class="controls" id="controls">'
        '<input id="f-q" type="search" placeholder="search name, test, message..." size="32">'
        + "".join(f'<label>{k} <select id="f-{k}"><option value="">all</option></select></label>'
                  for k in ("status", "backend", "device", "dtype", "kind"))
        + '<label>rows <select id="f-size"><option>50</option><option selected>100</option>'
        '<option>500</option></select></label></div>'
        '<p id="count" class="note"></p>'
        '<table class="checks" id="checks-table"><thead><tr>'
        + "".join(f'<th data-sort="{c}" tabindex="0">{t}</th>' for c, t in (
            ("status", "status"), ("name", "name"), ("subject", "check"), ("backend", "backend"),
            ("device", "device"), ("dtype", "dtype"), ("ratio", "ratio"),
            ("discrepancy", "|diff|"), ("allowed", "allowed"), ("test", "test")))
        + '</tr></thead><tbody id="rows"></tbody></table>'
        '<div class="pager"><button id="prev" type="button">previous</button>'
        '<span id="page"></span><button id="next" type="button">next</button></div>'
        "<noscript><p>The table needs JavaScript; the summary above does not.</p></noscript>"
    ), note)
