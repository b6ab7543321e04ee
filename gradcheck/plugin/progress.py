"""Progress of ``gradcheck run`` (its pytest run): per backend, the tests done of the total,
the tests failed so far and the time left, shown as :mod:`gradcheck.core.progress` decides (a
line rewritten in place on a terminal, a plain line at most once a minute in a CI log).

``--gradcheck-progress=auto|line|plain|ops|off`` turns it on (``gradcheck run`` passes
``auto``; a plain ``pytest`` run keeps pytest's own output: ``off``).  It runs where every
test's report arrives (the main process, or the xdist controller).  A test's backend is the
first field of its case id (``test_vjp[torch-cpu-float64-sin]``: ``torch``; a cross-backend
pair ``torch+jax``); a test without a case counts under ``other``.  While the terminal line
is shown, passed and skipped tests print no letter of pytest's own (the line counts them);
failures keep theirs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import pytest

from gradcheck.core.progress import MODES, Progress
from gradcheck.plugin.session_report import _outcome

CHOICES = ("auto", *MODES)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradcheck", "gradient checking")
    group.addoption("--gradcheck-progress", choices=CHOICES, default="off",
                    help="per-backend progress on stderr: auto (a line on a terminal, "
                         "occasional lines in CI), line, plain, ops (a line per test) or off "
                         "(default: off; `gradcheck run` passes auto)")


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None:
        return
    mode = config.getoption("gradcheck_progress", "off")
    if mode != "off" and not config.pluginmanager.has_plugin("gradcheck-progress"):
        config.pluginmanager.register(_Display(None if mode == "auto" else mode),
                                      "gradcheck-progress")


def backend_of(nodeid: str) -> str:
    """The backend of a test: the first field of its parameter id (``other`` without one)."""
    if not nodeid.endswith("]") or "[" not in nodeid:
        return "other"
    first = nodeid[nodeid.index("[") + 1:-1].split("-", 1)[0]
    return "other" if first in ("", "NOTSET") else first  # NOTSET: an empty parametrization


class _Display:
    def __init__(self, mode: str | None) -> None:
        self.progress = Progress("gradcheck run", "tests", mode=mode)
        self.planned = False

    def _plan(self, nodeids: Iterable[str]) -> None:
        if self.planned:
            return
        self.planned = True
        for backend, n in Counter(backend_of(i) for i in nodeids).items():
            self.progress.plan(backend, n)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:  # without xdist: the main process collected the tests to run
            self._plan(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._plan(ids)  # every worker collects the same tests: the first one counts

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport,
                                 config: pytest.Config) -> tuple[str, str, str] | None:
        if self.progress.mode != "line":
            return None
        if hasattr(report, "wasxfail"):
            if report.skipped:
                return "xfailed", "", "XFAIL"
            return ("xpassed", "", "XPASS") if report.passed and report.when == "call" else None
        if report.when == "call" and report.passed:
            return "passed", "", "PASSED"
        if report.skipped:
            return "skipped", "", "SKIPPED"
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcome = _outcome(report)
        if outcome is None:
            return
        self.progress.done(backend_of(report.nodeid), outcome in ("failed", "error"),
                           report.nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.progress.close()  # the line ends before pytest's summary
