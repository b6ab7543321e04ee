"""The sweep's executor seam (gradcheck/sweep/executors.py), without Ray: what ``--cluster``
accepts and refuses, the shards an executor is given and the streams it returns merged, the
ops a stopped cluster run had in flight checked again by ``--resume``, and the progress the
sweep shows."""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path

import pytest

from gradcheck import stream
from gradcheck.cli import main
from gradcheck.core.progress import Progress
from gradcheck.core.results import CheckResult, Status
from gradcheck.core.taxonomy import CheckKind
from gradcheck.stream import read_streams
from gradcheck.sweep import SweepConfig, executors, sweep
from gradcheck.sweep.executors import ClusterRefused, LocalProcesses, parse_cluster

pytest.importorskip("jax")
QUICK = SweepConfig(("jax",), ops=("jax.nn.selu", "jax.nn.soft_sign"), profile="quick",
                    triage=False)


def test_cluster_addresses_ray_local_client_and_node():
    assert parse_cluster("ray") == "local"  # a new local instance, never one found running
    assert parse_cluster("ray://head.example:10001") == "ray://head.example:10001"
    assert parse_cluster("ray:auto") == "auto"
    assert parse_cluster("ray:10.0.0.5:6379") == "10.0.0.5:6379"


@pytest.mark.parametrize("text", ["tcp://scheduler:8786", "dask://x"])
def test_a_dask_scheduler_is_refused_with_the_reason(text):
    with pytest.raises(ClusterRefused, match="Dask is not supported: it runs tasks on threads"):
        parse_cluster(text)


@pytest.mark.parametrize("text", ["", "ray:", "ray://", "host:6379", "spark://x"])
def test_anything_else_is_refused_naming_what_to_pass(text):
    with pytest.raises(ClusterRefused, match="expected 'ray'"):
        parse_cluster(text)


def test_without_ray_the_cli_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    from gradcheck.sweep import ray_executor

    monkeypatch.setattr(ray_executor, "ray_missing", lambda: "Ray is not installed: pip install "
                        "'gradcheck[ray]'")
    code = main(["sweep", "--backend", "jax", "--op", "jax.nn.selu", "--cluster", "ray",
                 "--report-dir", str(tmp_path)])
    assert code == 2
    assert "pip install 'gradcheck[ray]'" in capsys.readouterr().err
    assert not (tmp_path / "results.jsonl").exists()  # refused before anything ran
    assert main(["sweep", "--backend", "jax", "--cluster", "tcp://x:8786", "--report-dir",
                 str(tmp_path)]) == 2
    assert "Dask is not supported" in capsys.readouterr().err


class _Fake:
    """An executor that records one passed result per op in the active stream, except the ops
    it writes to a stream file of its own, which it returns for the sweep to merge."""

    def __init__(self, to_file: set[str]) -> None:
        self.to_file = to_file
        self.shards: list[tuple[str, list[str]]] = []

    def run(self, shards, cfg, out, display=None):
        self.shards = shards
        part = Path(out) / "fake.jsonl"
        part.write_text("")
        for backend, names in shards:
            for name in names:
                r = CheckResult(kind=CheckKind.VJP, status=Status.PASSED, backend=backend,
                                name=name, test_id=f"sweep:{backend}-{name}@fake")
                if name in self.to_file:
                    with open(part, "a") as f:
                        f.write(r.to_json() + "\n")
                else:
                    stream.record(r)
                if display is not None:
                    display.done(backend, False, name)
        return [part]


def test_an_executor_gets_every_op_of_a_backend_and_its_streams_are_merged(tmp_path):
    fake = _Fake({"jax.nn.soft_sign"})
    outcome = sweep(QUICK, tmp_path, jobs=4, executor=fake)
    assert fake.shards == [("jax", ["jax.nn.selu", "jax.nn.soft_sign"])]  # -j does not shard
    names = Counter(r.name for r in read_streams([outcome.stream]).checks)
    assert names == {"jax.nn.selu": 1, "jax.nn.soft_sign": 1}
    assert not (tmp_path / "fake.jsonl").exists()  # merged, then deleted


def test_resume_checks_again_the_ops_a_cluster_run_had_in_flight(tmp_path):
    sweep(QUICK, tmp_path, executor=_Fake(set()))
    # stopped with soft_sign in flight: its partial result is in, the progress file names it
    (tmp_path / "results.cluster.progress").write_text("jax.nn.soft_sign\n")
    fake = _Fake(set())
    outcome = sweep(QUICK, tmp_path, executor=fake, resume=True)
    assert fake.shards == [("jax", ["jax.nn.soft_sign"])] and outcome.resumed == 1
    assert not (tmp_path / "results.cluster.progress").exists()


def test_the_local_default_is_the_process_pool(tmp_path, monkeypatch):
    seen = {}

    def fake_parallel(tasks, cfg, out, jobs, kill_s, display):
        seen.update(tasks=tasks, jobs=jobs, kill_s=kill_s)
        return []

    monkeypatch.setattr(executors, "run_parallel", fake_parallel)
    sweep(QUICK, tmp_path, jobs=2, isolate=True)
    assert seen["jobs"] == 2 and sorted(n for _, ns in seen["tasks"] for n in ns) == [
        "jax.nn.selu", "jax.nn.soft_sign"]
    assert LocalProcesses().jobs == 1


def _failing(outcome) -> int:
    """The ops of the stream with a failure that is not a known one."""
    return len({r.name for r in read_streams([outcome.stream]).checks
                if not r.ok and not r.known})


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_sweep_shows_each_backends_progress_on_a_terminal(tmp_path, monkeypatch):
    import sys

    err = _Tty()
    for var in ("CI", "GITHUB_ACTIONS", "GRADCHECK_PROGRESS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "stderr", err)
    outcome = sweep(QUICK, tmp_path, show_progress=True)  # in this process, op after op
    text = err.getvalue()
    assert re.search(r"^\rgradcheck sweep: jax 1/2 ops, [01] failed, (~\d+ (s|min) left|time "
                     r"left unknown)\x1b\[K\r", text)
    assert text.endswith(f"\rgradcheck sweep: jax 2/2 ops, {_failing(outcome)} failed, "
                         "done\x1b[K\n")
    assert text.count("\n") == 1  # one line, rewritten in place


def test_the_sweep_is_quiet_in_a_ci_log(tmp_path, monkeypatch, capfd):
    monkeypatch.delenv("GRADCHECK_PROGRESS", raising=False)
    monkeypatch.setenv("CI", "true")
    outcome = sweep(QUICK, tmp_path, jobs=2, isolate=True, show_progress=True)
    err = capfd.readouterr().err  # the parent's and its two workers'
    lines = [line for line in err.splitlines() if line.startswith(("gradcheck", "sweep"))]
    # no line per op from the workers; the parent's display ends with one summary line, its
    # failures counted from the workers' streams
    assert lines[-1] == f"gradcheck sweep: jax 2/2 ops, {_failing(outcome)} failed, done"
    assert "\r" not in err and len(lines) <= 2


def test_the_local_pool_counts_failing_ops_from_the_worker_streams(tmp_path):
    from gradcheck.sweep.runner import _Running

    part = tmp_path / "w.jsonl"
    bad = CheckResult(kind=CheckKind.VJP, status=Status.FAILED, backend="jax", name="b")
    good = CheckResult(kind=CheckKind.VJP, status=Status.PASSED, backend="jax", name="a")
    part.write_text(good.to_json() + "\n" + bad.to_json() + "\n" + good.to_json()[:20])
    display = Progress("t", "ops", {"jax": 3}, out=io.StringIO(), mode="plain")
    w = _Running(None, "jax", ["a", "b", "c"], tmp_path / "p", part=part, display=display)
    w.finished("a")
    w.finished("b")
    assert (display.tallies["jax"].done, display.tallies["jax"].failed) == (2, 1)
    w.finished("c", crashed=True)
    assert display.tallies["jax"].failed == 2
