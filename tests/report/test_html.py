"""The HTML report and JUnit XML: escaping, strict CSP, well-formed SVG and XML, what each
section shows."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from html.parser import HTMLParser

import pytest

from gradcheck.core.results import CheckResult, Status
from gradcheck.report import html as report_html
from gradcheck.report import junit, model, write_report
from gradcheck.stream import StreamData, TestOutcome
from tests.support.report_data import HOSTILE, hostile_results, numpy_results


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if tag == "script":
            self.scripts.append("")

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def _page(results: list[CheckResult], **kw) -> str:
    return report_html.render(StreamData(checks=results, **kw))


@pytest.fixture(scope="module")
def hostile_page() -> str:
    tests = [TestOutcome("tests/t.py::test_" + HOSTILE, "failed", 0.1, "boom " + HOSTILE)]
    return _page(hostile_results() + numpy_results(), tests=tests)


def test_markup_from_adapter_name_exception_and_test_id_is_inert(hostile_page):
    parser = _Tags()
    parser.feed(hostile_page)
    assert [t for t, _ in parser.tags].count("script") == 2  # the data block and the page JS
    assert "img" not in [t for t, _ in parser.tags]
    assert not [(t, a) for t, a in parser.tags for k in a if k.startswith("on")]
    assert hostile_page.count("<script") == 2
    escaped = "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;"
    assert escaped in hostile_page  # the summary, failure list and matrix show it as text
    data_block, _code = parser.scripts
    assert "<" not in data_block and ">" not in data_block
    data = json.loads(data_block)  # ...and the data keeps the original text
    assert "numpy" + HOSTILE in data["strings"]
    assert any(HOSTILE in s for s in data["strings"] if s.startswith("the backend's VJP raised"))


def test_page_has_a_strict_csp_that_allows_exactly_its_own_script_and_style(hostile_page):
    parser = _Tags()
    parser.feed(hostile_page)
    metas = [a for t, a in parser.tags if t == "meta" and a.get("http-equiv")]
    (csp,) = [m["content"] for m in metas if m["http-equiv"] == "Content-Security-Policy"]
    assert "default-src 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    js = parser.scripts[1]
    css = re.search(r"<style>(.*?)</style>", hostile_page, re.S).group(1)
    for text in (js, css):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    for banned in ("eval(", "new Function", "innerHTML", "outerHTML", "insertAdjacentHTML",
                   "document.write", "setAttribute(\"on", "XMLHttpRequest", "fetch("):
        assert banned not in js
    assert not re.search(r"style=", hostile_page)  # inline style attributes would be blocked
    # no network: no external resource anywhere (the SVG namespace is a name, not a request)
    urls = re.findall(r"(?:src|href|action)=\"([^\"]*)\"", hostile_page)
    assert urls and all(u.startswith("#") for u in urls)


def test_table_data_is_compact_and_complete():
    results = numpy_results()
    data = model.table_data(results)
    assert len(data["rows"]) == len(results)
    cols = {c: i for i, c in enumerate(data["columns"])}
    for r, row in zip(results, data["rows"], strict=True):
        assert data["strings"][row[cols["name"]]] == r.name
        assert data["statuses"][row[cols["status"]]] == r.status.value
        assert (str(row[cols["id"]]) in data["extra"]) == (r.status is not Status.PASSED)
    for r in results:  # the page draws the FD convergence plot of a failure from this
        if r.status is Status.FAILED and r.convergence:
            assert data["extra"][str(results.index(r))]["convergence"] == [
                list(c) for c in r.convergence]
    json.dumps(data, allow_nan=False)  # inf/nan were encoded as strings


def test_summary_matrix_and_failure_sections():
    results = numpy_results()
    page = _page(results)
    counts = StreamData(checks=results).counts()
    for status, n in counts.items():
        assert f'<div class="card s-{status}"><b>{n}</b>{status}</div>' in page
    m = model.build_matrix(results)
    assert m.cells[("sin_sign_bug", ("numpy", "cpu", "float64"))].status == "failed"
    assert m.cells[("sin", ("numpy", "cpu", "float64"))].status == "passed"
    assert m.cells[("abs", ("numpy", "cpu", "float64"))].status == "inconclusive"
    assert 'class="f3"' in page and 'class="m0"' in page and 'class="inc"' in page
    assert "#name=sin_sign_bug&amp;backend=numpy&amp;device=cpu&amp;dtype=float64" in page
    assert page.count('<li><a href="#check=') == sum(not r.ok for r in results)


def test_semantic_probes_and_flow_maps_render_when_present():
    base = numpy_results()[0]
    probe = replace(base, kind="semantic", name="accumulation", status=Status.FAILED,
                    message="declared functional but a 2nd backward added into .grad")
    flow = replace(base, kind="flow", name="audit:MLP", status=Status.FAILED, details={
        "parameters": [{"name": "fc1.weight", "status": "ok", "norm": 0.3},
                       {"name": "fc2.bias<b>", "status": "none"},
                       {"name": "head.weight", "status": "nan"}]})
    flow2 = replace(flow, name="audit:dict", details={"parameters": {"w": "ok", "b": {
        "status": "zero"}}})
    page = _page([base, probe, flow, flow2])
    assert 'id="semantics"' in page and "declared functional but a 2nd backward" in page
    assert 'id="flow"' in page and 'class="param fl-nan"' in page
    assert "fc2.bias&lt;b&gt;" in page and 'class="param fl-zero"' in page
    matrix_ops = model.build_matrix([base, probe, flow]).ops
    assert matrix_ops == [base.name]  # probes and audits are not ops
    plain = _page([base])
    assert 'id="semantics"' not in plain and 'id="flow"' not in plain


def test_junit_is_well_formed_with_counts_and_evidence():
    results = hostile_results() + numpy_results()
    results.append(replace(results[-1], message="bad \x00 bytes \x1b[31m", status=Status.FAILED))
    tests = [TestOutcome("t.py::test_outside", "failed", 0.5, "ValueError: \x07 <oops>")]
    xml = junit.render(StreamData(checks=results, tests=tests))
    root = ET.fromstring(xml)  # parses: control characters were replaced
    st = [r.status for r in results]
    assert int(root.get("tests")) == len(results) + 1
    assert int(root.get("failures")) == st.count(Status.FAILED) + 1
    assert int(root.get("errors")) == st.count(Status.ERROR)
    assert int(root.get("skipped")) == st.count(Status.SKIPPED) + st.count(Status.INCONCLUSIVE)
    failure = next(c for c in root.iter("testcase") if c.find("failure") is not None
                   and "tanh_mutant" in c.get("name"))
    text = failure.find("failure").text
    assert "allowed" in text and "gradcheck.check(fn, *inputs" in text and "element" in text
    assert any(HOSTILE in c.get("classname") for c in root.iter("testcase"))


def test_write_report_writes_both_files(tmp_path):
    stream_file = tmp_path / "results.jsonl"
    stream_file.write_text("".join(r.to_json() + "\n" for r in numpy_results()))
    files = write_report([stream_file], tmp_path / "out")
    assert files.html.read_text().startswith("<!DOCTYPE html>")
    ET.parse(files.junit)
    assert sorted(p.name for p in files.html.parent.iterdir()) == ["index.html", "junit.xml"]


def test_passed_rows_can_be_left_out_and_ids_stay_stream_indexes():
    """The sweep's report lists only what did not pass (its passed checks are most of
    300,000); every row keeps its index in the stream as its id, so links stay valid."""
    results = numpy_results()
    data = model.table_data(results, passed_rows=False)
    cols = {c: i for i, c in enumerate(data["columns"])}
    bad = [i for i, r in enumerate(results) if r.status is not Status.PASSED]
    assert bad and len(bad) < len(results)
    assert [row[cols["id"]] for row in data["rows"]] == bad
    page = report_html.render(StreamData(checks=results), passed_rows=False)
    left = len(results) - len(bad)
    assert f"{left} passed checks are not listed here" in page
    assert "Checks that did not pass" in page
    assert "passed checks are not listed" not in report_html.render(StreamData(checks=results))


def test_evidence_shared_by_several_checks_is_stored_once():
    results = [r for r in numpy_results() if r.status is Status.FAILED][:2]
    assert len(results) == 2
    evidence = {"class": "confirmed", "sources": [{"name": "reference", "agrees": False}]}
    results = [replace(r, details={**r.details, "triage": evidence})
               for r in results]
    data = model.table_data(results)
    assert data["shared"] == [evidence]
    for k in ("0", "1"):
        assert data["extra"][k]["details"]["triage"] == {"$shared": 0}


# -- any name: lone surrogates and the undecodable bytes of file names ---------------------------

ODD = "op\ud800\udcff\x01\x0b\ufffe<b>"  # a lone surrogate, a file name's byte, XML-forbidden
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def test_any_name_renders_to_well_formed_html_and_junit(tmp_path):
    """A check, test, backend or source name holding lone surrogates (a stream's ``\\ud800``,
    a non-UTF-8 file name's bytes) used to end in UnicodeEncodeError and no report."""
    bad = next(r for r in numpy_results() if not r.ok)
    odd = [replace(bad, name=ODD, backend="numpy" + ODD, test_id="t.py::" + ODD)]
    data = StreamData(checks=odd + numpy_results(), sources=["s\udcff.jsonl"],
                      tests=[TestOutcome("t.py::x" + ODD, "failed", 0.1, "boom" + ODD)])
    page = report_html.render(data)
    page.encode("utf-8")  # strict: every surrogate was written as an escape
    parser = _Tags()
    parser.feed(page)
    assert [t for t, _ in parser.tags].count("script") == 2 and "&lt;b&gt;" in page
    assert "op\\ud800\\xff" in page and "s\\xff.jsonl" in page  # visible, not dropped
    xml = junit.render(data)
    text = xml.decode("utf-8")  # strict
    assert not _XML_FORBIDDEN.search(text)
    root = ET.fromstring(xml)
    assert any("op\\ud800\\xff" in c.get("name") for c in root.iter("testcase"))
    files = write_report(data, tmp_path / "out")
    files.html.read_bytes().decode("utf-8")
    ET.parse(files.junit)


def test_flow_records_show_their_evidence_table_under_the_map():
    from gradcheck.core.results import FlowStatus, ParameterFlow

    base = numpy_results()[0]
    blocked = ParameterFlow("fc1.weight", (8, 4), FlowStatus.BLOCKED_UNINTENTIONALLY, False,
                            True, 0.0, 0.104, 3e-12, Status.SKIPPED, (),
                            "'fc1.weight': absent from the gradient store <cut>", 0.0)
    flows = replace(blocked, name="fc2.weight", status=FlowStatus.FLOWS, ad_norm=0.4,
                    gradient_check=Status.FAILED, message="'fc2.weight': gradient flows")
    recs = [replace(base, kind="flow", name=f"flow[{p.name}]", flow=p, message=p.message,
                    status=Status.FAILED) for p in (blocked, flows)]
    page = _page([base, *recs])
    section = page[page.index('id="flow"'):]
    section = section[:section.index("</section>")]
    assert '<details class="flowtable" open>' in section
    rows = re.findall(r"<tr><td class=\"mono\">([^<]+)</td><td class=\"flowcell fl-([a-z_]+)\">"
                      r"[^<]+</td><td>([^<]+)</td><td>([^<]*)</td></tr>", section)
    assert [(n, c) for n, c, _, _ in rows] == [("fc1.weight", "blocked_unintentionally"),
                                               ("fc2.weight", "flows")]
    assert "shape 8x4" in rows[0][2] and "FD check skipped" in rows[0][2]
    assert "FD check failed" in rows[1][2]
    assert rows[0][3] == "&#x27;fc1.weight&#x27;: absent from the gradient store &lt;cut&gt;"
    many = [replace(recs[1], flow=replace(flows, name=f"p{i}")) for i in range(70)]
    assert '<details class="flowtable">' in _page([base, *many])  # folded when large
