"""Kinks among the inputs: decide on the elements away from them.

One exact non-differentiable point (``abs`` at an element that is exactly 0, ``relu`` at 0, a
tie of ``max``) makes the oracle's estimate along every probe direction abstain, since each
probe moves every element: the whole comparison is inconclusive, and a wrong derivative at
another element would go unnoticed.

Where a first-order comparison of :func:`gradcheck.check` is inconclusive, the oracle looks
for the kinks element by element: along each coordinate direction of each differentiable
input, the one-sided differences (the left and right derivatives of
:func:`gradcheck.oracle.fd.directional_derivatives`) disagree at a kink element and agree
elsewhere.  Where it finds some, the first-order comparisons run again with probe tangents
that are 0 at those elements: the oracle never steps across them, AD is projected on the
other elements, and the verdict (a pass, or a failure where a derivative is wrong) is about
those.  Every result of that run names the elements left out and how many
(``details["kinks"]``, ``details["kink_elements"]``, and its message).  Where that run
decides no more comparisons than the first (the rounding of a quantized ``f``, e.g. one
computed in float32, looks like kinks at some elements), the first run's results stand.

The search costs about ``30 n`` evaluations of ``f`` for ``n`` elements (batched), and runs
only after an inconclusive comparison, on inputs of at most :data:`MAX_ELEMENTS` elements
(above that the inconclusive results stand as they are).  Where it finds no kink, or a kink
at every element, the first run's results stand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from gradcheck.backends.guarded import AdapterFailed
from gradcheck.core.results import CheckResult, Status
from gradcheck.core.taxonomy import INFO
from gradcheck.numeric.context import Prepared, Recorder
from gradcheck.numeric.probes import batch_fn, f0
from gradcheck.oracle import fd

#: the largest input (elements) searched for kinks, one coordinate direction per element
MAX_ELEMENTS = 1024
#: elements named in a message (all of them are in ``details["kink_elements"]``)
NAMED = 8


def around_kinks(prep: Prepared, first_order: Callable[[Prepared], None]) -> None:
    """Run ``first_order`` on ``prep``; where a comparison with the oracle was inconclusive
    and the inputs have kink elements (and others), run it again without them (module
    docstring).  The results of one of the two runs are recorded, never both."""
    trial = Recorder(prep.recorder.identity, prep.recorder.details, prep.recorder.relabel)
    first_order(prep.with_recorder(trial))
    if not any(r.status is Status.INCONCLUSIVE and INFO[r.kind].judges_kinks
               for r in trial.results):
        prep.recorder.absorb(trial.results)
        return
    found = find(prep)
    if not found or all(len(flat) == prep.args64[j].size for j, flat in found):
        prep.recorder.absorb(trial.results)
        return
    named = describe(prep, found)
    details = {"kinks": named, "kink_elements": {f"input {j}": [
        [int(i) for i in np.unravel_index(k, prep.args64[j].shape)] for k in flat]
        for j, flat in found}}
    again = Recorder(prep.recorder.identity, {**prep.recorder.details, **details},
                     prep.recorder.relabel)
    first_order(replace(prep, excluded=found).with_recorder(again))
    if len(_decided(again.results)) <= len(_decided(trial.results)):  # no better: the noise
        prep.recorder.absorb(trial.results)  # of a quantized f looks like kinks, say nothing
        return
    prep.recorder.absorb(_noted(r, named) for r in again.results)


def _decided(results: tuple[CheckResult, ...]) -> list[CheckResult]:
    return [r for r in results if r.status in (Status.PASSED, Status.FAILED)]


def find(prep: Prepared) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Input index -> the flat indices of its kink elements (only inputs that have some):
    the coordinate directions along which the left and right derivatives of some floating
    output element disagree."""
    found = []
    for j in prep.diff:
        x = prep.args64[j].ravel()
        if x.size > MAX_ELEMENTS:
            continue
        try:
            est = fd.directional_derivatives(batch_fn(prep, j), x, np.eye(x.size),
                                             h0=fd.initial_step(x, np.ones(1)), f0=f0(prep))
        except AdapterFailed:
            continue
        flat = tuple(int(k) for k in np.flatnonzero(est.kink.any(axis=1)))
        if flat:
            found.append((j, flat))
    return tuple(found)


def describe(prep: Prepared, found: tuple[tuple[int, tuple[int, ...]], ...]) -> str:
    """``3 kink elements left out (the one-sided derivatives disagree there): input 0[0],
    input 0[5], input 1[2, 1]`` (at most :data:`NAMED` named)."""
    names, total, size = [], 0, 0
    for j, flat in found:
        shape = prep.args64[j].shape
        total += len(flat)
        size += prep.args64[j].size
        names += [f"input {j}{list(int(i) for i in np.unravel_index(k, shape))}"
                  for k in flat]
    more = f" and {len(names) - NAMED} more" if len(names) > NAMED else ""
    return (f"{total} kink element(s) of {size} left out (their left and right derivatives "
            f"disagree: not differentiable there), the rest decided: "
            f"{', '.join(names[:NAMED])}{more}")


def _noted(r: CheckResult, named: str) -> CheckResult:
    return replace(r, message=f"{r.message} [{named}]" if r.message else named)
