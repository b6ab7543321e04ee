"""The first-order checks: the screen where it applies (:mod:`gradcheck.numeric.screen`),
the full comparisons where it cannot pass."""

from __future__ import annotations

from gradcheck.numeric import screen, screen_split
from gradcheck.numeric.compare import Samples, compare_pair
from gradcheck.numeric.context import Finished, Prepared
from gradcheck.numeric.prepare import deterministic
from gradcheck.numeric.probes import draw, out_slices
from gradcheck.numeric.second_estimate import SecondEstimates
from gradcheck.numeric.stages import (
    ForwardSamples,
    alternatives,
    estimates,
    forward,
    no_forward_mode,
    reverse,
    rounding_samples,
)


def first_order_or_screen(prep: Prepared) -> None:
    """The screen first where it applies (with ``fast`` it is all that runs when it passes,
    in the default the comparisons of two AD values run beside it), the full checks where it
    cannot pass (their results then say why they ran, in ``details["screen"]``,
    ``details["fast_screen"]`` under ``fast``)."""
    if screen.applies(prep):
        reason = screen.screen(prep)
        if isinstance(reason, screen.Troubled):  # a few elements may spoil the one table
            reason = _split(prep, reason)
            # the screen may have stopped before its reverse path decided determinism
            if isinstance(reason, str) and not deterministic(prep, None):
                return
        if reason is None or isinstance(reason, Finished):  # passed, or f is nondeterministic
            return
    elif not deterministic(prep, None):  # (deferred only where the screen runs: a safeguard)
        return
    elif not prep.cfg.fast:
        first_order(prep)
        return
    else:
        reason = f"the screen covers float64 rule checks only (dtype {prep.dtype})"
    key = screen.label(prep)[0]
    first_order(prep.with_recorder(prep.recorder.with_details({key: f"escalated: {reason}"})))


def _split(prep: Prepared, why: str) -> str | Finished | None:
    """The screen again with its troubled output elements estimated apart
    (:mod:`.screen_split`): ``None`` where it passed, else why the full check runs."""
    split = screen_split.diagnose(prep, why)
    if isinstance(split, str):
        return f"{why}; not split: {split}"
    again = screen.screen(prep, split)
    if again is None or isinstance(again, Finished):
        return again
    return f"{why}; split ({split.count} element(s) at smaller steps): {again}"


def first_order(prep: Prepared) -> None:
    """The full first-order comparisons of every (output, input) pair."""
    pr = draw(prep)
    slices = out_slices(prep)
    fds, pr = estimates(prep, pr)
    modes = prep.cfg.modes
    rev = reverse(prep, pr) if "rev" in modes else {}
    fwd: ForwardSamples = {}
    if "fwd" in modes:
        if prep.backend.supports_jvp:
            fwd = forward(prep, pr)
        else:
            no_forward_mode(prep)
    alt = alternatives(prep, pr) if "rev" in modes else {}
    low = rounding_samples(prep, pr) if prep.dtype != "float64" and "rev" in modes else None
    samples = Samples(pr, fds, rev, fwd, alt, low, SecondEstimates(reverse=rev))
    for i in prep.float_outs:
        for j in prep.diff:
            compare_pair(prep, samples, i, j, slices[i])



