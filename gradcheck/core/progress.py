"""Progress people can see during a long run (``gradcheck sweep``, ``gradcheck run``): per
backend, the ops (or tests) done of the total, the failures so far and an estimate of the time
left.

Where it goes depends on who reads it (:func:`mode_for`):

- ``line``: stderr is a terminal and no CI system is named in the environment: one line,
  rewritten in place (``\\r``, cut to the terminal's width so it never wraps), ended by a
  newline when the run ends;
- ``plain``: a CI log (stderr not a terminal, or ``$CI``/``$GITHUB_ACTIONS``/... set): a plain
  line at most every :data:`PLAIN_EVERY_S` seconds, and one at the end;
- ``ops``: one plain line per op (what the sweep's workers printed before; for a log that must
  name the op in progress);
- ``off``: nothing.

``GRADCHECK_PROGRESS=line|plain|ops|off`` overrides the choice.  The time left is the rate of
each backend so far applied to what it has left: an estimate, shown once something finished.
It imports nothing of gradcheck.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TextIO

ENV_VAR = "GRADCHECK_PROGRESS"
MODES = ("line", "plain", "ops", "off")
#: environment variables set by common CI systems (any value but empty or "false" counts)
CI_VARS = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "CIRCLECI", "JENKINS_URL",
           "TF_BUILD", "TEAMCITY_VERSION", "TRAVIS")
#: seconds between two plain lines in a CI log
PLAIN_EVERY_S = 60.0


def in_ci(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment names a CI system (:data:`CI_VARS`)."""
    env = os.environ if environ is None else environ
    return any(env.get(v, "").strip().lower() not in ("", "0", "false") for v in CI_VARS)


def mode_for(out: TextIO | None = None, environ: Mapping[str, str] | None = None) -> str:
    """``line`` on a terminal outside CI, ``plain`` elsewhere; ``$GRADCHECK_PROGRESS`` (one of
    :data:`MODES`) wins.  ``out`` defaults to ``sys.stderr``."""
    env = os.environ if environ is None else environ
    wanted = env.get(ENV_VAR, "").strip().lower()
    if wanted in MODES:
        return wanted
    out = sys.stderr if out is None else out
    try:
        tty = out.isatty()
    except (AttributeError, ValueError, OSError):  # a closed or odd stream
        tty = False
    return "line" if tty and not in_ci(env) else "plain"


def duration(seconds: float) -> str:
    """``~40 s``, ``~12 min``, ``~1.5 h``: a coarse figure, as an estimate deserves."""
    if seconds < 90:
        return f"~{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"~{round(seconds / 60)} min"
    return f"~{seconds / 3600:.1f} h"


@dataclass
class Tally:
    """One backend's count: ``total`` planned, ``done`` finished, ``failed`` of those with a
    failure (not a known one), ``began`` when the first of them started (the clock's time)."""

    total: int
    done: int = 0
    failed: int = 0
    began: float | None = None

    def left_s(self, now: float) -> float | None:
        """Seconds left at this backend's rate so far (None before the first is done)."""
        if not self.done or self.began is None or self.done >= self.total:
            return None
        return (now - self.began) / self.done * (self.total - self.done)


class Progress:
    """The display of one run: ``what`` names it (``gradcheck sweep``), ``unit`` counts
    (``ops``, ``tests``), ``totals`` per backend (more with :meth:`plan`).  :meth:`done` after
    each op, :meth:`close` at the end (idempotent)."""

    def __init__(self, what: str, unit: str, totals: Mapping[str, int] | None = None, *,
                 out: TextIO | None = None, mode: str | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 environ: Mapping[str, str] | None = None) -> None:
        self.what, self.unit = what, unit
        self.out = sys.stderr if out is None else out
        self.mode = mode or mode_for(self.out, environ)
        self._columns = (environ or {}).get("COLUMNS", "")
        if self.mode not in MODES:
            raise ValueError(f"progress mode {self.mode!r}: choose from {', '.join(MODES)}")
        self.clock = clock
        self.tallies: dict[str, Tally] = {}
        self.began = clock()
        self._last_plain = self.began
        self._shown = False
        self._closed = False
        for backend, total in (totals or {}).items():
            self.plan(backend, total)

    def plan(self, backend: str, total: int) -> None:
        """Add ``total`` more to ``backend``'s count."""
        tally = self.tallies.setdefault(backend, Tally(0))
        tally.total += total

    def started(self, backend: str) -> None:
        """The first op of ``backend`` began now (else the display's start counts)."""
        tally = self.tallies.setdefault(backend, Tally(0))
        if tally.began is None:
            tally.began = self.clock()

    def done(self, backend: str, failed: bool = False, name: str = "") -> None:
        """One op (``name``) of ``backend`` finished, with a failure or not; shown."""
        tally = self.tallies.setdefault(backend, Tally(0))
        if tally.began is None:
            tally.began = self.began
        tally.done += 1
        tally.total = max(tally.total, tally.done)
        tally.failed += bool(failed)
        now = self.clock()
        if self.mode == "line":
            self._write("\r" + self._fit(self.line(now)) + "\x1b[K")
            self._shown = True
        elif self.mode == "ops":
            self._write(f"{self.what} {backend} [{tally.done}/{tally.total}] {name}"
                        f"{': failed' if failed else ''}\n")
        elif self.mode == "plain" and now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            self._write(self.line(now) + "\n")

    def line(self, now: float | None = None) -> str:
        """``gradcheck sweep: torch 12/300 ops, 2 failed, ~5 min left | jax ...``."""
        now = self.clock() if now is None else now
        parts = []
        for backend, t in self.tallies.items():
            left = t.left_s(now)
            when = ("done" if t.done >= t.total else
                    f"{duration(left)} left" if left is not None else "time left unknown")
            parts.append(f"{backend} {t.done}/{t.total} {self.unit}, {t.failed} failed, {when}")
        return f"{self.what}: " + (" | ".join(parts) if parts else f"no {self.unit}")

    def close(self) -> None:
        """End the display: the terminal's line gets its newline; a CI log its last line."""
        if self._closed:
            return
        self._closed = True
        if self.mode == "line" and self._shown:
            self._write("\r" + self._fit(self.line()) + "\x1b[K\n")
        elif self.mode == "plain" and self.tallies:
            self._write(self.line() + "\n")

    def _fit(self, text: str) -> str:
        # the environment's COLUMNS where given (as shutil reads it), else the terminal's
        width = (int(self._columns) if self._columns.isdigit() else
                 shutil.get_terminal_size((100, 24)).columns)
        return text if len(text) < width else text[: max(10, width - 4)] + "..."

    def _write(self, text: str) -> None:
        try:
            self.out.write(text)
            self.out.flush()
        except (OSError, ValueError):  # a closed terminal: the run goes on without a display
            self.mode = "off"
