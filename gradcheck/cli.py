"""The ``gradcheck`` command line: ``run``, ``sweep``, ``report``, ``backends``, ``ops``, ``model``.

The texts users see (``--help``) are :data:`DESCRIPTION` and :data:`EPILOG`; the commands and
exit codes are documented in docs/report.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from gradcheck.backends import children
from gradcheck.backends.registry import get_backend, installed_backends, known_backends
from gradcheck.core.errors import InvalidArgument, WriteFailed
from gradcheck.stream.reader import terminal_safe

if TYPE_CHECKING:
    from gradcheck.backends.listing import BackendListing

OK, DISCREPANCIES, USAGE = 0, 1, 2
#: exit status of a run stopped by a signal: 128 + the signal number, as shells report it
INTERRUPTED = {s: children.exit_status(s) for s in children.STOP_SIGNALS}  # 130, 143, 129
BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of our output went away (`gradcheck ops | head`)
SUITES_ENV = "GRADCHECK_SUITES"

DESCRIPTION = """\
Gradient-correctness checks: run the standard suites on the installed backends, build
reports from result streams, list backends and the op catalog.
Run "gradcheck COMMAND --help" for the options of a command."""

EPILOG = """\
exit codes:
  0    everything passed
  1    discrepancies found (a check failed or errored, a test failed), or a
       stream read by "report" comes from a process that did not finish or has
       records of an unknown schema version (skipped), or a CI shard is missing
  2    usage or internal error (bad option, unknown backend, a selection that
       plans no check, report directory unusable or in use, no readable results,
       an input of "report" that cannot be read: the others are reported, a file
       that could not be written: a full disk)
  130  "run" or "sweep" stopped by SIGINT (Ctrl-C); 143: by SIGTERM; 129: by
       SIGHUP (the report of what finished is written first)
  141  the reader of the output went away (e.g. "gradcheck ops | head")"""


class UsageError(Exception):
    """A problem with the command line; printed without a traceback, exit code 2."""


def find_suites(explicit: str | None = None) -> Path:
    """Where the standard suites are, in this order: ``--suites``, ``$GRADCHECK_SUITES``, the
    ``suites`` directory shipped inside the installed package (``gradcheck/suites``), the
    ``suites`` directory of the gradcheck checkout this module runs from."""
    if explicit or os.environ.get(SUITES_ENV):
        path = Path(explicit or os.environ[SUITES_ENV])
        if not path.exists():
            raise UsageError(f"suites path {str(path)!r} does not exist")
        return path
    package = Path(__file__).resolve().parent
    candidates = [package / "suites"]
    root = package.parent
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "gradcheck"' in pyproject.read_text(errors="replace"):
        candidates.append(root / "suites")
    for path in candidates:
        if path.is_dir():
            return path
    raise UsageError("cannot find the gradcheck suites (looked in: "
                     + ", ".join(map(str, candidates))
                     + f"); pass --suites PATH or set {SUITES_ENV}")


def _validate_backends(specs: list[str]) -> None:
    """Fail fast on an unknown backend (names are checked without importing their engine)."""
    if os.getcwd() not in sys.path:  # pytest runs as `python -m pytest`: cwd is importable
        sys.path.insert(0, os.getcwd())
    installed = installed_backends()
    for spec in specs:
        if ":" not in spec and spec in installed:
            continue
        if ":" not in spec and spec in known_backends():
            raise UsageError(f"backend={spec!r} is not installed; installed: "
                             + ", ".join(installed))
        try:
            from gradcheck.backends.registry import backend_devices

            backend_devices(get_backend(spec))  # a broken devices() too: one line, not pytest's
        except InvalidArgument as exc:
            raise UsageError(str(exc)) from None


def _validate_selection(args: argparse.Namespace) -> None:
    """Cheap up-front checks of --op and --dtype (the plugin checks the whole plan later)."""
    from gradcheck.plugin import selection as _selection

    for pattern in _selection.unmatched_ops(args.op or ()):
        raise UsageError(_selection.op_message(pattern, "--op"))
    for dtype, listing in _selection.undeclared_dtypes(args.dtype or (), args.backend,
                                                       only_unusual=True):
        raise UsageError(_selection.dtype_message(dtype, listing, "--dtype"))


def writable_dir(path: str, option: str) -> Path:
    """``path`` as a directory that exists (created if needed) and can be written to; a
    :class:`UsageError` naming the option otherwise."""
    target = Path(path)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in [target, *target.parents] if p.exists()), target)
        why = (f"{str(blocker)!r} is a file, not a directory" if blocker.is_file()
               else exc.strerror or type(exc).__name__)
        raise UsageError(f"{option} {path!r}: cannot create the directory ({why}); pass a "
                         "directory that can be written to") from None
    if not target.is_dir():
        raise UsageError(f"{option} {path!r} is a file, not a directory; pass a directory")
    if not os.access(target, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path!r} is not writable; pass a directory that can be "
                         "written to")
    return target


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def parse_jobs(text: str) -> int | str:
    """``-j/--jobs`` of ``run`` and ``sweep``: ``auto`` or a whole number from 1 to 4 x the
    usable CPUs; anything else is a :class:`UsageError` of one line."""
    if text == "auto":
        return text
    limit = 4 * usable_cpus()
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(f"-j/--jobs {text!r}: pass a whole number from 1 to {limit} or 'auto'")
    if n > limit:
        raise UsageError(f"-j/--jobs {n}: at most {limit} workers here (4 x the "
                         f"{usable_cpus()} usable CPUs); pass a smaller number or 'auto'")
    return n


def _nothing_empty(args: argparse.Namespace) -> None:
    """An empty or blank ``--backend/--device/--dtype/--op`` selects nothing (an empty
    ``--op`` would otherwise be a substring of every name): refused."""
    for option in ("backend", "device", "dtype", "op"):
        for value in getattr(args, option, None) or ():
            if not value.strip():
                raise UsageError(f"--{option} {value!r} is empty: it names nothing to select; "
                                 f"leave --{option} out to select every {option}")


def pytest_args(args: argparse.Namespace, suites: Path) -> list[str]:
    """The pytest command line of ``gradcheck run``."""
    # -p loads the plugin wherever the suites live (a no-op when it is already registered)
    argv = [str(suites), "-q", "--tb=short", "-p", "no:cacheprovider", "-p",
            "gradcheck.pytest_plugin", f"--gradcheck-report-dir={args.report_dir}",
            "--gradcheck-progress=auto"]
    if args.profile:
        argv.append(f"--gradcheck-profile={args.profile}")
    for option, values in (("backend", args.backend), ("device", args.device),
                           ("dtype", args.dtype), ("op", args.op)):
        argv += [f"--gradcheck-{option}={v}" for v in values or ()]
    if args.shard:
        argv.append(f"--gradcheck-shard={args.shard}")
    if args.jobs is not None:
        parse_jobs(args.jobs)  # validated in _cmd_run already; callers may build args directly
        if importlib.util.find_spec("xdist") is None:
            raise UsageError("-j/--jobs needs pytest-xdist: pip install pytest-xdist")
        argv += ["-n", str(args.jobs)]
    return argv + list(args.pytest_args or ())


def _cmd_run(args: argparse.Namespace) -> int:
    from gradcheck.plugin import child as _child
    from gradcheck.plugin.session_report import ReportDirInUse, ReportDirLock

    _nothing_empty(args)
    if args.jobs is not None:
        parse_jobs(args.jobs)
    _validate_backends(args.backend or [])
    _validate_selection(args)
    report_dir = writable_dir(args.report_dir, "--report-dir")
    try:  # fail before pytest starts; pytest itself holds the lock for the run
        ReportDirLock(report_dir).acquire().release()
    except ReportDirInUse as exc:
        raise UsageError(str(exc)) from None
    argv = pytest_args(args, find_suites(args.suites))
    print("gradcheck run: pytest " + " ".join(argv), flush=True)
    started = time.time()
    # a fresh interpreter: pytest sees an unused process (assertion rewriting, plugin state)
    outcome = _child.run([sys.executable, "-m", "pytest", *argv])
    if outcome.signal is not None:
        return _interrupted(args, report_dir, outcome)
    code = outcome.returncode
    html = report_dir / "index.html"
    if code == 5:
        print("gradcheck: no tests were collected (check --backend/--device/--dtype/--op)",
              file=sys.stderr)
        return USAGE
    if code in (0, 1):
        missing = [p for p in (html, report_dir / "junit.xml") if not _written_since(p, started)]
        if missing:  # never a success without its report
            print("gradcheck: error: the run ended but did not write "
                  + ", ".join(repr(str(p)) for p in missing), file=sys.stderr)
            return USAGE
        print(f"gradcheck: report written to {html.resolve()}")
        return code
    print(f"gradcheck: pytest stopped with exit code {code}"
          + (" (a usage error: see its message above)" if code == 4 else "")
          + (" (results or report not written: see the message above)" if code == 3 else ""),
          file=sys.stderr)
    return USAGE


def _written_since(path: Path, started: float) -> bool:
    """``path`` exists and was written after ``started`` (not left by an earlier run); file
    times are a little coarser than ``time.time()``, hence the second of slack."""
    try:
        return path.stat().st_mtime >= started - 1.0
    except OSError:
        return False


def _interrupted(args: argparse.Namespace, report_dir: Path, outcome) -> int:
    """After a stop signal: the report from what finished, built as `gradcheck report` does."""
    from gradcheck.plugin.session_report import (
        ReportDirInUse,
        ReportDirLock,
        merge_worker_streams,
        parse_shard,
        summary_lines,
    )
    from gradcheck.report import write_report

    name = signal.Signals(outcome.signal).name
    how = " (its processes were killed after the grace period)" if outcome.killed else ""
    print(f"gradcheck: interrupted by {name}: pytest was stopped{how}", file=sys.stderr)
    try:
        lock = ReportDirLock(report_dir).acquire()
    except ReportDirInUse as exc:
        print(f"gradcheck: the report was not rebuilt: {exc}", file=sys.stderr)
        return INTERRUPTED[outcome.signal]
    try:
        stream_path = merge_worker_streams(report_dir, parse_shard(args.shard))
        files = write_report([stream_path], report_dir)
    except Exception as exc:  # say so; the results on disk are still there
        print(f"gradcheck: the report could not be written: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return INTERRUPTED[outcome.signal]
    finally:
        lock.release()
    summary_lines(files, print)
    print(f"gradcheck: interrupted; the report of what finished is {files.html.resolve()}",
          file=sys.stderr)
    return INTERRUPTED[outcome.signal]


def _cmd_sweep(args: argparse.Namespace) -> int:
    from gradcheck.plugin.session_report import ReportDirInUse, ReportDirLock, summary_lines
    from gradcheck.report import write_report
    from gradcheck.sweep import cli as sweep_cli
    from gradcheck.sweep.executors import ClusterRefused
    from gradcheck.sweep.runner import NothingSelected

    _nothing_empty(args)
    text = parse_jobs(args.jobs)
    jobs = usable_cpus() if text == "auto" else int(text)
    backends = args.backend or ["torch", "jax"]
    for name in backends:
        if name not in sweep_cli.BACKENDS:
            raise UsageError(f"--backend {name!r}: the sweep reads the inventories of "
                             f"{', '.join(sweep_cli.BACKENDS)}")
    _validate_backends(backends)
    for dtype in args.dtype or ():
        if dtype not in sweep_cli.DTYPES:
            raise UsageError(f"--dtype {dtype!r} is not a dtype the sweep checks; choose from "
                             + ", ".join(sweep_cli.DTYPES))
    report_dir = writable_dir(args.report_dir, "--report-dir")
    try:  # held for the whole sweep, so a second run cannot replace its stream
        lock = ReportDirLock(report_dir).acquire()
    except ReportDirInUse as exc:
        raise UsageError(str(exc)) from None
    try:
        with sweep_cli.stopped_by_signals():  # also while the report of a stopped sweep is written
            try:
                outcome = sweep_cli.run(backends, args.op or (), args.dtype, args.profile, jobs,
                                        report_dir, resume=args.resume, cluster=args.cluster)
            except sweep_cli.Stopped as exc:
                return _sweep_interrupted(report_dir, exc.signum)
            except NothingSelected as exc:
                raise UsageError(f"{exc}; see docs/sweep.md") from None
            except ClusterRefused as exc:
                raise UsageError(str(exc)) from None
        if outcome is None:
            raise UsageError("the selection (--backend/--op/--dtype) matches no op of the "
                             "inventory; see docs/sweep.md")
        files = write_report([outcome.stream], report_dir, title="gradcheck sweep",
                             passed_rows=False)
    finally:
        lock.release()
    for line in sweep_cli.summary(outcome, files.data):
        print(terminal_safe(line))
    summary_lines(files, print)
    return OK if files.data.passed else DISCREPANCIES


def _sweep_interrupted(report_dir: Path, signum: int) -> int:
    """After SIGINT/SIGTERM/SIGHUP stopped a sweep (its workers already killed): the report of what
    finished, from the stream and the workers' streams, which stay on disk for ``--resume``."""
    from gradcheck.plugin.session_report import summary_lines
    from gradcheck.report import write_report

    name = signal.Signals(signum).name
    print(f"gradcheck: interrupted by {name}: the sweep's workers were stopped", file=sys.stderr)
    try:
        files = write_report(sorted(report_dir.glob("results*.jsonl")), report_dir,
                             title="gradcheck sweep", passed_rows=False)
    except Exception as exc:  # say so; the results on disk are still there
        print(f"gradcheck: the report could not be written: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return INTERRUPTED[signal.Signals(signum)]
    summary_lines(files, print)
    print(f"gradcheck: the report of what finished is {files.html.resolve()}; the same "
          "command with --resume checks the ops that have no results", file=sys.stderr)
    return INTERRUPTED[signal.Signals(signum)]


def _cmd_report(args: argparse.Namespace) -> int:
    from gradcheck.plugin.session_report import summary_lines
    from gradcheck.plugin.shards import missing_shards
    from gradcheck.report import write_report
    from gradcheck.stream import read_streams
    from gradcheck.stream.reader import LINE

    out = writable_dir(args.output, "-o/--output")
    # every input that can be read is reported; each one that cannot is named once (below)
    data = read_streams(args.streams)
    whole = [p for p in data.problems if p.kind != LINE]  # inputs not read, unknown schemas
    lines = [p for p in data.problems if p.kind == LINE]
    for problem in whole:
        print(f"{'error' if problem in data.unread_inputs else 'warning'}: {problem}",
              file=sys.stderr)
    if not data.sources:  # nothing readable: keep whatever report is already in the folder
        print("gradcheck: no input could be read: no report written", file=sys.stderr)
        return USAGE
    files = write_report(data, out, title=args.title)
    for problem in lines[:20]:
        print(f"warning: skipped {problem}", file=sys.stderr)
    if len(lines) > 20:
        print(f"warning: ... and {len(lines) - 20} more (listed in the report)",
              file=sys.stderr)
    unfinished = [r for r in data.runs.values() if not r.ended]
    for r in unfinished:
        print(terminal_safe(f"warning: process {r.run_id} ({r.environment.get('role', '?')}, "
                            f"{r.source}) has no end record: it was killed, crashed or is still "
                            "running; its completed results are in the report"), file=sys.stderr)
    missing = missing_shards(data.sources)
    for message in missing:
        print(terminal_safe(f"error: {message}"), file=sys.stderr)
    summary_lines(files, print)
    if not data.checks and not data.tests:
        print("gradcheck: the streams hold no results", file=sys.stderr)
        return USAGE
    if data.unread_inputs:
        print(f"gradcheck: {len(data.unread_inputs)} input(s) could not be read; the report has "
              "the others", file=sys.stderr)
        return USAGE
    complete = not unfinished and not data.unknown_schema and not missing
    return OK if data.passed and complete else DISCREPANCIES


def _cmd_backends(args: argparse.Namespace) -> int:
    if not args.probe:  # package metadata only: no engine is imported (fast)
        return _list_backends(args)
    from gradcheck.stream.environment import describe_backend

    out = []
    for name in installed_backends():
        try:
            desc = describe_backend(get_backend(name))
        except Exception as exc:  # report it, do not crash the listing
            desc = {"name": name, "error": f"{type(exc).__name__}: {exc}"}
        desc["source"] = known_backends().get(name, "")
        out.append(desc)
    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return OK
    for d in out:
        for line in _backend_lines(d):
            print(terminal_safe(line))  # adapters name themselves: any text
    return OK


def _list_backends(args: argparse.Namespace) -> int:
    from gradcheck.backends.listing import list_backends

    listing = list_backends()
    if args.json:
        print(json.dumps([b.to_dict() for b in listing], indent=2))
        return OK
    for b in listing:
        version = b.version or "-"
        state = "installed" if b.installed else f"unavailable: {b.reason}"
        print(terminal_safe(f"{b.name:<11} {version:<14} {state}  [{b.source}]"))
        for line in _child_lines(b):
            print(terminal_safe(f"{'':<11} {line}"))
    print("(versions from package metadata; nothing imported: 'gradcheck backends --probe' "
          "imports each installed engine and lists its devices, dtypes and semantics)")
    return OK


def _child_lines(b: BackendListing) -> list[str]:
    """Under an engine outside Python: the one command that builds its child (where it is not
    built) and what that needs; the command that checks a user's own model, and its guide."""
    from gradcheck import _layout

    lines = []
    if b.build and not b.installed:
        root = _layout.checkout_root(Path(__file__).resolve().parent)
        where = f"in {root}" if root else "in a gradcheck source checkout"
        found = "found" if b.toolchain_found else "not found on PATH"
        lines.append(f"build: {b.build}  ({where}; needs {b.needs}: {found})")
    if b.own_model:
        lines.append(f"your own model: {b.own_model}  (see {b.guide})")
    return lines


def _backend_lines(d: dict) -> list[str]:
    if "error" in d:
        return [f"{d['name']}: unavailable ({d['error']})"]
    sem = d.get("semantics", {})
    lines = [f"{d['name']} {d['version']}  [{d['source']}]",
             f"  devices: {', '.join(map(str, d['devices']))}   dtypes: "
             f"{', '.join(map(str, d['dtypes']))}   forward mode: "
             f"{'yes' if d['supports_jvp'] else 'no'}   order 2: "
             f"{'yes' if d['supports_order2'] else 'no'}",
             f"  semantics: accumulation={sem.get('accumulation')}  stop_gradient="
             f"{sem.get('stop_gradient')}  forward_mode_respects_no_grad="
             f"{sem.get('forward_mode_respects_no_grad')}"]
    if sem.get("notes"):
        lines.append(f"  notes: {sem['notes']}")
    return lines


def _cmd_ops(args: argparse.Namespace) -> int:
    from gradcheck.ops import catalog, listing

    families = tuple(args.family) if args.family else None
    for f in families or ():
        if f not in catalog.FAMILIES:
            raise UsageError(f"no family {f!r}; choose from {', '.join(catalog.FAMILIES)}")
    rows = listing.catalog_rows(families)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
    elif args.markdown:
        print(listing.markdown(rows), end="")
    else:
        print(listing.text(rows))
    return OK


MODEL_EXIT = """\
exit codes:
  0    every check passed or was skipped with a reason (an inconclusive check
       is reported, not a finding)
  1    a finding: a check failed
  2    usage, or the model program could not be started, built or answered"""


def _cmd_model(args: argparse.Namespace) -> int:
    """``gradcheck model``: audit a user's own model over the model protocol
    (docs/engines/model-check.md)."""
    from gradcheck import stream
    from gradcheck.backends.model_peer import ModelPeer, claim_stdio
    from gradcheck.core.results import Status
    from gradcheck.model_audit.remote import DTYPES, STDIO_TEXT, audit_peer, audit_process
    from gradcheck.report import junit, write_report
    from gradcheck.stream import read_streams

    if bool(args.peer_stdio) == bool(args.command):
        raise UsageError("give exactly one of --command CMD (gradcheck starts the program) and "
                         "--peer-stdio (the program started gradcheck)")
    dtypes = DTYPES if args.dtype == "both" else (args.dtype,)
    report_dir = writable_dir(args.report_dir, "--report-dir")
    out = sys.stdout
    options = dict(dtypes=dtypes, params=args.param or (), exclude=args.exclude or (),
                   stop_gradient=args.stop or (), directions=args.directions,
                   per_tensor=args.per_tensor, step=not args.no_step, steps=args.steps,
                   seed=args.seed)
    path = report_dir / "results.jsonl"
    path.unlink(missing_ok=True)
    try:
        with stream.using(path, role="main"):
            if args.peer_stdio:
                reader, writer = claim_stdio()  # our own prints go to stderr from here on
                out = sys.stderr
                peer = ModelPeer.over_stdio(reader, writer,
                                            request_timeout=args.request_timeout)
                try:
                    report = audit_peer(peer, command_text=STDIO_TEXT, **options)
                finally:
                    peer.close()
            else:
                report = audit_process(args.command, request_timeout=args.request_timeout,
                                       **options)
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None
    files = write_report(read_streams([path]), report_dir, title="gradcheck model")
    if args.junit:
        target = Path(args.junit)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(junit.render(files.data))
        except OSError as exc:
            raise WriteFailed(target, exc) from exc
    for line in report.summary().splitlines():
        print(terminal_safe(line), file=out)
    print(f"report: {files.html}  junit: {args.junit or files.junit}", file=out)
    statuses = {r.status for r in report.results}
    if Status.FAILED in statuses:
        return DISCREPANCIES
    if Status.ERROR in statuses or not report.results:
        return USAGE
    return OK


def _parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="gradcheck", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=raw)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands")
    run = sub.add_parser(
        "run", help="run the standard suites and write the report", formatter_class=raw,
        description="Run the standard suites with pytest (in a fresh interpreter) and write\n"
                    "REPORT_DIR/results.jsonl, REPORT_DIR/index.html and REPORT_DIR/junit.xml.",
        epilog=EPILOG + "\n\nArguments after -- go to pytest, e.g.: gradcheck run -- -k vjp -x")
    run.add_argument("--backend", action="append",
                     help="backend name, 'package.module:Attr' or entry-point name (repeatable; "
                          "default: numpy, torch and jax where installed)")
    run.add_argument("--device", action="append",
                     help="device, e.g. cpu, cuda (repeatable; default: cpu and each backend's "
                          "GPU, skipped where absent)")
    run.add_argument("--dtype", action="append",
                     help="dtype, e.g. float32 (repeatable; default: float64 and float32)")
    run.add_argument("--op", action="append",
                     help="only catalog ops with this exact name, glob or substring "
                          "(repeatable; default: every op of the profile; see 'gradcheck ops')")
    run.add_argument("--profile", choices=("quick", "ci", "thorough"), default="ci",
                     help="suite size (default: ci)")
    run.add_argument("-j", "--jobs", metavar="N",
                     help="parallel workers with pytest-xdist: 1 to 4 x the CPUs, or 'auto' "
                          "(default: none, one process)")
    run.add_argument("--shard", metavar="I/N",
                     help="run only the I-th of N parts of the tests (default: all)")
    run.add_argument("--report-dir", default="reports",
                     help="directory for results.jsonl, index.html, junit.xml (default: reports)")
    run.add_argument("--suites", metavar="PATH",
                     help=f"suites directory or file (default: ${SUITES_ENV}, else the suites "
                          "shipped with gradcheck)")
    run.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS",
                     help="extra pytest arguments, after -- (default: none)")
    run.set_defaults(func=_cmd_run)
    sw = sub.add_parser(
        "sweep", help="check every differentiable op a backend exposes at generated edge points",
        formatter_class=raw,
        description="Sweep a backend's whole differentiable API (torch: OpInfo's op_db; jax: its\n"
                    "public namespaces) at edge points generated per op, triage what fails, and\n"
                    "write REPORT_DIR/results.jsonl, index.html and junit.xml (docs/sweep.md).",
        epilog=EPILOG)
    sw.add_argument("--backend", action="append",
                    help="torch, jax, autograd, mlx or tinygrad (repeatable; default: torch "
                         "and jax)")
    sw.add_argument("--op", action="append",
                    help="only ops whose qualified name matches this glob or contains this "
                         "text, e.g. 'torch.nn.functional.*' (repeatable; default: every op)")
    sw.add_argument("--dtype", action="append",
                    help="dtype, e.g. float16 (repeatable; default: the profile's, where the "
                         "op declares it)")
    sw.add_argument("--profile", choices=("quick", "default", "thorough"), default="default",
                    help="points, dtypes and orders per op (default: default)")
    sw.add_argument("-j", "--jobs", metavar="N", default="1",
                    help="worker processes: 1 to 4 x the CPUs, or 'auto' (default: 1)")
    sw.add_argument("--report-dir", default="reports/sweep",
                    help="directory for results.jsonl, index.html, junit.xml (default: "
                         "reports/sweep)")
    sw.add_argument("--resume", action="store_true",
                    help="continue a sweep that was stopped: keep REPORT_DIR's stream (and "
                         "its workers' streams) and check only the ops without results "
                         "(default: off, the stream is replaced)")
    sw.add_argument("--cluster", metavar="ADDRESS",
                    help="run the ops on a Ray cluster (the 'ray' extra): 'ray' for a local "
                         "one, 'ray://HOST:PORT' for a cluster's client address, 'ray:auto' on "
                         "one of its nodes; -j is then ignored (default: local processes)")
    sw.set_defaults(func=_cmd_sweep)
    rep = sub.add_parser(
        "report", help="build a report from result streams (merge shards)", formatter_class=raw,
        description="Build one report (index.html, junit.xml) from result streams: merge CI\n"
                    "shards, or rebuild the report of a killed run.", epilog=EPILOG)
    rep.add_argument("streams", nargs="+", metavar="STREAM",
                     help="*.jsonl files, or directories holding them")
    rep.add_argument("-o", "--output", metavar="DIR", default="reports",
                     help="output directory (default: reports)")
    rep.add_argument("--title", default="gradcheck report",
                     help="title of the HTML page (default: 'gradcheck report')")
    rep.set_defaults(func=_cmd_report)
    be = sub.add_parser("backends", help="known backends and versions (--probe: devices, "
                                         "semantics)",
                        description="List the known backends: installed or not and the version\n"
                                    "of the package providing each, from package metadata\n"
                                    "without importing any engine.  --probe imports each\n"
                                    "installed engine and lists its version, devices, dtypes,\n"
                                    "forward-mode and order-2 support, declared semantics.")
    be.add_argument("--json", action="store_true",
                    help="machine-readable output (default: text)")
    be.add_argument("--probe", action="store_true",
                    help="import each installed engine and describe its adapter (slow: "
                         "seconds per engine; default: metadata only)")
    be.set_defaults(func=_cmd_backends)
    ops = sub.add_parser("ops", help="the op catalog: families, dtypes, points, known issues",
                         description="List the op catalog: family, arity, dtypes, special\n"
                                     "points and known discrepancies per backend.")
    ops.add_argument("--family", action="append",
                     help="only this family (repeatable; default: every family)")
    fmt = ops.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="machine-readable output "
                                                         "(default: text)")
    fmt.add_argument("--markdown", action="store_true",
                     help="Markdown, as in docs/catalog.md (default: text)")
    ops.set_defaults(func=_cmd_ops)
    mo = sub.add_parser(
        "model", help="check a user's own model and training step (Candle, Gorgonia) over the "
                      "model protocol", formatter_class=raw, epilog=MODEL_EXIT,
        description="Start the user's program (--command; it links gradcheck-candle or\n"
                    "gorgoniacheck), or answer the program that started gradcheck\n"
                    "(--peer-stdio), and check its model: gradients vs finite differences\n"
                    "along seeded directions, gradient flow per tensor, names, float32\n"
                    "rounding, and the training step (docs/engines/model-check.md).")
    mo.add_argument("--command", help="the program, run through sh -c with "
                                      "GRADCHECK_PROTOCOL=model (default: none; this or "
                                      "--peer-stdio)")
    mo.add_argument("--peer-stdio", action="store_true",
                    help="speak the protocol on this process's stdin/stdout (used by the "
                         "libraries; the report goes to stderr; default: off)")
    mo.add_argument("--dtype", choices=("float64", "float32", "both"), default="both",
                    help="builds to check (default: both; FD runs in float64 when built)")
    mo.add_argument("--param", action="append", metavar="GLOB",
                    help="registry names to check (repeatable; default: all)")
    mo.add_argument("--exclude", action="append", metavar="GLOB",
                    help="registry names not to check (repeatable; default: none)")
    mo.add_argument("--stop", action="append", metavar="GLOB",
                    help="tensors cut on purpose: a gradient there is a leak (repeatable; "
                         "default: none; the program's own stopped globs always count)")
    mo.add_argument("--directions", type=int, default=4,
                    help="seeded directions over all selected tensors (default: 4)")
    mo.add_argument("--per-tensor", type=int, default=1,
                    help="seeded directions per tensor (default: 1)")
    mo.add_argument("--no-step", action="store_true",
                    help="skip the training-step checks (default: run them)")
    mo.add_argument("--steps", type=int, default=1,
                    help="steps per step experiment (default: 1)")
    mo.add_argument("--seed", type=int, default=0, help="seed of the directions (default: 0)")
    mo.add_argument("--report-dir", default="reports/model",
                    help="directory for results.jsonl, index.html, junit.xml (default: "
                         "reports/model)")
    mo.add_argument("--junit", metavar="PATH",
                    help="also write the JUnit XML to PATH (default: only REPORT_DIR/junit.xml)")
    mo.add_argument("--request-timeout", type=float, default=60.0,
                    help="seconds the program may take to answer one request (default: 60)")
    mo.set_defaults(func=_cmd_model)
    return parser


def _tolerant_output() -> None:
    """Any text prints: what the terminal's encoding cannot carry (a name from a stream in an
    ASCII locale) is written as a backslash escape instead of ending the command."""
    for out in (sys.stdout, sys.stderr):
        reconfigure = getattr(out, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or detached stream: nothing to protect
                pass


def main(argv: list[str] | None = None) -> int:
    _tolerant_output()
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    except BrokenPipeError:
        # the reader went away (`gradcheck ops | head -1`): stop quietly; stdout goes to
        # /dev/null so that the interpreter's final flush cannot complain either
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return BROKEN_PIPE
    return code


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help is 0, bad usage is 2
        return int(exc.code or 0)
    try:
        return int(args.func(args))
    except (UsageError, WriteFailed) as exc:  # WriteFailed: a full disk, named by its path
        print(f"gradcheck: error: {exc}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print("gradcheck: interrupted", file=sys.stderr)
        return INTERRUPTED[signal.SIGINT]
    except BrokenPipeError:
        raise
    except Exception as exc:  # last resort: say what happened, exit 2
        print(f"gradcheck: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
