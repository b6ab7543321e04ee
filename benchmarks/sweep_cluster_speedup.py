"""The speed-up of a small sweep on a two-node Ray cluster over a one-node one (docs/sweep.md,
"On a cluster"), both on this machine, with the local process pool beside them (run by hand;
needs the ray extra):

    python benchmarks/sweep_cluster_speedup.py [--reps 2] [--op jax.nn.selu ...]
        [--config j1|j2|ray1|ray2 ...]

Each cluster is Ray's own ``cluster_utils.Cluster`` on loopback: a head node with no CPU (it
runs no op) and one or two nodes of one CPU each.  Every run is cold, as a real sweep is (each
op is checked once): the local pool spawns new workers, and each Ray run gets a new cluster
(started before the clock starts), whose workers import jax and compile each op afresh; a
warm cluster would re-use the compiled ops of an earlier run and look several times faster
than any real sweep.  The configurations run in turn, ``reps`` rounds, and each reports its
fastest round (benchmarks/_common.py's protocol); the load average is printed beside them.
Two nodes on one machine can only be faster where the machine has two cores free: the figure
measures the executor's overhead and its use of two workers, not what two machines would give.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

OPS = ("jax.nn.selu", "jax.nn.soft_sign", "jax.numpy.sinh", "jax.numpy.tanh",
       "jax.numpy.arctan", "jax.nn.silu")


def on_cluster(nodes: int, cfg) -> float:
    """One cold sweep on a new cluster of ``nodes`` one-CPU nodes (its start not timed)."""
    import ray
    from ray.cluster_utils import Cluster

    from gradcheck.sweep import sweep
    from gradcheck.sweep.ray_executor import RayExecutor

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        for _ in range(nodes):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        with tempfile.TemporaryDirectory() as out:
            began = time.perf_counter()
            sweep(cfg, Path(out), executor=RayExecutor())
            return time.perf_counter() - began
    finally:
        ray.shutdown()
        cluster.shutdown()


def local(jobs: int, cfg) -> float:
    """One sweep in ``jobs`` new worker processes of the local pool."""
    from gradcheck.sweep import sweep

    with tempfile.TemporaryDirectory() as out:
        began = time.perf_counter()
        sweep(cfg, Path(out), jobs=jobs, isolate=True)
        return time.perf_counter() - began


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--op", action="append", help=f"ops to sweep (default: {', '.join(OPS)})")
    ap.add_argument("--config", action="append", choices=("j1", "j2", "ray1", "ray2"),
                    help="configurations, in this order (default: j1 j2 ray1 ray2)")
    args = ap.parse_args()
    from gradcheck.sweep import SweepConfig

    ops = tuple(args.op or OPS)
    cfg = SweepConfig(("jax",), ops=ops, profile="quick", triage=False)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"sweep of {len(ops)} jax ops (quick profile, no triage), cold runs, fastest of "
          f"{args.reps} rounds; {cpus} usable CPUs")
    every = {"j1": ("local pool, -j 1", lambda: local(1, cfg)),
             "j2": ("local pool, -j 2", lambda: local(2, cfg)),
             "ray1": ("Ray, 1 node x 1 CPU", lambda: on_cluster(1, cfg)),
             "ray2": ("Ray, 2 nodes x 1 CPU", lambda: on_cluster(2, cfg))}
    runs = dict(every[c] for c in args.config or every)
    best = dict.fromkeys(runs, float("inf"))
    for k in range(args.reps):
        for label, run in runs.items():
            seconds = run()
            best[label] = min(best[label], seconds)
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            print(f"  round {k + 1}: {label:22} {seconds:7.1f} s   (1-min load average "
                  f"after: {load:.1f})", flush=True)
    rows = list(best.items())
    for label, seconds in rows:
        print(f"  fastest: {label:22} {seconds:7.1f} s")
    t = dict(rows)
    for label, (fast, slow) in (("Ray 2 nodes over 1 node", ("ray2", "ray1")),
                                ("local -j 2 over -j 1", ("j2", "j1")),
                                ("Ray 1 node against local -j 1", ("ray1", "j1"))):
        if every[fast][0] in t and every[slow][0] in t:
            print(f"speed-up, {label}: {t[every[slow][0]] / t[every[fast][0]]:.2f}x")


if __name__ == "__main__":
    main()
