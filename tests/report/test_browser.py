"""The report in a real headless Chromium: loads under its CSP, filters, sorts, opens a
failure's detail with its plot, keeps injected markup inert; saves a screenshot.

Skipped when no Chromium is installed (Debian: ``apt-get install -y chromium``).  Set
``GRADCHECK_SCREENSHOT_DIR`` to keep the screenshots.
"""

from __future__ import annotations

import os
import shutil
import time
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from gradcheck.core.results import Status
from gradcheck.report import write_report
from gradcheck.stream import StreamData
from tests.support.audit_streams import audited_streams
from tests.support.chromium import Browser, find_chromium
from tests.support.report_data import HOSTILE, hostile_results, numpy_results

SVG = "{http://www.w3.org/2000/svg}"

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install -y chromium)")


def _keep(path: Path) -> None:
    target = os.environ.get("GRADCHECK_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)


def _click(b: Browser, selector: str) -> None:
    """A real mouse click (DevTools input events) at the centre of the element."""
    box = b.evaluate(f"(() => {{ const e = document.querySelector({selector!r});"
                     "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
                     "return [r.x + r.width / 2, r.y + r.height / 2]; })()")
    for kind in ("mousePressed", "mouseReleased"):
        b.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left",
               clickCount=1)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    results = numpy_results() + hostile_results()
    flow = replace(results[0], kind="flow", name="audit:MLP", status=Status.FAILED, details={
        "parameters": [{"name": "fc1.weight", "status": "ok"}, {"name": "fc2.bias",
                                                                  "status": "none"}]})
    out = tmp_path_factory.mktemp("browser")
    return write_report(StreamData(checks=results + [flow]), out).html


@pytest.fixture(scope="module")
def browser():
    with Browser(CHROMIUM, width=1400, height=1000) as b:
        yield b


def test_filter_the_table_and_open_a_failure(report, browser, tmp_path):
    b = browser
    b.navigate(report.as_uri())
    assert b.wait_for("document.documentElement.dataset.ready")  # the script ran under the CSP
    assert b.evaluate("document.title") == "gradcheck report: failed"
    n = len(numpy_results()) + len(hostile_results()) + 1
    assert b.evaluate("document.querySelectorAll('#rows tr').length") == n  # one page of 100
    mutant = [r for r in numpy_results() if r.name == "tanh_mutant"]
    failed = [r for r in mutant if r.status is Status.FAILED]
    # type into the search box like a user
    b.evaluate("document.getElementById('f-q').focus()")
    b.call("Input.insertText", text="tanh_mutant")
    b.wait_for(f"document.getElementById('count').textContent.startsWith('{len(mutant)} of {n}')")
    names = b.evaluate("[...document.querySelectorAll('#rows tr td:nth-child(2)')]"
                       ".map(td => td.textContent)")
    assert names == ["tanh_mutant"] * len(mutant)
    b.evaluate("(() => { const s = document.getElementById('f-status'); s.value = 'failed';"
               "s.dispatchEvent(new Event('change')); })()")
    b.wait_for(f"document.getElementById('count').textContent.startsWith('{len(failed)} of {n}')")
    assert "status=failed" in b.evaluate("location.hash")  # the view is a shareable link
    # sort by ratio (worst first on the first click)
    _click(b, "th[data-sort=ratio]")
    ratios = b.evaluate("[...document.querySelectorAll('#rows tr td:nth-child(7)')]"
                        ".map(td => Number(td.textContent))")
    assert ratios == sorted(ratios, reverse=True) and ratios[0] > 1
    b.evaluate("(() => { const s = document.getElementById('f-kind'); s.value = 'vjp';"
               "s.dispatchEvent(new Event('change')); })()")
    vjp = [r for r in failed if r.kind == "vjp"]
    b.wait_for(f"document.getElementById('count').textContent.startsWith('{len(vjp)} of {n}')")
    _click(b, "#rows tr")
    b.wait_for("!document.getElementById('detail').hidden")
    detail = b.evaluate("document.getElementById('detail').innerText")
    for expected in ("tanh_mutant", "AD (backend)", "oracle (expected)", "allowed from",
                     "discrepancy ratio", "Worst elements", "Finite-difference convergence",
                     "Reproduce", "gradcheck.check(", "seed"):
        assert expected in detail, expected
    svg = ET.fromstring(b.evaluate("new XMLSerializer().serializeToString("
                                   "document.querySelector('#detail svg'))"))
    _check_plot(svg)
    labels = {t.text for t in svg.iter(f"{SVG}text")}
    assert {"oracle", "AD", "allowed", "|AD - oracle|", "step h"} <= labels
    assert len(list(svg.iter(f"{SVG}polyline"))) == 2
    shot = b.screenshot(tmp_path / "report-detail.png")
    _keep(shot)
    assert shot.stat().st_size > 20_000
    errors = [m for m in b.console_messages() if "Content Security Policy" in m
              or m.startswith("exception")]
    assert errors == []


def test_injected_markup_stays_text_in_the_browser(report, browser, tmp_path):
    b = browser
    b.navigate(report.as_uri() + "#q=pwned&status=error")
    b.wait_for("document.documentElement.dataset.ready")
    assert b.evaluate("document.title") == "gradcheck report: failed"  # no script ran
    assert b.evaluate("document.images.length") == 0  # no <img onerror> was created
    assert b.evaluate("document.scripts.length") == 2
    _click(b, "#rows tr")
    b.wait_for("!document.getElementById('detail').hidden")
    assert HOSTILE in b.evaluate("document.querySelector('#detail .message').textContent")
    backend = b.evaluate("document.querySelector('#rows tr td:nth-child(4)').textContent")
    assert backend == "numpy" + HOSTILE
    _click(b, ".matrix a")  # a matrix cell lists its checks in the table
    b.wait_for("location.hash.includes('name=')")
    time.sleep(0.1)
    assert b.evaluate("document.getElementById('count').textContent").split(" of ")[0] != "0"
    _keep(b.screenshot(tmp_path / "report-hostile.png"))


def _check_plot(svg: ET.Element) -> None:
    """Well-formed (it parsed), an SVG root, and every coordinate a finite number in range."""
    assert svg.tag == f"{SVG}svg"
    for e in svg.iter():
        for key in ("x", "y", "x1", "x2", "y1", "y2", "cx", "cy", "width", "height"):
            if key in e.attrib:
                assert -50 <= float(e.attrib[key]) <= 700, (e.tag, key, e.attrib[key])
        for pt in e.attrib.get("points", "").split():
            assert all(-50 <= float(v) <= 700 for v in pt.split(","))


@pytest.mark.parametrize("points, expected, actual, allowed", [
    (((0.1, 1.0),), 1.0, 1.0 + 1e-3, 0.0),  # one step, zero allowed error
    (((0.1, float("nan")), (0.05, 2.0), (0.025, float("inf"))), 2.0, 2.5, 1e-9),
    (((1e-3, 1e300), (5e-4, -1e300)), 1.0, 1e300, 1e-300),  # huge values, tiny allowance
    (((0.5, 3.0), (0.25, 3.0)), 3.0, 3.0 + 1e-12, 1e-14),  # FD exact: error 0 on a log axis
])
def test_convergence_plot_is_well_formed_for_awkward_data(browser, tmp_path, points, expected,
                                                          actual, allowed):
    r = replace(numpy_results()[0], status=Status.FAILED, convergence=points, expected=expected,
                actual=actual, allowed=allowed)
    page = write_report(StreamData(checks=[r]), tmp_path).html
    browser.navigate(page.as_uri() + "#check=0")
    browser.wait_for("!document.getElementById('detail').hidden")
    text = browser.evaluate("(() => { const s = document.querySelector('#detail svg');"
                            "return s ? new XMLSerializer().serializeToString(s) : ''; })()")
    _check_plot(ET.fromstring(text))


def test_a_fragment_that_is_not_percent_encoding_still_renders(browser, tmp_path):
    """``#q=100%`` (typed by hand) is not valid percent-encoding: the page keeps the text as
    typed instead of stopping with a URIError (a blank table)."""
    results = numpy_results()
    failed = next(r for r in results if r.status is Status.FAILED)
    page = write_report(StreamData(checks=results + [replace(failed, name="load100%")]),
                        tmp_path).html
    b = browser
    b.navigate(page.as_uri() + "#q=100%")
    assert b.wait_for("document.documentElement.dataset.ready")
    assert b.evaluate("document.getElementById('f-q').value") == "100%"
    names = b.evaluate("[...document.querySelectorAll('#rows tr td:nth-child(2)')]"
                       ".map(td => td.textContent)")
    assert names == ["load100%"]
    assert b.evaluate("document.getElementById('count').textContent").startswith("1 of ")
    # a broken escape next to valid parameters: the valid ones still apply
    b.navigate(page.as_uri() + "#status=failed&q=%E0%A4%A")
    b.wait_for("document.getElementById('f-q').value === '%E0%A4%A'")
    assert b.evaluate("document.getElementById('f-status').value") == "failed"
    errors = [m for m in b.console_messages() if m.startswith("exception")
              or "URIError" in m]
    assert errors == []


def test_a_report_without_passed_rows_opens_a_check_by_its_stream_index(browser, tmp_path):
    """The sweep's report leaves the passed checks out of the table; a link to a check (its
    index in the stream) still opens that check, with evidence stored once for several."""
    results = numpy_results()
    evidence = {"class": "confirmed", "sources": ["reference disagrees"]}
    results = [replace(r, details={**r.details, "triage": evidence})
               if r.status is Status.FAILED else r for r in results]
    index = max(i for i, r in enumerate(results) if r.status is Status.FAILED)
    before = sum(r.status is Status.PASSED for r in results[:index])
    assert before > 0  # its row is not at its index in the table
    page = write_report(StreamData(checks=results), tmp_path, passed_rows=False).html
    b = browser
    b.navigate(page.as_uri() + f"#check={index}")
    assert b.wait_for("document.documentElement.dataset.ready")
    b.wait_for("!document.getElementById('detail').hidden")
    detail = b.evaluate("document.getElementById('detail').innerText")
    assert results[index].name in detail and "reference disagrees" in detail
    n_bad = sum(r.status is not Status.PASSED for r in results)
    assert b.evaluate("document.getElementById('count').textContent").startswith(
        f"{n_bad} of {n_bad}")


def test_the_flow_map_of_real_audits_in_the_browser(browser, tmp_path):
    """Audits written to a stream (torch and JAX): in the page, the "Gradient flow" section
    draws one cell per audited parameter, with its status, and its tooltip carries the
    measured evidence."""
    pytest.importorskip("torch")
    data, names = audited_streams(tmp_path)
    page = write_report(data, tmp_path / "out").html
    b = browser
    b.navigate(page.as_uri())
    assert b.wait_for("document.documentElement.dataset.ready")
    maps = b.evaluate("[...document.querySelectorAll('#flow .flowmap')].map(m => "
                      "[...m.querySelectorAll('.param')].map(p => [p.querySelector('span')"
                      ".textContent, p.querySelector('b').textContent, p.title]))")
    assert len(maps) == len(names)
    for cells, backend in zip(maps, names, strict=True):
        assert {n for n, _, _ in cells} == names[backend]
        assert all(title.startswith(f"{n}: {s} (|grad| ") for n, s, title in cells)
    statuses = {n: s for n, s, _ in maps[0]}
    assert statuses["body.weight"] == "flows" and statuses["spare.bias"] == "unused"
    assert statuses["target.weight"] == "blocked as intended"
    visible = b.evaluate("[...document.querySelectorAll('#flow .param')].every(p => "
                         "p.getBoundingClientRect().width > 0)")
    assert visible
    _keep(b.screenshot(tmp_path / "report-flow.png"))
