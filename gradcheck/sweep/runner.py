"""Running a sweep: every op of the inventory x dtype x edge point x order through
:func:`gradcheck.check` (the oracle, unchanged), each result named by the op's qualified name,
annotated with its point and its triage, and appended to the result stream.

``-j N`` runs N worker processes (spawned), each on an interleaved share of the ops, each
writing its own stream file; the parent appends them to ``results.jsonl`` when they finish.
Everything is deterministic: the seed of a check is derived from its id
(``sweep:torch-float64-torch.sin@tiny/o1``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gradcheck import stream
from gradcheck.backends import children, limits
from gradcheck.core.dtypes import numpy_dtype
from gradcheck.core.errors import WriteFailed
from gradcheck.core.progress import Progress, mode_for
from gradcheck.core.results import CheckResult, Status, SweepInfo, Triage
from gradcheck.core.taxonomy import CheckKind
from gradcheck.sweep import known, points, resolution, triage
from gradcheck.sweep.inventory.discover import inventory
from gradcheck.sweep.inventory.records import Inventory, Op

if TYPE_CHECKING:
    from gradcheck.sweep.executors import Executor

PROFILES = ("quick", "default", "thorough")
STREAM = "results.jsonl"
#: the ops a cluster run has in flight, one name a line (what ``--resume`` checks again)
CLUSTER_PROGRESS = "results.cluster.progress"
#: seconds one check may take before it is an error result
CHECK_TIMEOUT_S = 60.0
#: seconds all checks of one op may take (its triage included); the points after it are
#: recorded as skipped with that reason, so one slow op cannot hold a worker for long
OP_BUDGET_S = 240.0
#: seconds after which the parent kills a worker still checking one op: a hang in native code
#: (jax's ``expi`` and ``exp1`` on an array mixing tiny and O(1) values never return), which
#: the in-process limits above, raised from a signal handler between Python bytecodes, cannot
#: interrupt
OP_KILL_S = 2 * OP_BUDGET_S


@dataclass(frozen=True)
class Plan:
    """What a profile checks: dtypes (in order of preference), the bands checked at order 2
    and the bands checked below float32."""

    dtypes: tuple[str, ...]
    order2_bands: tuple[str, ...]
    low_precision_bands: tuple[str, ...]


PLANS = {
    "quick": Plan(("float64",), (), ()),
    "default": Plan(("float64", "float32", "float16", "bfloat16"),
                    ("sample", "unit", "zero", "near_integer", "tiny"),
                    ("sample", "unit", "large", "near_integer")),
    "thorough": Plan(("float64", "float32", "float16", "bfloat16"), ("*",), ("*",)),
}


@dataclass(frozen=True)
class SweepConfig:
    """One sweep's selection: backends, op globs, dtypes (None: the profile's), profile."""

    backends: tuple[str, ...]
    ops: tuple[str, ...] = ()
    dtypes: tuple[str, ...] | None = None
    profile: str = "default"
    triage: bool = True


def check_id(op: Op, dtype: str, band: str, order: int) -> str:
    return f"sweep:{op.backend}-{dtype}-{op.name}@{band}/o{order}"


def _dtypes(op: Op, cfg: SweepConfig) -> list[str]:
    wanted = cfg.dtypes or PLANS[cfg.profile].dtypes
    return [d for d in wanted if d in op.dtypes]


def _wanted(band: str, bands: tuple[str, ...]) -> bool:
    return "*" in bands or band in bands


def _forward(op: Op) -> points.Forward:
    from gradcheck.backends.registry import get_backend

    backend = get_backend(op.backend)

    def forward(arrays: Sequence[np.ndarray], dtype: str) -> list[np.ndarray]:
        cast = [np.asarray(a, dtype=np.float64).astype(numpy_dtype(dtype)) for a in arrays]
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return [np.asarray(o).astype(np.float64)
                    for o in backend.evaluate(op.fn, cast, "cpu")]

    return forward


def left_out_results(inv: Inventory) -> list[CheckResult]:
    """One skipped ``call`` result per name the inventory left out, with the reason."""
    return [CheckResult(kind=CheckKind.CALL, status=Status.SKIPPED, backend=x.backend, name=x.name,
                        message=f"left out of the sweep: {x.reason}",
                        sweep=SweepInfo(left_out=x.reason),
                        test_id=f"sweep:{x.backend}-{x.name}")
            for x in inv.left_out]


def _annotate(results: Sequence[CheckResult], op: Op, point: points.Point, dtype: str,
              order: int, profile: str) -> list[CheckResult]:
    tid = check_id(op, dtype, point.name, order)
    out = []
    for r in results:
        details = {k: v for k, v in r.details.items() if k != "sweep_oracle"}
        sweep = SweepInfo(point=point.name, order=order, profile=profile, family=op.family,
                          repaired=point.repaired, oracle=r.details.get("sweep_oracle", "check"))
        entry = known.lookup(op.backend, op.name, r.kind, dtype, point.name)
        mark = entry.mark() if entry is not None and not r.ok else r.known_as
        # gradcheck's own reproducer cannot import the sweep's functions (closures over an
        # OpInfo sample): the triage writes one for each finding instead
        out.append(dataclasses.replace(r, name=op.name, test_id=tid, details=details,
                                       sweep=sweep, reproducer="", known_as=mark))
    return out


def check_op(op: Op, cfg: SweepConfig, budget_s: float = OP_BUDGET_S) -> list[CheckResult]:
    """Every check of one op: each dtype, point and order, by :func:`gradcheck.check` and by
    the sweep's own resolution checks (:mod:`.resolution`); triaged where one did not pass.
    After ``budget_s`` seconds the remaining (dtype, point) pairs are skipped results."""
    return [r for batch in iter_check_op(op, cfg, budget_s) for r in batch]


def iter_check_op(op: Op, cfg: SweepConfig,
                  budget_s: float = OP_BUDGET_S) -> Iterator[list[CheckResult]]:
    """:func:`check_op`, a batch of recorded results at a time (a skipped point, or one
    (dtype, point, order)), as they are produced: what a cluster task streams back."""
    start = time.perf_counter()
    plan = PLANS[cfg.profile]
    forward = _forward(op)
    modes = ("rev", "fwd") if op.fwd else ("rev",)
    for dtype in _dtypes(op, cfg):
        pts, skipped = points.points(op, dtype, cfg.profile, forward)
        for s in skipped:
            yield [stream.record(_skipped(op, dtype, s.name, f"point {s.name!r} not "
                                          f"checked: {s.reason}",
                                          SweepInfo(point=s.name, skipped=s.reason)))]
        low = dtype in ("float16", "bfloat16")
        for point in pts:
            if low and not cfg.dtypes and not _wanted(point.name, plan.low_precision_bands):
                continue
            left = budget_s - (time.perf_counter() - start)
            if left <= 0:
                yield [stream.record(_skipped(
                    op, dtype, point.name, f"point {point.name!r} not checked: the op's time "
                    f"budget ({budget_s:g} s for all its checks) was spent",
                    SweepInfo(point=point.name, skipped="op time budget spent")))]
                continue
            order2 = op.order2 and _wanted(point.name, plan.order2_bands)
            second = order2 and (cfg.profile == "thorough" or dtype == "float64")
            for order in (1, 2) if second or order2 else (1,):
                yield _check_point(op, point, dtype, order, modes, cfg,
                                   check_too=order == 1 or second,
                                   limit=budget_s - (time.perf_counter() - start))


def failing(results: Sequence[CheckResult]) -> bool:
    """Whether an op's results hold a failure that is not a known one (what progress counts)."""
    return any(not r.ok and not r.known for r in results)


def _skipped(op: Op, dtype: str, band: str, message: str, sweep: SweepInfo) -> CheckResult:
    return CheckResult(kind=CheckKind.CALL, status=Status.SKIPPED, backend=op.backend,
                       dtype=dtype, name=op.name, message=message, sweep=sweep,
                       test_id=f"sweep:{op.backend}-{dtype}-{op.name}@{band}")


def _check_point(op: Op, point: points.Point, dtype: str, order: int, modes: tuple[str, ...],
                 cfg: SweepConfig, check_too: bool, limit: float) -> list[CheckResult]:
    """One (dtype, point, order): :func:`gradcheck.check` (unless ``check_too`` is false: order
    2 below float64 outside the thorough profile, which only the resolution checks judge), the
    resolution checks, the triage; recorded."""
    from gradcheck.api import check

    seed = points.seed_of(check_id(op, dtype, point.name, order))
    results: list[CheckResult] = []
    with warnings.catch_warnings(), stream.suspended():
        warnings.simplefilter("ignore")
        if check_too:
            try:
                rep = check(op.fn, *point.arrays, backend=op.backend, dtype=dtype, modes=modes,
                            order=order, seed=seed, name=op.name,
                            timeout=max(1.0, min(CHECK_TIMEOUT_S, limit)), resolution=False)
                results = list(rep.results)
            except Exception as exc:  # an argument the check refuses
                results = [CheckResult(kind=CheckKind.CALL, status=Status.ERROR,
                                       backend=op.backend, dtype=dtype, name=op.name,
                                       seed=seed, message=f"gradcheck.check raised "
                                       f"{type(exc).__name__}: {exc}")]
        if not any(r.kind == "call" and r.status is Status.ERROR for r in results):
            results += _bounded(lambda: resolution.resolution_checks(
                op, point.arrays, dtype, order, seed, modes), CHECK_TIMEOUT_S,
                lambda: [])
    results = _annotate(results, op, point, dtype, order, cfg.profile)
    if cfg.triage and failing(results):
        done = results
        results = _bounded(lambda: triage.triage(op, point, dtype, order, done),
                           CHECK_TIMEOUT_S, lambda: triage.untriaged(
                               op, done, f"the triage did not finish within "
                               f"{CHECK_TIMEOUT_S:g} s"))
    return stream.record_many(results)


def _bounded(job: Any, seconds: float, fallback: Any) -> Any:
    """``job()`` within ``seconds`` (``fallback()`` where it does not finish)."""
    try:
        with limits.deadline(seconds):
            return job()
    except limits.Timeout:
        return fallback()


def run_ops(backend: str, names: Sequence[str], cfg: SweepConfig,
            path: str | None = None, ops: Sequence[Op] | None = None,
            progress: str | None = None, display: Progress | None = None) -> int:
    """Check the named ops of ``backend`` (in this process), recording into ``path`` when
    given (else into the active stream); ``progress`` is a file that holds the name of the op
    being checked (what a parent reads when this process dies); ``display`` is told each op
    done.  Returns the result count."""
    if ops is None:
        wanted = set(names)
        inv = inventory(backend, list(names))
        ops = sorted((o for o in inv.ops if o.name in wanted), key=lambda o: names.index(o.name))
    count = 0
    warnings.simplefilter("ignore")  # the ops' own deprecation warnings, once per op
    context = stream.using(path, role="sweep-worker") if path else _nothing()
    per_op = progress is not None and mode_for(sys.stderr) == "ops"
    with context as worker_stream:
        for k, op in enumerate(ops):
            if progress:
                Path(progress).write_text(op.name)
            began = time.perf_counter()
            results = check_op(op, cfg)
            count += len(results)
            if display is not None:
                display.done(op.backend, failing(results), op.name)
            if per_op:  # a worker, asked for one line per op on stderr (the parent's log)
                print(f"sweep {op.backend} [{k + 1}/{len(ops)}] {op.name}: {len(results)} "
                      f"results, {time.perf_counter() - began:.1f} s", file=sys.stderr,
                      flush=True)
    if worker_stream is not None and worker_stream.error is not None:
        raise worker_stream.error  # a worker: exits non-zero, its parent says which stream
    if progress:  # every op done: what follows (the interpreter's exit) is no op's hang
        Path(progress).write_text("")
    return count


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _worker(backend: str, names: list[str], cfg: SweepConfig, path: str, progress: str) -> None:
    warnings.simplefilter("ignore")
    run_ops(backend, names, cfg, path, progress=progress)


def _tied(parent: int, target: Any, *args: Any) -> None:
    """A worker's entry point: it dies with the sweep (even a SIGKILLed one), then runs."""
    children.die_with_parent(parent)
    target(*args)


def crash_result(backend: str, name: str, exitcode: int | None,
                 hung_s: float | None = None, how: str | None = None,
                 kill_s: float = OP_KILL_S) -> CheckResult:
    """The ``error`` result of an op during whose checks the worker process died (a native
    crash of the engine: a signal, ``abort()``, heap corruption; ``how`` says what a cluster
    reported instead of an exit status) or was killed because the op ran for ``hung_s``
    seconds (a hang; ``kill_s`` the limit it passed)."""
    if hung_s is not None:
        message = (f"the op's checks ran for {hung_s:.0f} s, past the sweep's limit of "
                   f"{kill_s:g} s per op, inside code the per-check limits cannot interrupt "
                   "(a hang in the engine's native code), so the worker was killed; its "
                   "results before that are in the stream, the ops after it were checked by a "
                   "new worker")
        symptom = "hang"
    else:
        cause = ("a crash of the engine at one of its points, or the loss of the node it ran "
                 "on (a cluster task is never retried)" if how else
                 "a crash of the engine at one of its points")
        how = how or (f"signal {-exitcode}" if exitcode is not None and exitcode < 0
                      else f"exit status {exitcode}")
        message = (f"the worker process died ({how}) while checking this op: {cause}; its "
                   "results before the crash are in the stream (the worker's run has no end "
                   "record), the ops after it were checked by a new worker")
        symptom = "raised"
    key = "|".join((backend, name, "call", "crash", symptom))
    sweep = SweepInfo(point="crash", exitcode=exitcode,
                      hung_s=None if hung_s is None else round(hung_s, 1))
    entry = known.lookup(backend, name, "call", "*", "crash")
    return CheckResult(kind=CheckKind.CALL, status=Status.ERROR, backend=backend, name=name,
                       message=message, test_id=f"sweep:{backend}-{name}@crash",
                       sweep=sweep, triage=Triage("crash", symptom, key, {}, ""),
                       known_as=None if entry is None else entry.mark())


@dataclass
class _Running:
    """A worker process, its shard and what its progress file said when last read; with a
    ``display``, the ops it finished are shown, failing or not (read from its stream)."""

    proc: Any
    backend: str
    names: list[str]
    progress: Path
    current: str = ""
    since: float = dataclasses.field(default_factory=time.monotonic)
    part: Path | None = None
    display: Progress | None = None
    offset: int = 0
    failing: set[str] = dataclasses.field(default_factory=set)

    def poll(self, now: float) -> float:
        """Re-read the op being checked; the seconds it has been checked for."""
        name = self.progress.read_text() if self.progress.exists() else ""
        if name != self.current:
            if self.current:
                self.finished(self.current)
            self.current, self.since = name, now
        return now - self.since

    def finished(self, name: str, crashed: bool = False) -> None:
        """``name`` is done: shown, failing where its stream (or a crash) says so."""
        if self.display is None:
            return
        self._read_stream()
        self.display.done(self.backend, crashed or name in self.failing, name)

    def _read_stream(self) -> None:
        """The names of the failing results written since the last read (whole lines)."""
        if self.part is None or not self.part.exists():
            return
        with open(self.part, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            if b'"status": "failed"' in line or b'"status": "error"' in line:
                try:
                    r = CheckResult.from_json(line.decode("utf-8", "replace"))
                except (ValueError, TypeError, KeyError):
                    continue
                if not r.ok and not r.known:
                    self.failing.add(r.name)


def run_parallel(tasks: list[tuple[str, list[str]]], cfg: SweepConfig, out: Path,
                 jobs: int, target: Any = None, kill_s: float = OP_KILL_S,
                 display: Progress | None = None) -> list[Path]:
    """Run the shards ``(backend, op names)`` in at most ``jobs`` spawned processes running
    ``target(backend, names, cfg, stream_path, progress_path)`` (default: check the ops); a
    process that dies, or that its progress file shows on one op for ``kill_s`` seconds (and
    is then killed), is replaced by one for the ops after that op, which is recorded as a
    crash in the active stream; ``display`` is told each op done.  Returns the stream files
    written."""
    ctx = get_context("spawn")
    queue = list(tasks)
    running: list[_Running] = []
    parts: list[Path] = []
    try:
        _supervise(queue, running, parts, ctx, cfg, out, jobs, target, kill_s, display)
    finally:  # stopped early (SIGINT, SIGTERM, an error): no worker outlives the sweep; their
        for w in running:  # streams and progress files stay for --resume
            if w.proc.exitcode is None:
                w.proc.kill()
                w.proc.join()
    return parts


def _supervise(queue: list[tuple[str, list[str]]], running: list[_Running], parts: list[Path],
               ctx: Any, cfg: SweepConfig, out: Path, jobs: int, target: Any,
               kill_s: float, display: Progress | None = None) -> None:
    """The loop of :func:`run_parallel`: start workers for the shards in ``queue``, replace
    the ones that die or hang, until every shard is done (``running`` and ``parts`` are
    updated in place, so the caller can stop what runs if this is interrupted)."""
    while queue or running:
        while queue and len(running) < jobs:
            backend, names = queue.pop(0)
            part = out / f"results.sweep{len(parts)}.jsonl"
            progress = part.with_suffix(".progress")
            for f in (part, progress):
                f.unlink(missing_ok=True)
            proc = ctx.Process(target=_tied, args=(os.getpid(), target or _worker, backend, names,
                                                    cfg, str(part), str(progress)))
            proc.start()
            parts.append(part)
            running.append(_Running(proc, backend, names, progress, part=part,
                                    display=display))
        for w in list(running):
            w.proc.join(timeout=0.2)
            hung = None
            if w.proc.exitcode is None:
                seconds = w.poll(time.monotonic())
                if not w.current or seconds < kill_s:
                    continue
                w.proc.kill()
                w.proc.join()
                hung = seconds
            running.remove(w)
            w.poll(time.monotonic())
            w.progress.unlink(missing_ok=True)
            if (hung is not None or w.proc.exitcode != 0) and w.current in w.names:
                stream.record(crash_result(w.backend, w.current, w.proc.exitcode, hung,
                                           kill_s=kill_s))
                w.finished(w.current, crashed=True)
                rest = w.names[w.names.index(w.current) + 1:]
                if rest:
                    queue.append((w.backend, rest))


def merge(target: Path, parts: Sequence[Path]) -> None:
    """Append the worker streams to ``target`` (each ends in a newline), then delete them;
    :class:`WriteFailed` naming ``target`` where it cannot be written (parts not yet
    appended are kept)."""
    try:
        with open(target, "ab") as out:
            for part in parts:
                if part.exists():
                    data = part.read_bytes()
                    out.write(data if not data or data.endswith(b"\n") else data + b"\n")
                    out.flush()
                    part.unlink()
    except OSError as exc:
        raise WriteFailed(target, exc) from exc


class NothingSelected(ValueError):
    """The selection matches no op of any inventory (and no op was injected)."""


@dataclass(frozen=True)
class SweepOutcome:
    stream: Path
    inventories: tuple[Inventory, ...]
    seconds: float
    resumed: int = 0  # ops skipped by ``resume`` (they already had results)


def _resume_state(out: Path) -> tuple[set[tuple[str, str]], bool]:
    """What a stopped sweep in ``out`` already checked: its workers' leftover streams are
    appended to ``results.jsonl`` first; an op counts as done where it has a result and no
    worker was checking it when the run stopped (its ``.progress`` file names it, or a
    cluster run's ``results.cluster.progress``, a line per op in flight: that op is checked
    again, beside its partial results).  Also whether the left-out names are in."""
    from gradcheck.stream import read_streams

    target = out / STREAM
    current = {p.read_text() for p in out.glob("results.sweep*.progress")}
    cluster = out / CLUSTER_PROGRESS
    if cluster.exists():
        current |= {line for line in cluster.read_text().splitlines() if line}
    merge(target, sorted(out.glob("results.sweep*.jsonl")))
    for p in [*out.glob("results.sweep*.progress"), cluster]:
        p.unlink(missing_ok=True)
    if not target.exists():
        return set(), False
    done: set[tuple[str, str]] = set()
    left = False
    for r in read_streams([target]).checks:
        if r.sweep is not None and r.sweep.left_out is not None:
            left = True
        elif r.name and r.name not in current:
            done.add((r.backend, r.name))
    return done, left


def sweep(cfg: SweepConfig, report_dir: str | os.PathLike[str], jobs: int = 1,
          extra_ops: Sequence[Op] = (), isolate: bool = False,
          resume: bool = False, executor: Executor | None = None,
          show_progress: bool = False) -> SweepOutcome:
    """Run the sweep and write ``report_dir/results.jsonl`` (replaced; with ``resume`` kept,
    and only the ops without results in it checked); ``extra_ops`` are checked in this
    process as if the inventory had them (tests inject mutants this way).  With ``jobs > 1``
    or ``isolate`` the inventory's ops run in worker processes, so that a native crash of the
    engine is recorded (:func:`crash_result`) instead of ending the run.  ``executor`` runs
    the inventory's ops elsewhere (:mod:`.executors`: a Ray cluster); ``show_progress`` shows
    each backend's progress on stderr (:mod:`gradcheck.core.progress`)."""
    from gradcheck.sweep.executors import LocalProcesses

    start = time.perf_counter()
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    done, have_left = _resume_state(out) if resume else (set(), False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inventories = tuple(inventory(b, list(cfg.ops) or None).select(cfg.ops or None)
                            for b in cfg.backends)
    if jobs < 1:
        raise ValueError(f"jobs={jobs!r}: need at least one worker")
    if not extra_ops and not any(inv.ops for inv in inventories):
        where = ", ".join(cfg.backends)
        raise NothingSelected(f"--op {', '.join(map(repr, cfg.ops))} matches no op of {where}"
                              if cfg.ops else f"no op of {where} was found")
    for dtype in cfg.dtypes or ():
        if not extra_ops and not any(dtype in o.dtypes for inv in inventories for o in inv.ops):
            raise NothingSelected(f"--dtype {dtype!r}: no selected op of "
                                  f"{', '.join(cfg.backends)} declares it")
    target = out / STREAM
    if not resume:
        target.unlink(missing_ok=True)
    tasks: list[tuple[str, list[str]]] = []
    parts: list[Path] = []
    skipped = 0
    display = Progress("gradcheck sweep", "ops") if show_progress else None
    # the display ended (its line's newline) however the block ends
    ending = contextlib.nullcontext() if display is None else contextlib.closing(display)
    with stream.using(target, role="sweep") as main, ending:
        if not have_left:
            for inv in inventories:
                stream.record_many(left_out_results(inv))
        if extra_ops:
            run_ops("", [], cfg, None, ops=list(extra_ops))
        for inv in inventories:
            todo = [o for o in inv.ops if (inv.backend, o.name) not in done]
            skipped += len(inv.ops) - len(todo)
            names = [o.name for o in todo]
            if not names:
                continue
            if display is not None:
                display.plan(inv.backend, len(names))
            n = 1 if executor is not None else max(1, min(jobs, len(names)))
            if n == 1 and not isolate and executor is None:
                run_ops(inv.backend, names, cfg, None, ops=todo, display=display)
                continue
            tasks += [(inv.backend, names[k::n]) for k in range(n)]
        if tasks:
            parts = (executor or LocalProcesses(jobs)).run(tasks, cfg, out, display)
    if main.error is not None:  # a full disk: the stream is incomplete, no report from it
        raise main.error
    merge(target, parts)
    return SweepOutcome(target, inventories, time.perf_counter() - start, skipped)
