"""The main job from the outside: the real ``gradcheck run`` on a small selection of the real
suites (two catalog ops, two backends), in a subprocess, asserting on what a user sees.

* every check record in the stream is in the report: the HTML's count equals the stream's and
  is > 0, the op matrix has a cell for each selected op on each backend, JUnit has one
  testcase per check;
* a known discrepancy of the catalog is recorded as such (shown as ``known``, not a failure);
* where Chromium is installed, the rendered page shows the count, a matrix cell and a detail
  panel that opens (the DOM, not the HTML source).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gradcheck import stream
from gradcheck.report import model
from tests.support.child_env import child_env
from tests.support.chromium import Browser, find_chromium

ROOT = Path(__file__).resolve().parents[2]
OPS = ("tanh", "maximum")  # tanh@saturated has a known torch reference discrepancy
BACKENDS = ("numpy", "torch")


def _run(out: Path, *extra: str) -> subprocess.CompletedProcess:
    args = ["run", "--report-dir", str(out), *extra]
    for op in OPS:
        args += ["--op", op]
    for backend in BACKENDS:
        args += ["--backend", backend]
    return subprocess.run([sys.executable, "-m", "gradcheck.cli", *args], cwd=out.parent,
                          env=child_env(), capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def main_job(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("acceptance") / "reports"
    return _run(out), out


def _embedded_table(html: str) -> dict:
    body = re.search(r'<script type="application/json" id="gc-data">(.*?)</script>', html, re.S)
    assert body, "the report embeds no table data"
    return json.loads(body.group(1))


def test_the_main_job_exits_0_and_its_report_holds_every_check(main_job):
    proc, out = main_job
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    data = stream.read_streams([out / "results.jsonl"])
    assert data.problems == []
    checks = data.checks
    assert len(checks) > 0
    assert {c.name for c in checks if c.kind == "vjp"} == set(OPS)
    assert all(c.test_id.startswith("suites/test_") for c in checks), \
        "every recorded check carries the pytest id of the test that read it"
    # the kinds the suites read are all recorded: numeric, reference, search, semantic probes
    kinds = {c.kind for c in checks}
    assert {"vjp", "jvp", "fwd_rev", "reference", "vjp_of_vjp", "search", "semantic"} <= kinds
    html = (out / "index.html").read_text()
    assert f"{len(checks)} checks" in html
    assert len(_embedded_table(html)["rows"]) == len(checks)
    matrix = model.build_matrix(checks)
    for op in OPS:
        for backend in BACKENDS:
            assert (op, (backend, "cpu", "float64")) in matrix.cells, (op, backend)
    root = ET.parse(out / "junit.xml").getroot()
    assert int(root.get("tests")) == len(list(root.iter("testcase"))) == len(checks)
    assert int(root.get("failures")) == int(root.get("errors")) == 0
    suites = {s.get("name") for s in root.iter("testsuite")}
    assert {"gradcheck numpy cpu float64", "gradcheck torch cpu float64"} <= suites
    assert f"{len(checks)} checks:" in proc.stdout  # the terminal summary counts the same


def test_a_known_discrepancy_is_recorded_as_known_not_as_a_failure(main_job):
    _, out = main_job
    data = stream.read_streams([out / "results.jsonl"])
    known = [c for c in data.checks if c.kind == "reference" and model.is_known(c)]
    assert known and all(c.name == "tanh" and "saturated" in c.test_id for c in known)
    assert data.passed  # an expected failure does not fail the run
    assert model.status_counts(data.checks)[model.KNOWN] >= len(known)


def _counts(checks) -> dict[tuple[str, str, str, str], int]:
    out: dict[tuple[str, str, str, str], int] = {}
    for c in checks:
        key = (c.test_id, c.kind, c.name, model.status_of(c))
        out[key] = out.get(key, 0) + 1
    return out


def test_the_merged_shards_give_exactly_the_counts_of_the_unsharded_run(main_job, tmp_path):
    _, whole = main_job
    parts = [tmp_path / f"shard{i}" for i in (1, 2)]
    for i, part in enumerate(parts, start=1):
        proc = _run(part, "--shard", f"{i}/2")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    merged = tmp_path / "merged"
    proc = subprocess.run([sys.executable, "-m", "gradcheck.cli", "report", *map(str, parts),
                           "-o", str(merged)], env=child_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sharded = stream.read_streams(parts).checks
    unsharded = stream.read_streams([whole / "results.jsonl"]).checks
    assert len(sharded) == len(unsharded) > 0
    assert _counts(sharded) == _counts(unsharded)
    assert f"{len(unsharded)} checks" in (merged / "index.html").read_text()


CHROMIUM = find_chromium()


@pytest.mark.skipif(CHROMIUM is None,
                    reason="Chromium is not installed (Debian: apt-get install -y chromium)")
def test_the_rendered_page_shows_the_checks_the_matrix_and_a_detail(main_job, tmp_path):
    _, out = main_job
    n = len(stream.read_streams([out / "results.jsonl"]).checks)
    with Browser(CHROMIUM, width=1400, height=1000) as b:
        b.navigate((out / "index.html").as_uri())
        assert b.wait_for("document.documentElement.dataset.ready")
        assert b.evaluate("document.title") == "gradcheck report: passed"
        cards = b.evaluate("[...document.querySelectorAll('.card')].map(c => c.innerText)")
        shown = sum(int(c.split()[0]) for c in cards)
        assert shown == n
        assert f" of {n}" in b.evaluate("document.getElementById('count').textContent")
        cells = b.evaluate("[...document.querySelectorAll('.matrix th.op')]"
                           ".map(t => t.textContent)")
        assert set(OPS) <= set(cells)
        b.evaluate("document.querySelector('.matrix td a').click()")
        b.wait_for("location.hash.includes('name=')")
        b.wait_for("document.querySelectorAll('#rows tr').length > 0")
        b.evaluate("document.querySelector('#rows tr').click()")
        b.wait_for("!document.getElementById('detail').hidden")
        detail = b.evaluate("document.getElementById('detail').innerText")
        assert "Reproduce" in detail and "seed" in detail
        shot = b.screenshot(tmp_path / "acceptance.png", full_page=False)
        target = os.environ.get("GRADCHECK_SCREENSHOT_DIR")
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            (Path(target) / shot.name).write_bytes(shot.read_bytes())
        assert shot.stat().st_size > 20_000
