"""Sharding across CI machines (docs/ci.md): ``--gradcheck-shard I/N`` puts every test in
exactly one shard, the N shards' tests are exactly the unsharded run's, ``gradcheck report``
merges their streams into the unsharded run's counts, and a merge that lacks a shard is not a
pass (its twin, the complete merge, is).  The GitHub Actions example of docs/ci.md is checked
against the options it uses."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

import pytest

from gradcheck.cli import main
from gradcheck.plugin.session_report import shard_of
from gradcheck.plugin.shards import missing_shards
from gradcheck.report import model
from gradcheck.stream import read_streams
from tests.support.child_env import ROOT, child_env

SUITE = '''
import pytest
from gradcheck import stream
from gradcheck.core.results import CheckResult, Status
from gradcheck.core.taxonomy import CheckKind

@pytest.mark.parametrize("k", range(14))
def test_case(k):
    stream.record(CheckResult(kind=CheckKind.VJP, status=Status.PASSED, backend="numpy",
                              dtype="float64", name=f"op{k}"))
    if k % 5 == 0:
        pytest.skip("skipped on purpose")
'''


def test_every_id_is_in_exactly_one_shard():
    ids = [f"suites/test_numeric.py::test_vjp[torch-cpu-float64-op{k}]" for k in range(500)]
    for n in range(1, 8):
        shards = {i: {t for t in ids if shard_of(t, n) == i} for i in range(1, n + 1)}
        assert sum(len(s) for s in shards.values()) == len(ids)  # disjoint ...
        assert set().union(*shards.values()) == set(ids)  # ... and covering
        if n > 1:
            assert max(map(len, shards.values())) < 2 * len(ids) / n  # not one big shard


def _pytest(tmp_path, out, *extra):
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path / "test_tiny.py"), "-q", "-p",
         "no:cacheprovider", "-p", "gradcheck.pytest_plugin", f"--gradcheck-report-dir={out}",
         *extra], cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300)


def _counts(data):
    return (Counter(model.status_of(c) for c in data.checks),
            Counter(t.outcome for t in data.tests))


def test_three_shards_merge_into_the_unsharded_run(tmp_path, capsys):
    (tmp_path / "test_tiny.py").write_text(SUITE)
    assert _pytest(tmp_path, tmp_path / "whole").returncode == 0
    for i in (1, 2, 3):
        proc = _pytest(tmp_path, tmp_path / f"s{i}", f"--gradcheck-shard={i}/3")
        assert proc.returncode == 0, proc.stdout
        assert [p.name for p in (tmp_path / f"s{i}").glob("*.jsonl")] == [
            f"results.shard-{i}-of-3.jsonl"]
    whole = read_streams([tmp_path / "whole"])
    parts = [read_streams([tmp_path / f"s{i}"]) for i in (1, 2, 3)]
    ids = [{t.test_id for t in p.tests} for p in parts]
    every = {t.test_id for t in whole.tests}
    assert sum(map(len, ids)) == len(whole.tests) == 14 and set().union(*ids) == every
    assert all(shard_of(t, 3) == i for i, s in enumerate(ids, start=1) for t in s)

    # the complete merge: the unsharded counts, exit 0
    assert main(["report", *(str(tmp_path / f"s{i}") for i in (1, 2, 3)), "-o",
                 str(tmp_path / "merged")]) == 0
    merged = read_streams([tmp_path / f"s{i}" for i in (1, 2, 3)])
    assert _counts(merged) == _counts(whole)
    assert f"{len(whole.checks)} checks" in (tmp_path / "merged" / "index.html").read_text()
    capsys.readouterr()
    # a shard missing (its job failed before its stream was collected): not a pass
    assert main(["report", str(tmp_path / "s1"), str(tmp_path / "s3"), "-o",
                 str(tmp_path / "partial")]) == 1
    assert "error: shard 2 of 3 missing" in capsys.readouterr().err


def test_missing_shards_are_named_per_cut():
    names = ["a/results.shard-1-of-4.jsonl", "b/results.shard-4-of-4.gw0.jsonl",
             "c/results.shard-2-of-2.jsonl", "d/results.jsonl", "e/other.jsonl"]
    assert [m.split(":")[0] for m in missing_shards(names)] == ["shard 1 of 2 missing",
                                                                "shards 2, 3 of 4 missing"]
    assert missing_shards(["results.shard-1-of-1.jsonl", "results.jsonl"]) == []


def test_the_github_actions_example_uses_real_options_and_covers_every_shard():
    yaml = pytest.importorskip("yaml")
    text = (ROOT / "docs" / "ci.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block, "docs/ci.md has no yaml example"
    workflow = yaml.safe_load(block.group(1))
    shard_job = workflow["jobs"]["shard"]
    assert shard_job["strategy"]["fail-fast"] is False
    runs = [s["run"] for s in shard_job["steps"] if "run" in s]
    command = next(r for r in runs if r.startswith("gradcheck run"))
    n = int(re.search(r"--shard \$\{\{ matrix\.shard \}\}/(\d+)", command).group(1))
    assert shard_job["strategy"]["matrix"]["shard"] == list(range(1, n + 1))
    report_job = workflow["jobs"]["report"]
    assert report_job["needs"] == "shard" and report_job["if"] == "always()"
    merge = next(s["run"] for s in report_job["steps"] if s.get("run", "").startswith(
        "gradcheck report"))
    # the commands parse: the options exist, as spelled
    from gradcheck.cli import _parser

    argv = command.replace("${{ matrix.shard }}", "1").split()[1:]
    args = _parser().parse_args(argv)
    assert args.shard == f"1/{n}" and args.report_dir == "out"
    args = _parser().parse_args(merge.split('--title')[0].split()[1:])
    assert args.output == "reports"
