"""The small exception tree of gradcheck.

``GradcheckError`` is the root.  ``InvalidArgument`` is raised at the public boundary for bad
arguments (it is also a ``ValueError``); ``GradientMismatch`` is raised by
:func:`gradcheck.assert_gradients` and carries the failing report (it is also an
``AssertionError`` so pytest shows it as a test failure, not an error).  ``NothingDecided`` (a
``GradientMismatch``) is raised by ``assert_gradients`` when no comparison reached a verdict:
nothing failed, but nothing was shown correct either.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class GradcheckError(Exception):
    """Base class of every exception gradcheck raises on purpose."""


class InvalidArgument(GradcheckError, ValueError):
    """An argument of a public function is invalid."""

    @classmethod
    def choice(cls, name: str, value: Any, choices: Iterable[Any]) -> InvalidArgument:
        """Build the standard message: the argument, its value and the valid choices."""
        listed = ", ".join(repr(c) for c in choices)
        return cls(f"{name}={value!r} is not valid; choose one of: {listed}")


class GradientMismatch(GradcheckError, AssertionError):
    """Raised by ``assert_gradients`` when a check fails; ``.report`` holds the evidence."""

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report

    @property
    def results(self) -> list[Any]:
        """The failing check results (empty if no report is attached)."""
        if self.report is None:
            return []
        return [r for r in self.report.results if not r.ok]


class NothingDecided(GradientMismatch):
    """Raised by ``assert_gradients`` when no comparison was decided: every result was
    inconclusive (the oracle could not decide: non-finite outputs, a kink) or skipped (not
    applicable: forward mode on a backend without it).  A passing run needs at least one
    passed comparison; the message lists each result's reason.  A subclass of
    :class:`GradientMismatch`, so ``pytest.raises(GradientMismatch)`` catches it too."""


class WriteFailed(GradcheckError):
    """A file of results or of the report could not be written (a full disk, an unwritable
    directory, a vanished mount).  The message names the path; ``.path`` holds it."""

    def __init__(self, path: Any, exc: BaseException) -> None:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        super().__init__(f"cannot write {str(path)!r}: {reason}")
        self.path = path
