"""Known discrepancies found by the sweep: data, matched by backend, op glob, check kind, dtype
and point.  A failed sweep result matching an entry is shown as ``known`` (``details["known"]``
holds the reason, ``details["upstream"]`` the upstream link where one exists) and does not fail
the run; every entry was confirmed by the triage's independent evidence (docs/sweep.md).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownFinding:
    backend: str
    op: str  # a glob over qualified names
    reason: str
    kinds: tuple[str, ...] = ("*",)
    dtypes: tuple[str, ...] = ("*",)
    points: tuple[str, ...] = ("*",)
    upstream: str = ""


def _any(value: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(value, g) for g in globs)


KNOWN: tuple[KnownFinding, ...] = (
    KnownFinding(
        "torch", "torch.linalg.det",
        "the tape backward of det at a singular matrix of rank n-1 is wrong (a standalone "
        "3x3 with two equal rows: .backward() returns all zeros, torch.func.grad and central "
        "differences return the adjugate, +-0.25); torch.func.vjp is right (docs/sweep.md)",
        kinds=("vjp", "eager_func"), points=("ties",)),
)


def lookup(backend: str, op: str, kind: str, dtype: str, point: str) -> KnownFinding | None:
    """The first entry matching this result, or None."""
    for k in KNOWN:
        if (k.backend == backend and fnmatch.fnmatchcase(op, k.op) and _any(kind, k.kinds)
                and _any(dtype, k.dtypes) and _any(point, k.points)):
            return k
    return None
