"""The numeric pipeline's scaled-estimate step: where the first estimate and the second
(``2^-8`` smaller steps, :mod:`._second_estimate`) fail a rule or abstain, estimate once more
along directions scaled per element (``docs/error-model.md`` section 2).  The maths is the
oracle's grouped mode (:mod:`gradcheck.oracle.scaled`); this step owns its tuning values, runs
it on the pipeline's function and probes, and projects the AD side on the same directions.

The table's steps, ``2^-3 max(1, rms(x))``, are one size for every element.  Where the
elements span many decades (``1e-15`` next to ``1e-3``), a step that moves the large ones
crosses the small ones many times over, and a function that changes on the scale of an
element (``atan2``, ``1/x``, a determinant of tiny entries) looks flat or linear from there:
the table converges, stably, to the wrong slope with a small error estimate.  Measured:
``torch.atan2`` at the sweep's ``small`` point (elements 1e-16 .. 1e-1) had an estimate of
-1.08e7 with error 6.3e4 where the derivative is 1.48e15, and the second estimate could not
help (its steps, 3.8e-6 .. 4.9e-4, still cross the small elements).

Scaled directions move every element relative to its own size.  They are tried only where
the first estimate's largest step moves some element by more than its own scale
(:func:`gradcheck.oracle.scaled.crossed`); elsewhere they would be the first estimate again,
less sharp.

* The elements of an input are grouped by scale, :data:`GROUP_BINADES` binades of ``|x_i|``
  per group (an exact zero takes the smallest nonzero ``|x|``,
  :func:`gradcheck.oracle.scaled.element_scales`; a non-finite element is not moved).
* Per group and probe the direction is the probe's tangent on the group's elements times
  ``|x_i| / max_group |x|``, zero elsewhere; the group's own largest step moves no element by
  more than ``2^-3`` of its size (elements that do not converge are estimated again at
  ``2^-8`` smaller steps, once).
* A second table per group extends the ladder upward to the first estimate's largest step
  (:func:`gradcheck.oracle.scaled.ladder`), with the same smallest step and so the same
  rounded directions: an
  output whose own scale is larger (``atan2(y, x)`` at ``|y| << |x|``) or that the group
  does not move is resolved there.  Per group, the own table is used where it is decidable
  and sharp, else the extended one (by the estimates' quality, not by agreement with AD).
* Everything stays within :data:`POINTS` evaluations per input.
* The AD side is projected on the same directions: ``<J^T v, d>`` from the reverse samples
  already drawn, ``<v, J d>`` from one more forward call.

Groups, because one projection ``<J^T v, d>`` weights element ``i`` by ``|d_i|``: with ``d``
scaled by ``|x_i|`` across many decades, an error in the derivative w.r.t. a small element
would hide under the large elements' terms.  Within a group the weights differ by less than
``2^GROUP_BINADES``, so each element is judged against terms of its own size.  Where that
would make more than :data:`MAX_GROUPS` groups, the groups widen to the fewest binades that
make at most that many (:func:`gradcheck.oracle.scaled.width`; the note says how wide):
within one, the weights then differ by up to ``2^width``.

Like the second estimate, it can only vindicate the backend: a check is judged with it only
when every group's estimate is finite and sharp (:func:`._second_estimate.sharp`) and every
AD value agrees with it.  A wrong rule can be passed only by a sharp and wrong scaled
estimate.  Where it is sharp and disagrees, the failure stands.  Where it cannot judge and the
steps of the estimate the failure rests on (the second, where it was had, else the first)
cross an element's scale (:func:`gradcheck.oracle.scaled.crossing`), those steps estimate a
secant across the
element, and their error estimate does not bound its distance from the derivative: the
failure stands only where the estimate without the crossed elements (:func:`uncrossed`)
refutes the AD values too, else the check abstains (a kind that agrees on its own passes, a
non-finite one fails).  It costs nothing on checks that pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcheck.backends.guarded import AdapterFailed, AdapterFailure
from gradcheck.core.results import CheckKind
from gradcheck.numeric.context import Prepared
from gradcheck.numeric.probes import Probes, batch_fn, f0
from gradcheck.numeric.scalars import AdScalars, ad_scalars, reverse_scalars
from gradcheck.numeric.stages import ForwardSamples, ReverseSamples
from gradcheck.oracle import fd, scaled
from gradcheck.oracle.error_model import DEFAULT_MODEL

#: binades of |x| per group of elements (the weights of one group differ by less than 2^this)
GROUP_BINADES = DEFAULT_MODEL.scaled_group_binades
#: at most this many groups per input (each is ``probes`` more directions to estimate)
MAX_GROUPS = DEFAULT_MODEL.scaled_max_groups
#: the scaled estimate vindicates only where its error is within this fraction of the
#: compared terms on every probe (the first estimate's convergence criterion is 1e-8: a
#: group of small elements has small steps, and each output the group does not move adds
#: its rounding, eps |f| / h; measured: 1.3e-6 on torch.atan2 at the sweep's near_integer
#: point).  A rule off by more than about 10x this cannot agree with it
SHARP = DEFAULT_MODEL.sharp
#: levels the scaled table may add above the group's own (one halving each: 17 decades)
MAX_LADDER = DEFAULT_MODEL.scaled_max_ladder
#: at most (directions x levels^2 x outputs) of Richardson work per scaled estimate
LADDER_WORK = DEFAULT_MODEL.scaled_ladder_work
#: evaluations of ``f`` the scaled estimate of one input may take, about 15 times the first
#: estimate's (its groups' own tables first; the extended ladders get what is left, fewer
#: levels where they would take more): an op whose batch is a loop of single calls (OpInfo's
#: pinv) takes milliseconds per point
POINTS = DEFAULT_MODEL.scaled_points
#: the group's own largest step moves an element by at most this fraction of its size
_MOVE = DEFAULT_MODEL.scaled_move


@dataclass(frozen=True)
class Declined:
    """No scaled estimate of one input, and why."""

    reason: str


@dataclass(frozen=True)
class Scaled:
    """The scaled estimate of one input: the estimate along ``probes.u[j]`` (group-major:
    row ``g * P + p`` is group ``g``, probe ``p``, whose cotangent is probe ``p``'s), the
    probes that go with it, the number of groups, and the backend's JVPs along the same
    directions (``None`` where forward mode is not compared)."""

    estimate: fd.FDEstimate
    probes: Probes
    groups: int
    forward: list[dict[int, np.ndarray]] | AdapterFailure | None
    # the same rows, each group's ladder extended upward where it was (else its own rows)
    extended: fd.FDEstimate | None = None
    width: int = GROUP_BINADES  # binades per group (more where they would be too many)

    def rows(self, g: int) -> slice:
        P = len(self.estimate.value) // self.groups
        return slice(g * P, (g + 1) * P)

    def ad(self, prep: Prepared, rev: ReverseSamples, i: int, j: int, kinds: list[CheckKind]
           ) -> AdScalars | None:
        """The AD scalars of output ``i`` / input ``j`` along the scaled directions for each
        of ``kinds``, or ``None`` where a call they come from failed."""
        position = prep.diff.index(j)
        P = len(self.probes.v[i]) // self.groups
        out: AdScalars = {}
        for kind in kinds:
            if kind is CheckKind.VJP:
                rows = rev.get(i)
                if rows is None or isinstance(rows, AdapterFailure):
                    return None
                out[kind] = reverse_scalars([rows[q % P] for q in range(len(self.probes.v[i]))],
                                            self.probes, j, position)
            else:
                if self.forward is None:
                    return None
                fwd: ForwardSamples = {j: self.forward}
                got = ad_scalars(kind, {}, fwd, self.probes, i, j, position)
                if isinstance(got, AdapterFailure):
                    return None
                out[kind] = got
        return out


def uncrossed(prep: Prepared, pr: Probes, j: int, rests_on: fd.FDEstimate,
              crossed_mask: np.ndarray) -> Scaled | Declined:
    """The estimate along the directions of ``rests_on`` with the elements its steps cross
    (``crossed_mask``, :func:`gradcheck.oracle.scaled.crossing`) left out, at the same steps:
    an ordinary table, whose steps cross nothing, and the backend's AD along the same
    directions (one group).  Where a failure's steps crossed elements' scales, it says
    whether the disagreement lies in the elements they do not cross (the failure stands) or
    only in the crossed ones (nothing resolves those)."""
    D = np.where(crossed_mask, 0.0, rests_on.directions)
    if not np.all(np.any(D != 0, axis=1)):
        return Declined("every element a probe moves is crossed")
    # its convergence is never shown (it confirms or not; the verdict rests on another)
    est = _estimate_at(prep, j, D, rests_on.steps[:, 0], fd.DEFAULT_LEVELS, keep_table=False)
    if isinstance(est, str):
        return Declined(est)
    shape = prep.args64[j].shape
    u = {**pr.u, j: [d.reshape(shape) for d in est.directions]}
    return Scaled(est, Probes(dict(pr.v), u), 1, _forward_along(prep, j, u[j]))


def _forward_along(prep: Prepared, j: int, rows: list[np.ndarray]
                   ) -> list[dict[int, np.ndarray]] | AdapterFailure | None:
    """The backend's JVPs along ``rows`` (tangents of input ``j``, the others zero), or
    ``None`` where forward mode is not compared."""
    if "fwd" not in prep.cfg.modes or not prep.backend.supports_jvp:
        return None
    tans = [np.stack(rows) if k == j else np.zeros((len(rows),) + prep.args64[k].shape)
            for k in prep.diff]
    return prep.backend.jvp_rows(prep.fn, prep.args64, prep.diff, tans, prep.device,
                                 rows=len(rows), outputs=prep.outs64, picked=prep.float_outs)


def estimate(prep: Prepared, pr: Probes, j: int) -> Scaled | Declined:
    """The scaled estimate of input ``j`` (module docstring), or why there is none."""
    x = prep.args64[j]
    s, parts = scaled.groups(x, binades=GROUP_BINADES, max_groups=MAX_GROUPS)
    tops = scaled.first_steps(x, pr.u[j])
    if scaled.crossed(s, tops, pr.u[j]) is None:
        return Declined("the first estimate's largest steps move no element by more than its "
                        "own size")
    G = len(parts)
    D, h0 = scaled.directions(s, parts, pr.u[j], move=_MOVE)
    if not np.all(np.isfinite(h0)):
        return Declined("a probe's tangent is zero on a group of elements")
    P = len(pr.u[j])
    own, longer = [], []
    # what the extended ladders may spend, after every group's own table (and its retry)
    left = POINTS - G * 2 * P * (6 + 2 * fd.DEFAULT_LEVELS)
    for g in range(G):  # one table per group at its own steps, one with its ladder extended
        rows = slice(g * P, (g + 1) * P)
        part = _group_estimates(prep, j, D[rows], h0[rows], tops, max(left, 0))
        if isinstance(part, str):
            return Declined(part)
        own.append(part[0])
        longer.append(part[-1])
        left -= part[-1].evaluations if len(part) > 1 else 0
    est = fd.stack(own)
    extended = fd.stack(longer) if any(b is not a for a, b in zip(own, longer, strict=True)) \
        else None
    u = {**pr.u, j: [d.reshape(x.shape) for d in est.directions]}
    v = {i: [vs[q % P] for q in range(G * P)] for i, vs in pr.v.items()}
    return Scaled(est, Probes(v, u), G, _forward_along(prep, j, u[j]), extended,
                  scaled.widest(s, parts, binades=GROUP_BINADES))


def _group_estimates(prep: Prepared, j: int, D: np.ndarray, h0: np.ndarray,
                     tops: np.ndarray, points: int) -> list[fd.FDEstimate] | str:
    """One group's estimates along its ``P`` directions ``D``: at its own steps (largest
    ``h0``), and where the first estimate's steps are larger, with the ladder extended up to
    them (:func:`gradcheck.oracle.scaled.ladder`; the same smallest step, so the same rounded
    directions), or why
    there is none.  The own steps cannot cross an element's scale; the extended ladder
    resolves outputs whose own scale is larger (``atan2(y, x)`` at ``|y| << |x|``), and
    outputs the group does not move, at steps where their rounding is small.  ``points``:
    at most this many evaluations for the extended ladder (fewer levels where it would take
    more)."""
    levels = scaled.ladder(tops, h0, np.size(f0(prep)), max_ladder=MAX_LADDER,
                           ladder_work=LADDER_WORK)
    P = len(D)
    levels = min(levels, (points // (2 * P) - 6) // 2)  # with its retry, at most `points`
    out: list[fd.FDEstimate] = []
    for k in sorted({fd.DEFAULT_LEVELS, max(levels, fd.DEFAULT_LEVELS)}):
        est = _estimate_at(prep, j, D, h0 * 2.0 ** (k - fd.DEFAULT_LEVELS), k)
        if isinstance(est, str):
            return est
        if out and not np.array_equal(est.directions, out[0].directions):
            break  # rounded differently (its retries): not comparable with the same AD
        out.append(est)
    return out


def _estimate_at(prep: Prepared, j: int, D: np.ndarray, top: np.ndarray, levels: int,
                 keep_table: bool = True) -> fd.FDEstimate | str:
    x = prep.args64[j].ravel()
    # one retry at 2^-8 smaller steps for elements that did not converge; its halvings round
    # the directions to multiples of 2^8 more spacings, which may no longer move a subnormal
    # element: there, none
    for retries in (1, 0):
        try:
            est = fd.directional_derivatives_split(batch_fn(prep, j), x, D, h0=top,
                                                   levels=levels, retries=retries,
                                                   f0=f0(prep), keep_table=keep_table)
        except AdapterFailed as exc:
            return f"evaluating the function raised: {exc.failure.text}"
        # an element the rounded direction does not move would not be judged
        if not np.any((est.directions == 0) & (D != 0)):
            return est
    return "the steps do not move some elements (subnormal inputs)"
