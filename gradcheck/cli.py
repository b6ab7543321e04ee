"""``gradcheck`` command line.

* ``gradcheck run``: run the standard suites (pytest) on every installed backend and device,
  stream every result, write ``reports/index.html`` and ``reports/junit.xml``, print the path.
* ``gradcheck report STREAM... [-o DIR]``: build one report from result streams (files or
  directories of ``*.jsonl``): merge CI shards, or rebuild after a killed run.
* ``gradcheck backends``: installed backends, versions, devices and declared semantics.

Exit codes: 0 all passed, 1 discrepancies found (a check failed or errored, or a test failed),
2 usage or internal error (bad option, unknown backend, no suites, nothing readable).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from .backends.registry import get_backend, installed_backends, known_backends
from .errors import InvalidArgument

OK, DISCREPANCIES, USAGE = 0, 1, 2
SUITES_ENV = "GRADCHECK_SUITES"


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
            get_backend(spec)
        except InvalidArgument as exc:
            raise UsageError(str(exc)) from None


def pytest_args(args: argparse.Namespace, suites: Path) -> list[str]:
    """The pytest command line of ``gradcheck run``."""
    # -p loads the plugin wherever the suites live (a no-op when it is already registered)
    argv = [str(suites), "-q", "--tb=short", "-p", "no:cacheprovider", "-p",
            "gradcheck.pytest_plugin", f"--gradcheck-report-dir={args.report_dir}"]
    if args.profile:
        argv.append(f"--gradcheck-profile={args.profile}")
    for option, values in (("backend", args.backend), ("device", args.device),
                           ("dtype", args.dtype), ("op", args.op)):
        argv += [f"--gradcheck-{option}={v}" for v in values or ()]
    if args.shard:
        argv.append(f"--gradcheck-shard={args.shard}")
    if args.jobs:
        if importlib.util.find_spec("xdist") is None:
            raise UsageError("-j/--jobs needs pytest-xdist: pip install pytest-xdist")
        argv += ["-n", str(args.jobs)]
    return argv + list(args.pytest_args or ())


def _cmd_run(args: argparse.Namespace) -> int:
    _validate_backends(args.backend or [])
    argv = pytest_args(args, find_suites(args.suites))
    print("gradcheck run: pytest " + " ".join(argv), flush=True)
    # a fresh interpreter: pytest sees an unused process (assertion rewriting, plugin state)
    code = subprocess.call([sys.executable, "-m", "pytest", *argv])
    html = Path(args.report_dir) / "index.html"
    if code == 5:
        print("gradcheck: no tests were collected (check --backend/--device/--dtype/--op)",
              file=sys.stderr)
        return USAGE
    if html.exists():
        print(f"gradcheck: report written to {html.resolve()}")
    if code in (0, 1):
        return code
    print(f"gradcheck: pytest stopped with exit code {code}", file=sys.stderr)
    return USAGE


def _cmd_report(args: argparse.Namespace) -> int:
    from ._pytest_report import summary_lines
    from .report import write_report
    from .stream import expand_sources, read_streams

    sources = expand_sources(args.streams)
    missing = [str(p) for p in sources if not p.is_file()]
    if missing or not sources:
        raise UsageError("no such stream: " + ", ".join(missing or args.streams))
    data = read_streams(sources)
    files = write_report(data, args.output, title=args.title)
    for problem in data.problems[:20]:
        print(f"warning: skipped {problem}", file=sys.stderr)
    summary_lines(files, print)
    if not data.checks and not data.tests:
        print("gradcheck: the streams hold no results", file=sys.stderr)
        return USAGE
    return OK if data.passed else DISCREPANCIES


def _cmd_backends(args: argparse.Namespace) -> int:
    from ._environment import describe_backend

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
        if "error" in d:
            print(f"{d['name']}: unavailable ({d['error']})")
            continue
        sem = d.get("semantics", {})
        print(f"{d['name']} {d['version']}  [{d['source']}]")
        print(f"  devices: {', '.join(map(str, d['devices']))}   dtypes: {', '.join(d['dtypes'])}"
              f"   forward mode: {'yes' if d['supports_jvp'] else 'no'}   order 2: "
              f"{'yes' if d['supports_order2'] else 'no'}")
        print(f"  semantics: accumulation={sem.get('accumulation')}  stop_gradient="
              f"{sem.get('stop_gradient')}  forward_mode_respects_no_grad="
              f"{sem.get('forward_mode_respects_no_grad')}")
        if sem.get("notes"):
            print(f"  notes: {sem['notes']}")
    return OK


def _cmd_ops(args: argparse.Namespace) -> int:
    from .ops import catalog, listing

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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gradcheck", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the standard suites and write the report")
    run.add_argument("--backend", action="append",
                     help="backend name, 'package.module:Attr' or entry-point name "
                          "(repeatable; default: every installed backend)")
    run.add_argument("--device", action="append", help="device, e.g. cpu, cuda (repeatable)")
    run.add_argument("--dtype", action="append", help="dtype, e.g. float32 (repeatable)")
    run.add_argument("--op", action="append", help="only this catalog op (repeatable)")
    run.add_argument("--profile", choices=("quick", "ci", "thorough"), default="ci")
    run.add_argument("-j", "--jobs", help="parallel workers (pytest-xdist), a number or 'auto'")
    run.add_argument("--shard", metavar="I/N", help="run only shard I of N")
    run.add_argument("--report-dir", default="reports", help="default: reports")
    run.add_argument("--suites", help=f"suites directory (default: shipped; or ${SUITES_ENV})")
    run.add_argument("pytest_args", nargs="*", help="extra pytest arguments after --")
    run.set_defaults(func=_cmd_run)
    rep = sub.add_parser("report", help="build a report from result streams (merge shards)")
    rep.add_argument("streams", nargs="+", help="*.jsonl files or directories holding them")
    rep.add_argument("-o", "--output", default="reports", help="output directory")
    rep.add_argument("--title", default="gradcheck report")
    rep.set_defaults(func=_cmd_report)
    be = sub.add_parser("backends", help="installed backends, versions, devices, semantics")
    be.add_argument("--json", action="store_true", help="machine-readable output")
    be.set_defaults(func=_cmd_backends)
    ops = sub.add_parser("ops", help="the op catalog: families, dtypes, points, known issues")
    ops.add_argument("--family", action="append", help="only this family (repeatable)")
    fmt = ops.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="machine-readable output")
    fmt.add_argument("--markdown", action="store_true", help="docs/catalog.md")
    ops.set_defaults(func=_cmd_ops)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help is 0, bad usage is 2
        return int(exc.code or 0)
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"gradcheck: error: {exc}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print("gradcheck: interrupted", file=sys.stderr)
        return USAGE
    except Exception as exc:  # last resort: say what happened, exit 2
        print(f"gradcheck: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
