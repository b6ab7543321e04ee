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

The search halves the set of elements that shows a kink (:func:`_search`): about ``60 k
log2(n)`` evaluations of ``f`` for ``k`` kinks among ``n`` elements (batched), only after an
inconclusive comparison, on inputs of at most :data:`MAX_ELEMENTS` elements (above that the
inconclusive results stand as they are).  Where it finds no kink, or a kink
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

#: the largest input (elements) searched for kinks (a halving search: ``log2(n)`` rounds)
MAX_ELEMENTS = 1 << 16
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
    """Input index -> the flat indices of its kink elements (only inputs that have some)."""
    found = []
    for j in prep.diff:
        if prep.args64[j].size > MAX_ELEMENTS:
            continue
        try:
            flat = _search(prep, j)
        except AdapterFailed:
            continue
        if flat:
            found.append((j, flat))
    return tuple(found)


def _search(prep: Prepared, j: int) -> tuple[int, ...]:
    """The elements of input ``j`` along whose coordinate the left and right derivatives of
    some floating output element disagree, found by halving: a direction that moves a set of
    elements (random weights, 0 elsewhere) shows a kink where the set holds a kink element
    (the random weights keep two kinks from cancelling, e.g. a tie of ``max`` moved along
    ``(1, 1)``); the sets that show one are halved, down to single elements.  About
    ``2 k log2(n)`` directions for ``k`` kinks among ``n`` elements, each ~30 evaluations,
    in one batched oracle call per halving."""
    x = prep.args64[j].ravel()
    f, y0, h0 = batch_fn(prep, j), f0(prep), fd.initial_step(x, np.ones(1))
    rng = np.random.default_rng(prep.cfg.seed)
    sets, kinks = [np.arange(x.size)], []
    while sets:
        D = np.zeros((len(sets), x.size))
        for d, s in enumerate(sets):
            D[d, s] = rng.choice((-1.0, 1.0), len(s)) * rng.uniform(0.5, 1.0, len(s))
        est = fd.directional_derivatives(f, x, D, h0=h0, f0=y0)
        flags = [bool(np.any(est.kink[d])) for d in range(len(sets))]
        shown = [s for s, k in zip(sets, flags, strict=True) if k]
        kinks += [int(s[0]) for s in shown if len(s) == 1]
        sets = [half for s in shown if len(s) > 1
                for half in (s[: len(s) // 2], s[len(s) // 2:])]
    return tuple(sorted(kinks))


def describe(prep: Prepared, found: tuple[tuple[int, tuple[int, ...]], ...]) -> str:
    """``3 kink elements left out (the one-sided derivatives disagree there): input 0[0],
    input 0[5], input 1[2, 1]`` (at most :data:`NAMED` named)."""
    names: list[str] = []
    size = 0
    for j, flat in found:
        shape = prep.args64[j].shape
        size += prep.args64[j].size
        names += [f"input {j}{list(int(i) for i in np.unravel_index(k, shape))}"
                  for k in flat]
    more = f" and {len(names) - NAMED} more" if len(names) > NAMED else ""
    return (f"{len(names)} kink element(s) of {size} left out (their left and right derivatives "
            f"disagree: not differentiable there), the rest decided: "
            f"{', '.join(names[:NAMED])}{more}")


def _noted(r: CheckResult, named: str) -> CheckResult:
    return replace(r, message=f"{r.message} [{named}]" if r.message else named)
