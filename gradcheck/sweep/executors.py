"""Where the sweep's ops run: the seam between the sweep (what is checked, what a result, a
death or a hang becomes in the stream) and the machinery that runs the checks.

An :class:`Executor` takes the shards ``(backend, op names)`` and runs every op of them,
recording each op's results in the active stream or in stream files it returns, which the
sweep appends to ``results.jsonl``; a crash or a hang of an op becomes one
:func:`~gradcheck.sweep.runner.crash_result`, never a silent retry.  Two exist:

- :class:`LocalProcesses` (the default, no dependency): spawned worker processes on this
  machine, a parent watchdog (:func:`~gradcheck.sweep.runner.run_parallel`);
- :class:`~gradcheck.sweep.ray_executor.RayExecutor` (``gradcheck sweep --cluster ...``, the
  ``ray`` extra): one Ray task per op on a cluster, each result streamed back as it is
  produced (docs/sweep.md, "On a cluster").

:func:`from_cluster` turns ``--cluster`` into an executor.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gradcheck.core.progress import Progress
from gradcheck.sweep.runner import OP_KILL_S, SweepConfig, run_parallel

if TYPE_CHECKING:
    from gradcheck.sweep.ray_executor import RayExecutor

#: why ``--cluster`` refuses a Dask scheduler (docs/sweep.md, "On a cluster")
NO_DASK = ("Dask is not supported: it runs tasks on threads, where the sweep's per-check time "
           "limits cannot work, and kills a hung task only by restarting its worker after "
           "re-running it (docs/sweep.md, 'On a cluster'); use a Ray cluster")


class Executor(Protocol):
    """Runs the shards' ops; returns the stream files to append to ``results.jsonl`` (the
    results it recorded in the active stream itself are already there)."""

    def run(self, shards: list[tuple[str, list[str]]], cfg: SweepConfig, out: Path,
            display: Progress | None = None) -> list[Path]: ...


@dataclass(frozen=True)
class LocalProcesses:
    """``jobs`` spawned worker processes on this machine, each on one shard at a time, killed
    after ``kill_s`` seconds on one op (the sweep's default)."""

    jobs: int = 1
    kill_s: float = OP_KILL_S

    def run(self, shards: list[tuple[str, list[str]]], cfg: SweepConfig, out: Path,
            display: Progress | None = None) -> list[Path]:
        return run_parallel(shards, cfg, out, self.jobs, kill_s=self.kill_s, display=display)


class ClusterRefused(ValueError):
    """``--cluster`` names something the sweep cannot run on (the message says what to pass)."""


def parse_cluster(text: str) -> str:
    """``--cluster`` as the address for ``ray.init``: ``ray`` (a new local Ray instance,
    started and stopped by the sweep: ``local``, never one found running),
    ``ray://HOST:PORT`` (a remote cluster over Ray Client), ``ray:ADDRESS`` (this machine is
    a node of the cluster: ``ray:auto``, ``ray:HOST:6379``).  :class:`ClusterRefused` for
    anything else (a Dask scheduler, with the reason)."""
    value = text.strip()
    if value == "ray":
        return "local"
    if value.startswith("ray://") and len(value) > len("ray://"):
        return value
    if value.startswith("ray:") and not value.startswith("ray://") and len(value) > 4:
        return value[len("ray:"):]
    if value.startswith(("tcp://", "dask", "tls://")):
        raise ClusterRefused(f"--cluster {text!r}: {NO_DASK}")
    raise ClusterRefused(f"--cluster {text!r}: expected 'ray' (a local Ray instance), "
                         "'ray://HOST:PORT' (a Ray cluster's client address) or "
                         "'ray:auto' / 'ray:HOST:PORT' (this machine is one of its nodes)")


def from_cluster(text: str, kill_s: float = OP_KILL_S) -> RayExecutor:
    """The executor ``--cluster`` names; :class:`ClusterRefused` where it names none or Ray
    is not installed (the message says how to install it)."""
    from gradcheck.sweep.ray_executor import RayExecutor, ray_missing

    address = parse_cluster(text)
    missing = ray_missing()
    if missing:
        raise ClusterRefused(f"--cluster {text!r}: {missing}")
    return RayExecutor(address, kill_s=kill_s)
