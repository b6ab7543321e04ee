"""The sweep on a Ray cluster (``gradcheck sweep --cluster ray://HOST:PORT``; the ``ray``
extra, imported only here and only when asked for).

One Ray task per op (``num_cpus=1``, ``max_retries=0``), a generator: it first yields
:class:`Started` (its node and process), then each batch of results as :func:`iter_check_op`
produces it; the driver (this process) records every batch in the active stream the moment it
arrives, so whatever an op produced before a crash is kept.  The driver is the watchdog, as
the local pool's parent is: Ray has no per-task time limit, so an op ``Started`` more than
``kill_s`` seconds ago is killed with ``ray.cancel(force=True)`` (its worker process and its
children die) and recorded as a hang; a task that dies (its worker killed, its node lost)
is recorded as a crash.  Neither is retried.  At most as many tasks are in flight as the
cluster has CPUs, and an op's clock starts when it starts, so time spent queued never counts.
The ops in flight are listed in ``results.cluster.progress``: after a stopped run,
``--resume`` checks them again (Ray itself ends the tasks of a driver that dies).

Each task also arms ``faulthandler.dump_traceback_later(kill_s + 30 s, exit=True)``: a worker
cut off from its driver still ends, its hang's Python stack in the node's worker log.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import logging
import os
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradcheck import stream
from gradcheck.core.progress import Progress
from gradcheck.core.results import CheckResult, Status
from gradcheck.core.taxonomy import CheckKind
from gradcheck.sweep.runner import (
    CLUSTER_PROGRESS,
    OP_KILL_S,
    SweepConfig,
    crash_result,
    failing,
    iter_check_op,
)

#: seconds past the driver's limit after which a task's own watchdog ends its worker
SELF_KILL_MARGIN_S = 30.0

#: what a task runs: ``target(backend, name, cfg)`` yields batches of results
Target = Callable[[str, str, SweepConfig], Iterator[list[CheckResult]]]


def ray_missing() -> str:
    """Why ``--cluster`` cannot run here ('' where Ray is installed)."""
    if importlib.util.find_spec("ray") is None:
        return ("Ray is not installed: pip install 'gradcheck[ray]' (every node of the cluster "
                "needs gradcheck and the engines at the driver's versions)")
    return ""


@dataclass(frozen=True)
class Started:
    """A task's first item: the node and worker process its op runs in."""

    node: str
    pid: int


_OPS: dict[tuple[str, str], Any] = {}  # per worker process, which Ray reuses across tasks


def check_named_op(backend: str, name: str, cfg: SweepConfig) -> Iterator[list[CheckResult]]:
    """A task's default body: the op ``name`` of ``backend``'s inventory, read on this node."""
    from gradcheck.sweep.inventory.discover import inventory

    warnings.simplefilter("ignore")  # the ops' own deprecation warnings
    if (backend, name) not in _OPS:
        inv = inventory(backend, [name])
        _OPS[backend, name] = next((o for o in inv.ops if o.name == name), None)
    op = _OPS[backend, name]
    if op is None:
        yield [CheckResult(kind=CheckKind.CALL, status=Status.ERROR, backend=backend, name=name,
                           message=f"{name!r} is not in the inventory of {backend} on the "
                           "cluster node that was to check it: the node's engine differs from "
                           "the driver's (every node needs the same versions)",
                           test_id=f"sweep:{backend}-{name}@node")]
        return
    yield from iter_check_op(op, cfg)


def _task(backend: str, name: str, cfg: SweepConfig, target: Target | None,
          self_kill_s: float) -> Iterator[Started | list[CheckResult]]:
    import ray

    yield Started(ray.get_runtime_context().get_node_id(), os.getpid())
    faulthandler.dump_traceback_later(self_kill_s, exit=True)
    try:
        with stream.suspended():  # the driver records: nothing goes to $GRADCHECK_RESULTS here
            yield from (target or check_named_op)(backend, name, cfg)
    finally:
        faulthandler.cancel_dump_traceback_later()


@dataclass
class _InFlight:
    backend: str
    name: str
    gen: Any  # ray.ObjectRefGenerator
    started: float | None = None
    failed: bool = False


class RayExecutor:
    """The sweep's ops as Ray tasks (see the module's text).  ``address`` is ``ray.init``'s
    (``local``: a new local instance, started and stopped here; a driver already connected
    keeps its connection); ``target`` replaces the op's checks (tests inject hangs and deaths);
    ``nodes`` holds, after :meth:`run`, the node each op ran on."""

    def __init__(self, address: str = "local", kill_s: float = OP_KILL_S,
                 target: Target | None = None, poll_s: float = 0.2) -> None:
        self.address = address
        self.kill_s = kill_s
        self.target = target
        self.poll_s = poll_s
        self.nodes: dict[str, str] = {}
        self._flight: list[_InFlight] = []
        self._display: Progress | None = None

    def run(self, shards: list[tuple[str, list[str]]], cfg: SweepConfig, out: Path,
            display: Progress | None = None) -> list[Path]:
        import ray

        owned = not ray.is_initialized()
        if owned:
            options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
            if self.address == "local":
                options["include_dashboard"] = False
            ray.init(address=self.address, **options)
        self._display = display
        progress = out / CLUSTER_PROGRESS
        try:
            self._drive(ray, [(b, n) for b, names in shards for n in names], cfg, progress)
            progress.unlink(missing_ok=True)  # kept when stopped: --resume reads it
        finally:
            for f in self._flight:  # stopped early: nothing of ours runs on
                try:
                    ray.cancel(f.gen, force=True)
                except Exception:  # noqa: BLE001 - already finished or its node gone
                    pass
            self._flight = []
            if owned:
                ray.shutdown()
        return []

    def _drive(self, ray: Any, ops: list[tuple[str, str]], cfg: SweepConfig,
               progress: Path) -> None:
        # backpressure 1: a task goes on after a yield only once the driver has taken the
        # item, so a worker that dies right after a yield has delivered it (without it, the
        # last batches before a crash were lost)
        task = ray.remote(num_cpus=1, max_retries=0, _generator_backpressure_num_objects=1)(_task)
        slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        pending = deque(ops)
        flight = self._flight
        while pending or flight:
            if pending and len(flight) < slots:
                while pending and len(flight) < slots:
                    backend, name = pending.popleft()
                    gen = task.remote(backend, name, cfg, self.target,
                                      self.kill_s + SELF_KILL_MARGIN_S)
                    flight.append(_InFlight(backend, name, gen))
                _write_lines(progress, [f.name for f in flight])
            ray.wait([f.gen for f in flight], num_returns=1, timeout=self.poll_s)
            ended = False
            for f in list(flight):
                done = self._drain(ray, f)
                if not done and f.started is not None:
                    hung = time.monotonic() - f.started
                    if hung >= self.kill_s:
                        done = self._drain(ray, f) or self._kill(ray, f, hung)
                if done:
                    flight.remove(f)
                    ended = True
                    if self._display is not None:
                        self._display.done(f.backend, f.failed, f.name)
            if ended:
                _write_lines(progress, [f.name for f in flight])

    def _drain(self, ray: Any, f: _InFlight) -> bool:
        """Record what ``f`` has produced so far; whether it ended (finished or died)."""
        while True:
            ready, _ = ray.wait([f.gen], timeout=0)
            if not ready:
                return False
            try:
                item = ray.get(next(f.gen))
            except StopIteration:
                return True
            except ray.exceptions.RayError as exc:  # its worker or node died, or it raised
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                how = f"the cluster reported {type(exc).__name__}" + (
                    f": {first[:200]}" if first else "")
                stream.record(crash_result(f.backend, f.name, None, how=how))
                f.failed = True
                return True
            if isinstance(item, Started):
                f.started = time.monotonic()
                self.nodes[f.name] = item.node
                if self._display is not None:
                    self._display.started(f.backend)
            else:
                f.failed |= failing(stream.record_many(item))

    def _kill(self, ray: Any, f: _InFlight, hung: float) -> bool:
        """The op ran past the limit: its task is killed (never retried) and recorded."""
        try:
            ray.cancel(f.gen, force=True)
        except Exception:  # noqa: BLE001 - it ended meanwhile: still past the limit
            pass
        stream.record(crash_result(f.backend, f.name, None, hung_s=hung, kill_s=self.kill_s))
        f.failed = True
        return True


def _write_lines(path: Path, lines: list[str]) -> None:
    """``path`` replaced at once (a reader never sees half of it)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(f"{line}\n" for line in lines))
    os.replace(tmp, path)
