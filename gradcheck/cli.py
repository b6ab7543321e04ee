"""``gradcheck`` command line: ``run`` (the main job), ``backends``.

Exit codes: 0 all passed, 1 discrepancies found, 2 usage or internal error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .backends.registry import get_backend, installed_backends


def _cmd_backends(_args: argparse.Namespace) -> int:
    for name in installed_backends():
        try:
            be = get_backend(name)
        except Exception as exc:  # report, do not crash the listing
            print(f"{name}: unavailable ({exc})")
            continue
        sem = be.semantics
        print(f"{name} {be.version()}  devices={','.join(be.devices())}  "
              f"dtypes={','.join(be.dtypes)}  accumulation={sem.accumulation.value}  "
              f"stop_gradient={sem.stop_gradient}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    import pytest

    suites = Path(__file__).resolve().parent.parent / "suites"
    target = str(suites) if suites.is_dir() else "suites"
    argv = [target, "-q", f"--gradcheck-profile={args.profile}",
            f"--gradcheck-report-dir={args.report_dir}"]
    for b in args.backend or ():
        argv.append(f"--gradcheck-backend={b}")
    code = int(pytest.main(argv))
    print(f"report: {Path(args.report_dir) / 'index.html'}")
    return 0 if code == 0 else (1 if code == 1 else 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gradcheck", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run the suites on every installed backend")
    p_run.add_argument("--backend", action="append", help="backend name or module:Attr")
    p_run.add_argument("--profile", default="ci", choices=("quick", "ci", "thorough"))
    p_run.add_argument("--report-dir", default="reports")
    p_run.set_defaults(func=_cmd_run)
    p_b = sub.add_parser("backends", help="list installed backends")
    p_b.set_defaults(func=_cmd_backends)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except Exception as exc:  # pragma: no cover - last-resort message
        print(f"gradcheck: internal error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
