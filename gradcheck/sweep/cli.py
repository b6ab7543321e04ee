"""What ``gradcheck sweep`` does between parsing its options and writing the report (the
argument parser is in :mod:`gradcheck.cli`): run the sweep, then summarise inventories and
findings for the terminal."""

from __future__ import annotations

import contextlib
import signal
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

from gradcheck.backends import children
from gradcheck.stream import StreamData
from gradcheck.sweep.executors import from_cluster
from gradcheck.sweep.runner import PLANS, SweepConfig, SweepOutcome, sweep
from gradcheck.sweep.triage import findings

#: the backends whose inventory the sweep can read
BACKENDS = ("torch", "jax", "autograd", "mlx", "tinygrad")
#: the dtypes the sweep can check (``--dtype``)
DTYPES = PLANS["thorough"].dtypes


class Stopped(Exception):
    """SIGINT, SIGTERM or SIGHUP arrived while the sweep ran (:func:`stopped_by_signals`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP (a closed terminal, a cancelled CI job; left ignored under
    ``nohup``) raise :class:`Stopped` inside this block (SIGTERM and SIGHUP would otherwise
    end the process at once): the sweep's ``finally`` stops its workers, whose streams and
    progress files stay for ``--resume``, and the caller writes the report of what finished.
    Only the first signal raises: the ones after it, while the workers are stopped and the
    report is written inside this block, are ignored, and so are those after the block."""
    stopped: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        if not stopped:
            stopped.append(signum)
            raise Stopped(signum)

    old = {sig: signal.signal(sig, stop) for sig in children.stop_signals()}
    try:
        yield
    finally:  # stopped: shutting down, where a second Ctrl-C must not change the outcome
        for sig, handler in old.items():
            signal.signal(sig, signal.SIG_IGN if stopped else handler)


def run(backends: Sequence[str], ops: Sequence[str], dtypes: Sequence[str] | None,
        profile: str, n_jobs: int, report_dir: Path, resume: bool = False,
        cluster: str | None = None) -> SweepOutcome:
    """Run the sweep (on the Ray cluster ``cluster`` names, else in local worker processes),
    showing each backend's progress on stderr; raises :class:`NothingSelected` (naming the
    selection) where it matches no op, or no selected op declares a ``--dtype`` asked for
    (nothing was written), and :class:`~gradcheck.sweep.executors.ClusterRefused` for a
    ``cluster`` it cannot use."""
    cfg = SweepConfig(tuple(backends), tuple(ops), tuple(dtypes) if dtypes else None, profile)
    executor = from_cluster(cluster) if cluster else None
    return sweep(cfg, report_dir, jobs=n_jobs, isolate=True, resume=resume, executor=executor,
                 show_progress=True)


def summary(outcome: SweepOutcome, data: StreamData) -> list[str]:
    """Lines for the terminal: ops swept and left out per backend, findings by class."""
    lines = [f"gradcheck sweep: {outcome.seconds:.1f} s"]
    for inv in outcome.inventories:
        lines.append(f"  {inv.backend}: {len(inv.ops)} ops swept, {len(inv.left_out)} names "
                     "left out (reasons in the report)")
    if outcome.resumed:
        lines.append(f"  resumed: {outcome.resumed} ops already had results and were not "
                     "checked again")
    found = findings(data.checks)
    by_class = Counter(f.cls for f in found)
    lines.append(f"  findings (de-duplicated by op, check family, class and symptom): "
                 f"{len(found)}" + (" (" + ", ".join(f"{n} {c}" for c, n in
                                                      by_class.most_common()) + ")"
                                    if found else ""))
    for f in found[:15]:
        lines.append(f"    {f.cls:13} {f.op} [{f.kind_family}, {f.symptom}] x{f.count} "
                     f"dtypes {','.join(f.dtypes)} points {','.join(f.points)}")
    if len(found) > 15:
        lines.append(f"    ... {len(found) - 15} more in the report's findings section")
    return lines
