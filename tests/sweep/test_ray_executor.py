"""The sweep on a Ray cluster (gradcheck/sweep/ray_executor.py): two nodes on this machine
(Ray's own ``cluster_utils.Cluster``, every address on loopback), a native hang killed and
recorded, a worker that dies and a node killed mid-op recorded as crashes, each with the
results it produced before, nothing retried, nothing counted twice; and a real sweep of two
jax ops (one, stopped, then resumed) giving exactly the results of a local run.  Skipped
where Ray is not installed (``pip install 'gradcheck[ray]'``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from gradcheck import stream
from gradcheck.stream import read_streams
from gradcheck.sweep import SweepConfig, sweep
from tests.support import ray_ops
from tests.support.child_env import ROOT, child_env

ray = pytest.importorskip("ray", reason="the Ray executor needs Ray: pip install 'gradcheck[ray]'")
pytestmark = pytest.mark.cluster

from gradcheck.sweep.ray_executor import RayExecutor  # noqa: E402 - after the skip

QUICK = SweepConfig(("jax",), profile="quick", triage=False)


def _ray_daemons() -> set[int]:
    """The pids of Ray's node daemons running on this machine."""
    from pathlib import Path

    out = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"raylet" in cmd.split(b"\0")[0] or b"gcs_server" in cmd.split(b"\0")[0]:
            out.add(int(proc.name))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_cluster_ray_starts_a_local_instance_and_stops_it(tmp_path):
    """``gradcheck sweep --cluster ray``: a new local Ray instance for the sweep, gone after."""
    before = _ray_daemons()
    out = tmp_path / "rep"
    proc = subprocess.run(
        [sys.executable, "-m", "gradcheck.cli", "sweep", "--backend", "jax", "--op",
         "jax.nn.soft_sign", "--profile", "quick", "--cluster", "ray", "--report-dir",
         str(out)], cwd=ROOT, env=child_env(GRADCHECK_PROGRESS="plain"), capture_output=True,
        text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr
    assert "jax: 1 ops swept" in proc.stdout
    assert "gradcheck sweep: jax 1/1 ops" in proc.stderr  # the progress line, once
    data = read_streams([out / "results.jsonl"])
    assert {r.name for r in data.checks} == {"jax.nn.soft_sign"} and not data.problems
    assert (out / "index.html").is_file() and not (out / "results.cluster.progress").exists()
    deadline = time.monotonic() + 60
    while _ray_daemons() - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _ray_daemons() - before, "the sweep's Ray instance outlived it"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head node with no CPU (it runs no op) and two nodes of one CPU each: every op runs on
    one of the two, and two ops in flight run on both.  Shut down after the module."""
    from ray.cluster_utils import Cluster

    marker = tmp_path_factory.mktemp("ray") / "node"
    saved = {k: os.environ.get(k) for k in ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
                                             ray_ops.MARKER_ENV)}
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ[ray_ops.MARKER_ENV] = str(marker)  # the nodes' workers inherit it
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        nodes = [c.add_node(num_cpus=1), c.add_node(num_cpus=1)]
        c.wait_for_nodes()
        ray.init(address=c.address, log_to_driver=False)
        yield c, nodes, marker
    finally:
        ray.shutdown()
        c.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _by_name(path):
    checks = read_streams([path]).checks
    return checks, Counter(r.name for r in checks)


def test_a_hang_and_a_dead_worker_are_recorded_once_and_the_other_ops_go_on(cluster, tmp_path):
    executor = RayExecutor(target=ray_ops.body, kill_s=3.0)
    with stream.using(tmp_path / "results.jsonl"):
        parts = executor.run([("jax", ["fine1", "hangs", "dies", "fine2"])], QUICK, tmp_path)
    assert parts == []
    checks, names = _by_name(tmp_path / "results.jsonl")
    # each op's two batches arrived; the hang and the death one error each, none retried
    assert names == {"fine1": 2, "fine2": 2, "hangs": 3, "dies": 3}
    bad = {r.name: r for r in checks if r.status.value == "error"}
    assert set(bad) == {"hangs", "dies"}
    assert bad["hangs"].details["triage"]["symptom"] == "hang"
    assert bad["hangs"].details["sweep"]["hung_s"] >= 3 and "3 s per op" in bad["hangs"].message
    assert bad["dies"].details["triage"]["class"] == "crash"
    assert "the cluster reported" in bad["dies"].message
    ids = [r.test_id for r in checks]
    assert len(ids) == len(set(ids))  # nothing counted twice
    assert len(set(executor.nodes.values())) == 2  # both nodes ran ops
    assert not (tmp_path / "results.cluster.progress").exists()


def test_the_per_check_time_limits_work_in_a_task(cluster, tmp_path):
    """The reason Ray was chosen over Dask: a task runs on its worker's main thread, where the
    sweep's per-check limits (a SIGALRM timer and a watchdog thread) interrupt the check."""
    with stream.using(tmp_path / "results.jsonl"):
        RayExecutor(target=ray_ops.body).run([("jax", ["limits"])], QUICK, tmp_path)
    (probe,) = read_streams([tmp_path / "results.jsonl"]).checks
    fields = dict(part.split("=") for part in probe.message.split())
    assert fields["main"] == fields["enforced"] == fields["timed_out"] == "True", probe.message


def test_a_sweep_on_the_cluster_gives_the_local_results_and_resumes(cluster, tmp_path):
    both = SweepConfig(("jax",), ops=("jax.nn.selu", "jax.nn.soft_sign"), profile="quick",
                       triage=False)
    local = read_streams([sweep(both, tmp_path / "local").stream]).checks
    first = SweepConfig(("jax",), ops=("jax.nn.selu",), profile="quick", triage=False)
    sweep(first, tmp_path / "ray", executor=RayExecutor())
    # stopped with soft_sign in flight (its partial results not yet in): --resume checks it
    (tmp_path / "ray" / "results.cluster.progress").write_text("jax.nn.soft_sign\n")
    outcome = sweep(both, tmp_path / "ray", executor=RayExecutor(), resume=True)
    assert outcome.resumed == 1
    remote = read_streams([outcome.stream]).checks

    def key(checks):
        return Counter((r.name, r.kind, r.test_id, r.status.value, r.dtype)
                       for r in checks if r.sweep is None or r.sweep.left_out is None)

    assert key(remote) == key(local) and len(local) > 20
    assert not (tmp_path / "ray" / "results.cluster.progress").exists()


def test_a_node_killed_mid_op_is_a_crash_of_that_op_alone(cluster, tmp_path):
    c, nodes, marker = cluster
    marker.unlink(missing_ok=True)
    killed: list[str] = []

    def kill_its_node():
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        node_id = marker.read_text()
        node = next(n for n in nodes if n.node_id == node_id)
        c.remove_node(node)
        killed.append(node_id)

    killer = threading.Thread(target=kill_its_node, daemon=True)
    killer.start()
    executor = RayExecutor(target=ray_ops.body, kill_s=120.0)
    with stream.using(tmp_path / "results.jsonl"):
        executor.run([("jax", ["waits", "fine3"])], QUICK, tmp_path)
    killer.join(timeout=10)
    assert killed
    checks, names = _by_name(tmp_path / "results.jsonl")
    assert names == {"waits": 3, "fine3": 2}
    crash = next(r for r in checks if r.status.value == "error")
    assert crash.name == "waits" and "NodeDied" in crash.message
    assert crash.details["triage"]["class"] == "crash"
    ids = [r.test_id for r in checks]
    assert len(ids) == len(set(ids))
