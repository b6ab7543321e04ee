"""Entry points for adapter authors: run the conformance kit from your own repository.

Three ways, all equivalent (see ``docs/adapters.md``):

1. From Python::

       from gradcheck.testing import run_conformance
       report = run_conformance("mypkg.adapter:MyBackend")   # or an instance
       assert report.passed, format_conformance(report)

2. In your test suite, one line per backend (one pytest test per conformance section)::

       # tests/test_gradcheck_conformance.py
       from gradcheck.testing import conformance_test
       test_conformance = conformance_test("mypkg.adapter:MyBackend")

3. From a shell (exit code 0 conforming, 1 not, 2 cannot load)::

       python -m gradcheck.testing mypkg.adapter:MyBackend [--no-numeric] [--jsonl FILE]

An adapter registered through the ``gradcheck.backends`` entry point can be named by its entry
point name instead of the ``module:Attr`` path.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from gradcheck.core.results import Report, Status
from gradcheck.harness.conformance import (
    SECTIONS,
    Probe,
    iter_sections,
    run_conformance,
    section_of,
)

__all__ = ["Probe", "conformance_test", "format_conformance", "main", "run_conformance"]


def format_conformance(report: Report, *, only_problems: bool = True) -> str:
    """Readable account of a conformance report, grouped by section."""
    lines = [f"gradcheck conformance: {report.summary()}"]
    for section, results in iter_sections(report):
        shown = [r for r in results if not r.ok] if only_problems else results
        if not shown:
            continue
        lines.append(f"[{section}]")
        for r in shown:
            where = "" if r.device == "-" else f" ({r.device}/{r.dtype})"
            lines.append(f"  {r.status.value.upper():8} {r.name}{where}: {r.message}")
            if r.reproducer and not r.ok:
                lines.append(f"           reproduce: {r.reproducer}")
    return "\n".join(lines)


def conformance_test(backend: Any, **kwargs: Any) -> Callable[[str], None]:
    """A pytest test function parametrized over the conformance sections of ``backend``.

    Assign it to a ``test_*`` name in a test module.  The kit runs once (on the first section)
    and each section passes, fails with the list of its problems, or skips when nothing in it
    applies.  ``kwargs`` go to :func:`run_conformance`.
    """
    import pytest

    cache: dict[str, Report] = {}

    def _report() -> Report:
        if "r" not in cache:
            cache["r"] = run_conformance(backend, **kwargs)
        return cache["r"]

    @pytest.mark.parametrize("section", SECTIONS)
    def test_gradcheck_conformance(section: str) -> None:
        __tracebackhide__ = True
        results = [r for r in _report().results if section_of(r) == section]
        problems = [r for r in results if not r.ok]
        if problems:
            pytest.fail(format_conformance(Report(problems)), pytrace=False)
        if not results or all(r.status is Status.SKIPPED for r in results):
            reasons = sorted({r.message for r in results}) or ["nothing to check"]
            pytest.skip(f"{section}: " + "; ".join(reasons)[:300])

    return test_gradcheck_conformance


def main(argv: list[str] | None = None) -> int:
    """``python -m gradcheck.testing BACKEND``: print the report; exit 0, 1 or 2."""
    parser = argparse.ArgumentParser(prog="python -m gradcheck.testing",
                                     description="Run the gradcheck conformance kit.")
    parser.add_argument("backend", help="backend name or 'package.module:Attr'")
    parser.add_argument("--no-numeric", action="store_true",
                        help="contract checks only (no gradient checks on the probes)")
    parser.add_argument("--all", action="store_true", help="list passed checks too")
    parser.add_argument("--jsonl", help="also write every result as JSON lines to this file")
    args = parser.parse_args(argv)
    report = run_conformance(args.backend, numeric=not args.no_numeric)
    print(format_conformance(report, only_problems=not args.all))
    if args.jsonl:
        with open(args.jsonl, "w", encoding="utf-8") as fh:
            fh.write(report.to_jsonl())
    loaded = not any(r.name == "identity: load" for r in report.results)
    return 2 if not loaded else (0 if report.passed else 1)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
