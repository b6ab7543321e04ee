"""pytest hooks of the report: one result stream per process, test ids, shards, the xdist merge,
and ``index.html`` + ``junit.xml`` at the end of the session.

With ``--gradcheck-report-dir=DIR`` every process streams to its own file (written line by
line, crash-safe): the main process (or the xdist controller) to ``DIR/results.jsonl`` and each
xdist worker to ``DIR/results.<worker>.jsonl``.  At session end the controller merges the worker
files into ``results.jsonl`` (atomically, then deletes them) and writes the report; if it dies
first, ``gradcheck report DIR`` rebuilds the report from whatever files are there.  The main
process holds an exclusive lock on ``DIR/.gradcheck.lock`` for the whole session, so a second
run into the same directory is refused instead of deleting the first one's results.  With
``--gradcheck-shard=I/N`` only the I-th of N deterministic parts of the collected tests run and
the stream is ``results.shard-I-of-N.jsonl``; ``gradcheck report`` merges the shards.

Without a report directory, ``GRADCHECK_RESULTS=path`` still streams (every process appends to
that one file).  Check results recorded during a test carry its node id.
"""

from __future__ import annotations

import os
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gradcheck import stream
from gradcheck.backends import children
from gradcheck.core.errors import WriteFailed
from gradcheck.plugin.known_marker import declared_known
from gradcheck.report import ReportFiles, model, write_report
from gradcheck.stream.reader import terminal_safe

try:  # POSIX; elsewhere runs are not locked
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".gradcheck.lock"

_STATE = pytest.StashKey["_State"]()


@dataclass
class _State:
    path: Path | None = None  # this process's stream (owned by these hooks)
    report_dir: Path | None = None
    shard: tuple[int, int] | None = None
    worker: str | None = None
    files: ReportFiles | None = None
    error: str = ""
    lock: ReportDirLock | None = None
    stream: stream.ResultStream | None = None  # this process's, to ask whether writes failed


class ReportDirInUse(Exception):
    """Another gradcheck run holds the lock of this report directory."""


class ReportDirLock:
    """An exclusive ``flock`` on ``DIR/.gradcheck.lock`` (released when the process ends, however
    it ends).  The file holds the owner's pid and start time, for the refusal message."""

    def __init__(self, report_dir: Path) -> None:
        self.path = report_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> ReportDirLock:
        """Take the lock without waiting; raises :class:`ReportDirInUse` when it is held."""
        if fcntl is None:  # pragma: no cover - Windows
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                owner = os.read(fd, 200).decode("utf-8", "replace").strip()
                os.close(fd)
                raise ReportDirInUse(
                    f"report directory {str(self.path.parent)!r} is in use by another gradcheck "
                    f"run ({owner or 'owner unknown'}); wait for it to finish or choose another "
                    "report directory") from None
            try:  # the holder before us may have deleted the file after we opened it: retry
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        os.write(fd, f"pid {os.getpid()}, started {started}".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        """Delete the lock file and unlock (idempotent)."""
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)  # while still locked: see the retry in acquire()
        os.close(self._fd)
        self._fd = None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradcheck", "gradient checking")
    group.addoption("--gradcheck-shard", metavar="I/N", default=None,
                    help="run only the I-th of N deterministic parts of the collected tests "
                         "(1 <= I <= N; merge the shards' streams with `gradcheck report`)")


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"2/4"`` -> ``(2, 4)``; raises ``pytest.UsageError`` for anything else."""
    if text is None:
        return None
    try:
        i, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise pytest.UsageError(f"--gradcheck-shard={text!r}: expected I/N, e.g. 1/4") from None
    if not 1 <= i <= n:
        raise pytest.UsageError(f"--gradcheck-shard={text!r}: need 1 <= I <= N")
    return i, n


def shard_of(nodeid: str, n: int) -> int:
    """The shard (1..n) a test belongs to: a stable hash of its node id, so every machine
    agrees even if their collections differ (a backend missing on one of them)."""
    return zlib.crc32(nodeid.encode("utf-8")) % n + 1


def stream_name(shard: tuple[int, int] | None, worker: str | None = None) -> str:
    stem = "results" if shard is None else f"results.shard-{shard[0]}-of-{shard[1]}"
    return f"{stem}.{worker}.jsonl" if worker else f"{stem}.jsonl"


def pytest_configure(config: pytest.Config) -> None:
    state = _State(shard=parse_shard(config.getoption("gradcheck_shard", None)))
    config.stash[_STATE] = state
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None:  # an xdist worker: stream next to the controller's file
        if "gradcheck_controller" in workerinput:  # and die with the controller, even SIGKILLed
            children.die_with_parent(int(workerinput["gradcheck_controller"]))
        state.worker = str(workerinput.get("workerid", f"w{os.getpid()}"))
        main = workerinput.get("gradcheck_stream")
        if main:
            state.path = Path(main).with_name(stream_name(state.shard, state.worker))
    else:
        config.pluginmanager.register(_TestRecorder(), "gradcheck-report-tests")
        report_dir = config.getoption("gradcheck_report_dir", None)
        if report_dir:
            state.report_dir = Path(report_dir)
            try:
                state.lock = ReportDirLock(state.report_dir).acquire()
            except ReportDirInUse as exc:
                raise pytest.UsageError(f"--gradcheck-report-dir: {exc}") from None
            except OSError as exc:
                raise pytest.UsageError(f"--gradcheck-report-dir={report_dir!r}: cannot create "
                                        f"the directory ({exc.strerror}); pass a writable "
                                        "directory") from None
            state.path = state.report_dir / stream_name(state.shard)
            _warn_if_env_ignored(config, state.path)
            for old in [state.path, *_worker_files(state.path, state.shard)]:
                old.unlink(missing_ok=True)  # a new run replaces the previous one
    if state.path is not None:
        try:
            state.stream = stream.activate(state.path, role=state.worker or "main")
        except WriteFailed as exc:
            raise pytest.UsageError(f"--gradcheck-report-dir: {exc}") from None


def _warn_if_env_ignored(config: pytest.Config, path: Path) -> None:
    """``GRADCHECK_RESULTS`` and ``--gradcheck-report-dir`` both name where results go: the
    option wins, and the variable is not silently ignored."""
    env = os.environ.get(stream.ENV_VAR)
    if env:
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            f"{stream.ENV_VAR}={env} is ignored: --gradcheck-report-dir is given, so the "
            f"results stream to {path} (and the report is written beside it); unset "
            f"{stream.ENV_VAR} or drop the option to stream to {env}"), stacklevel=2)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist (controller side): tell each worker where the controller streams, and who its
    parent is (a worker dies with the controller)."""
    node.workerinput["gradcheck_controller"] = os.getpid()
    state = node.config.stash.get(_STATE, None)
    if state is not None and state.path is not None:
        node.workerinput["gradcheck_stream"] = str(state.path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shard = config.stash[_STATE].shard
    if shard is None:
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        (keep if shard_of(item.nodeid, shard[1]) == shard[0] else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    stream.set_test_id(item.nodeid)
    try:
        yield
    finally:
        stream.set_test_id(None)


def _outcome(report: pytest.TestReport) -> str | None:
    """The test outcome this report settles, or None (one record per test phase that counts)."""
    if hasattr(report, "wasxfail"):
        return "xpassed" if report.passed else ("xfailed" if report.when == "call" or
                                                report.skipped else None)
    if report.when == "call":
        return report.outcome
    if report.failed:
        return "error"
    if report.when == "setup" and report.skipped:
        return "skipped"
    return None


class _TestRecorder:
    """Records test outcomes; registered only in the process that sees every report (the main
    process or the xdist controller, which also sees the tests of crashed workers)."""

    @staticmethod
    def pytest_runtest_logreport(report: pytest.TestReport) -> None:
        outcome = _outcome(report)
        if outcome is None:
            return
        message = report.longreprtext[-4000:] if report.failed else ""
        if report.skipped and isinstance(report.longrepr, tuple):
            message = str(report.longrepr[2])
        record = {"record": "test", "test_id": report.nodeid, "outcome": outcome,
                  "duration_s": report.duration, "message": message}
        record.update(declared_known(report))  # the gradcheck_known marker's reason, link
        stream.write_record(record)


def _worker_files(path: Path, shard: tuple[int, int] | None) -> list[Path]:
    stem = stream_name(shard)[: -len(".jsonl")]
    return sorted(p for p in path.parent.glob(f"{stem}.*.jsonl")
                  if p.name != path.name and not p.name.startswith(f"{stem}.shard-"))


def merge_worker_streams(report_dir: Path, shard: tuple[int, int] | None = None) -> Path:
    """Append the xdist worker streams of a run (``results.gwN.jsonl``) to its main stream and
    delete them; returns the main stream's path."""
    path = Path(report_dir) / stream_name(shard)
    merge_files(path, _worker_files(path, shard))
    return path


def merge_files(target: Path, parts: list[Path]) -> None:
    """Append the lines of ``parts`` to ``target`` atomically, then delete the parts."""
    tmp = target.with_name(f".{target.name}.merge.tmp")
    try:
        with open(tmp, "wb") as out:
            for src in [target, *parts]:
                if src.exists():
                    data = src.read_bytes()
                    out.write(data if not data or data.endswith(b"\n") else data + b"\n")
        os.replace(tmp, target)
    except OSError as exc:  # a full disk: the streams are kept as they were
        tmp.unlink(missing_ok=True)
        raise WriteFailed(target, exc) from exc
    for part in parts:
        part.unlink(missing_ok=True)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is None or state.path is None:
        return
    stream.deactivate(int(exitstatus))
    if state.stream is not None and state.stream.error is not None:
        # a full disk: the stream is incomplete; never a success (docs/report.md)
        state.error = str(state.stream.error)
    if state.worker is None and state.report_dir is not None:
        try:
            merge_worker_streams(state.report_dir, state.shard)
            state.files = write_report([state.path], state.report_dir)
        except WriteFailed as exc:
            state.error = state.error or str(exc)
        except Exception as exc:  # the tests ran; a report failure must say so, not crash
            state.error = state.error or f"{type(exc).__name__}: {exc}"
    if state.error:
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None and state.lock is not None:
        state.lock.release()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or state.report_dir is None:
        return
    tr = terminalreporter
    tr.section("gradcheck")
    if state.files is not None:
        summary_lines(state.files, tr.write_line)
    if state.error or state.files is None:
        what = "the results are incomplete" if state.files else "no report was written"
        tr.write_line(f"gradcheck: error: {state.error or 'unknown'} ({what}; exit status "
                      f"{int(pytest.ExitCode.INTERNAL_ERROR)})", red=True)


def summary_lines(files: ReportFiles, write: Any) -> None:
    """The terminal summary: counts, per target, the worst failures, the report's path.  Names
    come from the stream (any text): control characters are printed as escapes."""
    data = files.data
    t = terminal_safe
    counts = ", ".join(f"{n} {s}" for s, n in model.status_counts(data.checks).items() if n)
    write(f"{len(data.checks)} checks: {counts or 'none'}")
    for (backend, device, dtype), c in model.counts_by_target(data.checks):
        parts = ", ".join(f"{c[s]} {s}" for s in model.SEVERITY if c.get(s))
        write(f"  {t(backend)} {t(device)} {t(dtype)}: {parts}")
    bad = sorted((r for r in data.checks if model.is_bad(r)),
                 key=lambda r: (model.SEVERITY.index(r.status.value), -(r.discrepancy_ratio or 0)))
    for r in bad[:10]:
        ratio = f" ratio {r.discrepancy_ratio:.3g}" if r.discrepancy_ratio is not None else ""
        test = f" in {t(r.test_id)}" if r.test_id else ""
        write(f"  {r.status.value.upper()} {t(r.name)}: {t(r.subject)} [{t(r.backend)} "
              f"{t(r.device)} {t(r.dtype)}]{ratio}{test}")
    if len(bad) > 10:
        write(f"  ... {len(bad) - 10} more in the report")
    if data.problems:
        write(f"{len(data.problems)} stream problem(s) (listed in the report)")
    write(f"report: {t(files.html)}")
    write(f"junit:  {t(files.junit)}")
