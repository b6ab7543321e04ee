"""The per-component resolution checks, one implementation for ``check`` and the sweep.

``check``'s projections ``<v, J u>`` are judged against the global size of the compared terms:
a component far below the others is invisible, and so is one whose input is far from the others
in magnitude.  These checks judge each output component against its *own* resolution:

* ``scaled`` (float64): central differences along a direction scaled per element
  (:func:`gradcheck.oracle.scaled.element_scales`, :func:`gradcheck.oracle.scaled.scaled_central`:
  each element moved relative to its own size, so 1e-300, the subnormals and 1e300 are
  resolved) give ``(J u)_k`` for every output component ``k``; reverse mode gives the same
  components from rows ``J^T e_k`` (one VJP of ones for a target that is elementwise in fact),
  forward mode from ``J u``.  Each component is compared relative to its own terms:
  ``|AD_k - FD_k|`` against ``FD_SAFETY * err_k + ROUNDING_GAMMA * (eps64 * sum_i |J_ki u_i|
  + n_k * tiny64)`` (``n_k`` the nonzero terms; ``tiny64`` the smallest normal number, what a
  flush-to-zero engine loses per rounding below it; a derivative entry below ``tiny64``, not
  representable, adds ``tiny64 |u_i|``), at order 1 on ``f`` and at order 2 on
  ``g(x) = J(x)^T w``; and forward against reverse per component with the rounding term alone
  (``fwd_rev``).  A component whose FD error is above ``RESOLUTION`` of its size abstains.
  Where the target is not elementwise in fact and :attr:`Subject.normwise` is set, each
  component carries the rounding of the largest one of its output (decompositions are
  accurate normwise, not per component); with :attr:`Subject.measured` (``check``), each
  component's rounding is measured instead (:func:`measured_rounding`: the components
  computed in float32 too), the normwise rounding staying where the values show the output
  is computed normwise, or nothing can be measured.
* ``ulp`` (dtypes below float64, targets elementwise in fact, orders 1 and 2, reverse and
  forward): each derivative element in the dtype against the same function's float64
  derivative correctly rounded to the dtype, in units of :func:`ulp_units`; failed above
  :data:`ULP_BOUND` (measured on correct ops: ``benchmarks/resolution_bounds.py``,
  docs/error-model.md 4b).  A non-finite derivative in the dtype where the float64 one,
  rounded, is finite is off by an infinite number of units.
* ``mpmath`` (float64, one input, targets elementwise in fact whose function is a scalar
  special function of :data:`gradcheck.oracle.extended.RULES`, orders 1 and 2): each element of
  ``f'`` (order 2: ``f''``) against mpmath's derivative at the precision it needs
  (:func:`gradcheck.oracle.extended.derivative`), allowed ``ROUNDING_GAMMA * (eps64 * (|d| +
  |x d'|) + tiny64)``; only elements where the function's own value is mpmath's
  (:func:`forward_matches`): a derivative far below the function's value, which no finite
  difference of it resolves (``expm1'(-100) = 3.7e-44`` beside ``expm1(-100) = -1``), is
  judged.

What is judged is a :class:`Subject` (a backend instance and a function of its differentiable
arguments); each check returns typed :class:`ComponentVerdict` records, which the sweep
(:mod:`gradcheck.sweep.resolution`) and ``check`` (:mod:`gradcheck.numeric.per_component`)
turn into their results.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.core.dtypes import numpy_dtype
from gradcheck.core.results import Status
from gradcheck.core.taxonomy import CheckKind
from gradcheck.oracle import extended, fd
from gradcheck.oracle.error_model import FD_SAFETY, RESOLUTION, ROUNDING_GAMMA
from gradcheck.oracle.scaled import element_scales, scaled_central

#: output components whose rows the scaled check compares (a seeded sample above this)
ROW_LIMIT = 32
#: inputs of at most this many elements have each element moved alone by :func:`diagonal`
ALONE_LIMIT = 32
#: the dtype in which :func:`measured_rounding` computes the compared components again: its
#: difference from float64, times ``eps64 / eps`` of it, is each component's float64 rounding,
#: measured (a rounding error is proportional to the unit roundoff of the arithmetic)
LADDER_DTYPE = "float32"
#: the absolute rounding of one term in float64's subnormal range: an engine that flushes
#: subnormal results to zero (XLA on CPU) loses up to the smallest normal number per rounding,
#: whatever the relative model says; counted like ROUNDING_GAMMA counts relative roundings
TINY64 = fd.TINY64
#: the allowed error of an elementwise derivative in a low-precision dtype, in the units of
#: :func:`ulp_units`, per (dtype, order), measured on correct ops
#: (``benchmarks/resolution_bounds.py``; docs/error-model.md section 4b: at order 1 about the
#: 99th percentile of the per-(op, point, path) maxima, at order 2 above 95-99% of them; the
#: ops above are named there: low-precision kernels with cancellation)
ULP_BOUND = {("float32", 1): 4.0, ("float16", 1): 4.0, ("bfloat16", 1): 4.0,
             ("float32", 2): 16.0, ("float16", 2): 16.0, ("bfloat16", 2): 16.0}

# (target, xs, ks, where, order) -> the components of ``where`` not to judge (the sweep's
# mpmath test of the differenced function's own value)
Inexact = Callable[["Target", Sequence[np.ndarray], np.ndarray, np.ndarray, int], np.ndarray]


@dataclass(frozen=True)
class Subject:
    """What the resolution checks judge: ``fn`` of its differentiable arguments on
    ``backend`` (an adapter instance: ``evaluate``, ``vjp``, ``vjp_batch``, ``jvp``,
    ``vjp_function``).

    ``elementwise``: whether it may be elementwise (then :func:`diagonal` decides whether it
    is in fact); ``normwise``: whether a component that is not elementwise carries the
    rounding of the largest component of its output; ``order2``: whether its second
    derivative exists (the ``ulp`` units at order 1 then use it).  ``ones_in_fact``: the
    order-2 cotangent ``w`` is ones only where the subject is elementwise in fact, seeded
    normal otherwise (``check``: ``J^T 1`` of a softmax is 0); without it, ones wherever
    ``elementwise`` is set (the sweep's, by the op's family)."""

    backend: Any
    fn: Callable[..., Any]
    elementwise: bool = True
    normwise: bool = False
    order2: bool = False
    device: str = "cpu"
    ones_in_fact: bool = False
    #: where the target is not elementwise in fact, each component's rounding measured
    #: (:func:`measured_rounding`: the same components computed in float32) in place of
    #: :attr:`normwise`'s largest component of the output, which stays where nothing could
    #: be measured
    measured: bool = False


@dataclass(frozen=True)
class ComponentVerdict:
    """One per-component comparison: failed where a judged component is off by more than its
    allowance (the worst one reported), passed where every judged one is within,
    inconclusive where none could be judged."""

    kind: CheckKind
    order: int
    oracle: str  # "scaled" or "ulp"
    status: Status
    what: str  # what was compared, and the allowance's form
    judged: int  # components judged
    total: int  # components compared
    component: int | None = None  # the worst one
    actual: float | None = None
    expected: float | None = None
    discrepancy: float | None = None
    relative: float | None = None
    allowed: float | None = None
    ratio: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def message(self, label: str) -> str:
        """``label`` names the oracle (``"sweep scaled check"``)."""
        if self.status is Status.INCONCLUSIVE:
            return f"{label} ({self.what}): no component resolved at this point"
        return (f"{label}: {self.what}; component {self.component} ({self.judged} of "
                f"{self.total} judged): got {self.actual:.17g}, expected {self.expected:.17g}, "
                f"|diff| {self.discrepancy:.3g} vs allowed {self.allowed:.3g} (ratio "
                f"{self.ratio:.3g})")


def flat(outs: Sequence[Any]) -> np.ndarray:
    """The outputs as one flat float64 vector, read only: one output is not copied (a view
    where it is contiguous float64; at n = 1e7 a copy is 80 MB, page-faulted afresh)."""
    parts = [np.asarray(o, dtype=np.float64).ravel() for o in outs]
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0)


@dataclass(frozen=True)
class Target:
    """The function judged: the subject (order 1) or ``g(x) = J(x)^T w`` (order 2), with its
    fixed trailing arguments (``w``), as the backend computes it."""

    backend: Any
    fn: Callable[..., Any]
    n: int  # differentiable leading arguments
    fixed: tuple[np.ndarray, ...]
    elementwise: bool  # one input, one output of its shape: the Jacobian is diagonal
    device: str = "cpu"

    def args(self, xs: Sequence[np.ndarray], dtype: str) -> list[np.ndarray]:
        t = numpy_dtype(dtype)
        return [np.asarray(a).astype(t) for a in (*xs, *self.fixed)]

    def evaluate(self, xs: Sequence[np.ndarray], dtype: str = "float64") -> list[np.ndarray]:
        return [np.asarray(o) for o in self.backend.evaluate(self.fn, self.args(xs, dtype),
                                                             self.device)]

    def rows(self, xs: Sequence[np.ndarray], ks: np.ndarray, dtype: str
             ) -> list[np.ndarray]:
        """``J^T e_k`` for the components ``ks`` (per input, stacked ``(len(ks), *shape)``);
        the diagonal (one VJP of ones) for an elementwise target."""
        args = self.args(xs, dtype)
        outs = self.evaluate(xs, dtype)
        t = numpy_dtype(dtype)
        diff = list(range(self.n))
        if self.elementwise:
            g = self.backend.vjp(self.fn, args, diff, [np.ones_like(outs[0], dtype=t)],
                                 self.device)
            return [np.asarray(g[0], dtype=np.float64).ravel()[ks][:, None]]
        sizes = np.cumsum([0, *[o.size for o in outs]])
        cots = [np.zeros((len(ks), *o.shape), dtype=t) for o in outs]
        views = [c.reshape(len(ks), -1) for c in cots]  # views (a 0-d row would be a copy)
        for b, k in enumerate(ks):
            j = int(np.searchsorted(sizes, k, side="right") - 1)
            views[j][b, int(k - sizes[j])] = 1
        gs = self.backend.vjp_batch(self.fn, args, diff, cots, self.device)
        return [np.asarray(g, dtype=np.float64).reshape(len(ks), -1) for g in gs]

    def jvp(self, xs: Sequence[np.ndarray], us: Sequence[np.ndarray], dtype: str) -> np.ndarray:
        t = numpy_dtype(dtype)
        return flat(self.backend.jvp(self.fn, self.args(xs, dtype), list(range(self.n)),
                                     [np.asarray(u).astype(t) for u in us], self.device))


def diagonal(backend: Any, fn: Callable[..., Any], arrays: Sequence[np.ndarray],
             outs: Sequence[Any], fixed: Sequence[np.ndarray] = (), device: str = "cpu"
             ) -> bool:
    """Whether ``fn`` of ``arrays`` and the ``fixed`` trailing arguments, with outputs
    ``outs``, is elementwise in fact, not only by its shapes (``softmax`` and ``cumsum`` keep
    the shape too): moving elements of an input moves no other output element.  Moved: each
    element alone (inputs of at most :data:`ALONE_LIMIT` elements) or else the first, the
    middle and the last, then three seeded random halves of the elements at once (a transpose
    fixes the first and the last; a softmax at large logits moves the other probabilities of a
    row only where they did not underflow, which a random half catches with probability 1/2
    each)."""
    if len(outs) != 1:
        return False
    base = np.asarray(outs[0], dtype=np.float64).ravel()
    rng = np.random.default_rng(0)
    for j, a in enumerate(arrays):
        a = np.asarray(a, dtype=np.float64)
        if a.shape != np.shape(outs[0]):
            return False
        n = a.size
        # every element alone where there are few (jax's cummax on 4 elements: the second
        # element is the running maximum of three outputs, and no random half split it from
        # them), else the first, the middle and the last, then random halves
        alone = range(n) if n <= ALONE_LIMIT else sorted({0, n // 2, n - 1})
        masks = [np.arange(n) == k for k in alone]
        masks += [rng.random(n) < 0.5 for _ in range(3) if n > 1]
        flat_a = a.ravel()
        # each element's moved value, x (1 + 2^-10), or 2^-10 at 0: computed once, taken
        # where a mask moves it (whole-array selections, not boolean gathers: 1e6 elements
        # and six masks)
        shifted = flat_a * (1 + 2.0 ** -10) + np.where(flat_a == 0, 2.0 ** -10, 0.0)
        for mask in masks:
            moved = np.where(mask, shifted, flat_a)
            xs = [np.asarray(b) for b in arrays]
            xs[j] = moved.reshape(a.shape)
            now = np.asarray(backend.evaluate(fn, [*xs, *fixed], device)[0],
                             dtype=np.float64).ravel()
            del moved, xs
            if not _unmoved(now, base, mask):
                return False
    return True


def _unmoved(now: np.ndarray, base: np.ndarray, mask: np.ndarray) -> bool:
    """Whether every output element outside ``mask`` is as it was (NaN where it was NaN)."""
    if now.shape != base.shape:
        return False
    same = now == base
    same |= mask
    if bool(np.all(same)):
        return True
    same |= np.isnan(now) & np.isnan(base)
    return bool(np.all(same))


def target(subject: Subject, arrays: Sequence[np.ndarray], order: int, seed: int) -> Target:
    """The subject at order 1; ``g(x) = J(x)^T w`` at order 2 (``w`` of ones where the subject
    may be elementwise, or is in fact with :attr:`Subject.ones_in_fact`, seeded normal
    otherwise)."""
    backend, device = subject.backend, subject.device
    n = len(arrays)
    outs = backend.evaluate(subject.fn, list(arrays), device)
    one = (subject.elementwise and n == 1 and len(outs) == 1
           and np.shape(outs[0]) == np.shape(arrays[0])
           and diagonal(backend, subject.fn, arrays, outs, device=device))
    if order == 1:
        return Target(backend, subject.fn, n, (), one, device)
    rng = np.random.default_rng(seed + 7)
    ones = one if subject.ones_in_fact else subject.elementwise
    ws = tuple(np.ones(np.shape(o)) if ones else rng.normal(size=np.shape(o)) for o in outs)
    g = backend.vjp_function(subject.fn, list(range(n)), n)
    # the derivative's own structure: at a degenerate point a function can look elementwise
    # while its derivative is not (cumprod at all zeros: each output moves only with its own
    # element, but its gradient's element j moves with element j + 1)
    one = one and diagonal(backend, g, arrays, backend.evaluate(g, [*arrays, *ws], device),
                           ws, device)
    return Target(backend, g, n, ws, one, device)


def kinds(order: int) -> tuple[CheckKind, CheckKind]:
    """The reverse and forward kinds of a comparison at ``order``."""
    return ((CheckKind.VJP, CheckKind.JVP) if order == 1
            else (CheckKind.VJP_OF_VJP, CheckKind.JVP_OF_VJP))


def verdict(kind: CheckKind, order: int, oracle: str, got: np.ndarray, want: np.ndarray,
            allowed: np.ndarray, judged: np.ndarray, what: str,
            extra: dict[str, Any] | None = None) -> ComponentVerdict:
    """One verdict from per-component comparisons (:class:`ComponentVerdict`)."""
    extra = dict(extra or {})
    with np.errstate(all="ignore"):
        finite = np.isfinite(got)
        diff = np.where(finite, np.abs(got - want), np.inf)
        ratio = np.where(judged, diff / np.where(allowed > 0, allowed, np.inf), 0.0)
        ratio = np.where(judged & (diff > 0) & ~(allowed > 0), np.inf, ratio)
        # a non-finite value where the expected one is finite is off by any allowance, an
        # infinite one included (inf / inf would be NaN, which no comparison fails)
        ratio = np.where(judged & ~finite & np.isfinite(want), np.inf, ratio)
    n_judged = int(judged.sum())
    if n_judged == 0:
        return ComponentVerdict(kind, order, oracle, Status.INCONCLUSIVE, what, 0, len(judged),
                                extra=extra)
    k = int(np.argmax(ratio))
    worst = float(ratio[k])
    status = Status.FAILED if worst > 1.0 else Status.PASSED
    rel = float(diff[k] / abs(want[k])) if want[k] else None
    return ComponentVerdict(kind, order, oracle, status, what, n_judged, len(judged), k,
                            float(got[k]), float(want[k]), float(diff[k]), rel,
                            float(allowed[k]), worst, extra)


def scaled_checks(subject: Subject, arrays: Sequence[np.ndarray], order: int, seed: int,
                  modes: Sequence[str], inexact: Inexact | None = None,
                  subnormal_scale: float | None = None, flat_abstains: bool = False
                  ) -> list[ComponentVerdict]:
    """The ``scaled`` checks in float64 (module docstring); ``inexact`` names the components
    of an elementwise target not to judge where reverse mode is off (the sweep's test of the
    differenced function's own value against mpmath).  ``subnormal_scale``: the scale of the
    direction at elements below the smallest normal number (default: their own magnitude,
    which no step resolves: those components abstain).  ``flat_abstains``: a component whose
    differences are all exactly zero while the derivative is not is not judged (the function
    as computed is flat there: a cancellation in its forward, ``log(1 + x)`` at 1e-20, hides
    the slope its derivative rule gives; without an independent value of the function, as the
    sweep's mpmath, no side can be taken)."""
    xs = [np.asarray(a, dtype=np.float64) for a in arrays]
    tgt = target(subject, xs, order, seed)
    rng = np.random.default_rng(seed)
    scales = element_scales(xs)
    if subnormal_scale is not None:
        scales = [np.where(np.abs(a) < TINY64, subnormal_scale, s)
                  for a, s in zip(xs, scales, strict=True)]
    us = [rng.normal(size=a.shape) * s for a, s in zip(xs, scales, strict=True)]
    est = scaled_central(lambda ys: flat(tgt.evaluate(ys)), xs, us, kinks=True)
    m = est.value.size
    ks = np.arange(m) if m <= ROW_LIMIT else np.sort(rng.choice(m, ROW_LIMIT, replace=False))
    rows = tgt.rows(xs, ks, "float64")
    uflat = [u.ravel() for u in us]
    if tgt.elementwise:
        d = rows[0][:, 0]
        rev = d * uflat[0][ks]
        # the terms of a non-finite derivative: those of the expected component (an inf
        # would allow anything)
        terms = np.where(np.isfinite(rev), np.abs(rev), np.abs(est.value[ks]))
        count = np.ones(len(ks))
        # a derivative below the smallest normal number is not representable in float64 (its
        # absolute rounding is up to TINY64, 0 where the engine flushes): rsqrt' at 3e303 is
        # -3e-456, AD gives 0, while (J u)_k = f' u_k ~ 2e-152 is; its rounding, TINY64 |u_k|
        tiny_d = np.where(np.abs(d) < TINY64, np.abs(uflat[0][ks]), 0.0)
        # nor is one above the largest: logit''(1e-209) = -1e418, while (J u)_k = f'' u_k,
        # 4e208, is; no float64 rule can give it, so the component is not judged
        with np.errstate(all="ignore"):
            huge_d = ~(np.abs(est.value[ks] / uflat[0][ks]) <= np.finfo(np.float64).max)
    else:
        rev = sum(r @ u for r, u in zip(rows, uflat, strict=True))
        terms = sum(np.abs(r) @ np.abs(u) for r, u in zip(rows, uflat, strict=True))
        terms = np.where(np.isfinite(terms), terms, np.abs(est.value[ks]))  # as above
        count = sum(np.count_nonzero(r, axis=1) for r in rows)
        # the same for the nonzero subnormal entries of a row (an exact zero may be structural)
        tiny_d = sum(((r != 0) & (np.abs(r) < TINY64)) @ np.abs(u)
                     for r, u in zip(rows, uflat, strict=True))
        # and a non-finite entry where the entry that alone gives the component, (J u)_k / u_i,
        # is beyond float64 (d/db a/b at b = 3e-300 is -3e598: -inf is its rounding)
        huge_d = np.zeros(len(ks), dtype=bool)
        with np.errstate(all="ignore"):
            for r, u in zip(rows, uflat, strict=True):
                bad = ~np.isfinite(r)
                if bad.any():
                    need = np.abs(est.value[ks])[:, None] / np.abs(u)[None, :]
                    huge_d |= np.any(bad & ~(need <= np.finfo(np.float64).max), axis=1)
    want, err = est.value[ks], est.error[ks]
    # relative rounding of the terms, plus the absolute rounding of each term in the subnormal
    # range (TINY64): a component of ~1e-308 is 0 in a flush-to-zero engine; and of each
    # derivative entry there, times its u
    underflow = ROUNDING_GAMMA * TINY64 * (np.maximum(count, 1) + tiny_d)
    measured = None
    if subject.measured and not tgt.elementwise:
        measured = measured_rounding(tgt, xs, ks, uflat, rev)
    if measured is not None:
        # each component's own rounding, measured: a decomposition's rounding of the largest
        # component shows in the small ones, a dropped component (0 in both dtypes) adds
        # nothing; where a component could not be measured, the normwise rounding stays
        spread, noise, unmeasured = measured
        scale = np.where(unmeasured, _normwise(tgt, xs, ks, terms), terms)
        rounding = ROUNDING_GAMMA * (fd.EPS64 * scale + spread) + underflow
        err = err + noise
    else:
        scale = (_normwise(tgt, xs, ks, terms)
                 if (subject.normwise or subject.measured) and not tgt.elementwise else terms)
        rounding = ROUNDING_GAMMA * fd.EPS64 * scale + underflow
    with np.errstate(all="ignore"):
        # resolved in its own terms: a step family that straddles a period, a kink or a pole
        # has no small error estimate; an exactly zero component resolves with err = 0
        # (every difference exactly zero: |J u| is below the noise err, judged with it); a
        # component whose terms and value lie within the underflow bound is not resolved
        judged = (np.isfinite(want) & ((err <= RESOLUTION * np.abs(want)) | (want == 0))
                  & ((terms > underflow) | (np.abs(want) > underflow)) & ~huge_d)
        if flat_abstains:
            judged &= ~((want == 0) & (rev != 0))
    allowed = FD_SAFETY * err + rounding
    off_mpmath = np.zeros(len(ks), dtype=bool)
    if tgt.elementwise and inexact is not None:
        with np.errstate(all="ignore"):
            off = judged & ~(np.abs(rev - want) <= allowed)
        off_mpmath = inexact(tgt, xs, ks, off, order)
        judged &= ~off_mpmath
    rev_kind, fwd_kind = kinds(order)
    what = (f"(J u)_k with u scaled per element (|x_i|), central differences at two step "
            f"families vs {'reverse' if order == 1 else 'reverse-over-reverse'} mode")
    if off_mpmath.any():
        what += (f" ({int(off_mpmath.sum())} components not judged: the differenced "
                 "function's own value there is off mpmath's)")
    if measured is not None:
        what += (f"; each component's rounding measured (the components computed in "
                 f"{LADDER_DTYPE} too)")
    # how many compared components had their rounding measured (:func:`measured_rounding`)
    extra = ({"rounding_measured": int((~measured[2]).sum())} if measured is not None
             else {})
    out = [verdict(rev_kind, order, "scaled", rev, want, allowed, judged, what, extra)]
    if "fwd" in modes:
        fwd = tgt.jvp(xs, us, "float64")[ks]
        out.append(verdict(fwd_kind, order, "scaled", fwd, want, allowed, judged,
                           what.replace("reverse", "forward", 1)))
        # not at a kink on the direction (a tie of min/max): there the two modes may take
        # different sides
        kink = est.kink[ks] if est.kink is not None else np.zeros(len(ks), dtype=bool)
        both = np.isfinite(rev) & (terms > underflow) & ~kink
        out.append(verdict(CheckKind.FWD_REV, order, "scaled", fwd, rev, 2 * rounding, both,
                           "forward vs reverse mode per output component (J u)_k, rounding "
                           "bound of its own terms and of underflow"))
    return out


def measured_rounding(tgt: Target, xs: Sequence[np.ndarray], ks: np.ndarray,
                      us: Sequence[np.ndarray], rev: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Per compared component ``k``, the float64 rounding of reverse mode's ``(J u)_k``
    (``rev``, at ``x``) and of the value ``f_k``, measured: both computed again in
    :data:`LADDER_DTYPE` at ``x`` rounded to it, their difference from float64 at ``x`` times
    ``eps64 / eps`` of the dtype (the move of ``x`` by one rounding of the dtype adds the
    component's true change over it, the same factor smaller: about eps64 times its own
    second-order terms); float64 at ``x`` itself, the values and components judged (no
    VJP batch more).  A computation accurate per component differs by about ``eps`` times
    the component's own terms, one accurate normwise (eigh, svd, qr, solve) by ``eps`` times
    the largest component of its output, whatever the component's own size; a rule that
    drops a component drops it in both dtypes (0 measured: it is still caught).

    The values say which model holds: where a value ``f_j`` of an output moves by more than
    ``ROUNDING_GAMMA eps64 |f_j|`` (its own rounding), measured so, that output is computed
    accurately only normwise, and a systematic error of its small components (one that does
    not scale with eps: torch's ``qr`` Q at a row of 1e-18, whose derivative components there
    are 0.4-6% apart by FD of the forward and by reverse mode, in float32 as in float64) is
    not measured: its components are marked unmeasured (they keep the normwise rounding).
    So is a component whose value is exactly 0: nothing rounded there to measure, while a
    decomposition can hold it at 0 by deflation where exact arithmetic moves it (eigh of two
    uncoupled blocks with entries of 1e-17: the derivative across the blocks is about 1e-18,
    FD and reverse mode both give 1e-273 or less, in float32 as in float64).

    Returns ``(spread, noise, unmeasured)``: the first is the measured rounding of
    ``(J u)_k``; the second, that excess of the value ``f_k`` divided by the smallest step of
    the scaled families times ``(r + 1) / (r - 1)`` (the extrapolation): noise each
    difference carries, which makes a component at the rounding noise of its forward
    abstain; the third marks the components not measured (non-finite in the dtype, or of an
    output computed normwise).  ``None`` where nothing can be measured: a nonzero input
    outside the dtype's normal range, or the function or its rule fails in the dtype or
    answers another dtype.  (A function that computes in float64 and rounds its result to
    the dtype measures as accurate per component: its rounding is not measured so.)"""
    t = np.finfo(numpy_dtype(LADDER_DTYPE))
    mags = np.concatenate([np.abs(np.asarray(a, dtype=np.float64)).ravel() for a in xs])
    mags = mags[mags > 0]
    if mags.size and not (mags.min() >= float(t.tiny) and mags.max() <= float(t.max)):
        return None
    low = [np.asarray(a, dtype=np.float64).astype(t.dtype).astype(np.float64) for a in xs]
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            r64 = np.asarray(rev, dtype=np.float64)
            r32 = sum(row @ u for row, u in zip(tgt.rows(low, ks, LADDER_DTYPE), us,
                                                strict=True))
            outs64, outs32 = tgt.evaluate(xs, "float64"), tgt.evaluate(low, LADDER_DTYPE)
            y64, y32 = flat(outs64), flat(outs32)
    except Exception:  # the function or its rule in the dtype: nothing measured
        return None
    # a function that answers another dtype (computes in float64 whatever it is given) has
    # no rounding of the dtype to measure
    if y32.shape != y64.shape or any(np.asarray(o).dtype != t.dtype for o in outs32):
        return None
    ratio = fd.EPS64 / float(t.eps)
    sizes = np.cumsum([0, *[np.size(o) for o in outs64]])
    with np.errstate(all="ignore"):
        moved_all = np.abs(y32 - y64) * ratio
        beyond = (~np.isfinite(moved_all)
                  | (moved_all > ROUNDING_GAMMA * fd.EPS64 * np.abs(y64)))
        normwise = np.array([bool(beyond[a:b].any()) for a, b in zip(sizes[:-1], sizes[1:],
                                                                  strict=True)])
        which = np.searchsorted(sizes, ks, side="right") - 1
        spread, moved = np.abs(r32 - r64) * ratio, moved_all[ks]
        unmeasured = (~(np.isfinite(spread) & np.isfinite(moved)) | normwise[which]
                      | (y64[ks] == 0))
        excess = np.where(beyond[ks] & np.isfinite(moved), moved, 0.0)
    per_step = max((base ** 2 + 1) / (base ** 2 - 1) * base ** max(exps)
                   for base, exps in fd.SCALED_FAMILIES)
    return np.where(unmeasured, 0.0, spread), excess * per_step, unmeasured


def _normwise(tgt: Target, xs: Sequence[np.ndarray], ks: np.ndarray, terms: np.ndarray
              ) -> np.ndarray:
    """Per component, the largest of ``terms`` over the components of the same output: a
    matrix decomposition (eig, qr, lu, pinv, ...) and its derivative are accurate normwise,
    not per component, so a derivative component that is exactly 0 (the imaginary part of a
    real eigenvalue) carries the rounding of the largest ones (torch's eigvals: 1e-16 in
    forward mode beside components of 1, where its own terms allow 1e-31)."""
    sizes = np.cumsum([0, *[o.size for o in tgt.evaluate(xs)]])
    which = np.searchsorted(sizes, ks, side="right") - 1
    finite = np.where(np.isfinite(terms), terms, 0.0)
    largest = np.array([finite[which == j].max(initial=0.0) for j in range(len(sizes) - 1)])
    return np.maximum(terms, largest[which])


def spacing(values: np.ndarray, dtype: str) -> np.ndarray:
    """The dtype's ulp at each value (its smallest subnormal at zero)."""
    t = numpy_dtype(dtype)
    v = np.abs(values).astype(t)
    sp = np.asarray(np.spacing(v), dtype=np.float64) if dtype != "bfloat16" else None
    if sp is None:  # ml_dtypes has no spacing: next representable above |v|
        sp = (np.nextafter(v.astype(np.float32), np.float32(np.inf)).astype(
            t).astype(np.float64) - v.astype(np.float64))
        sp = np.where(sp > 0, sp, np.abs(values) * 2.0 ** -7)
    return np.abs(sp)


def rounded(a: np.ndarray, dtype: str) -> np.ndarray:
    """``a`` correctly rounded to ``dtype``, as float64."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(a, dtype=np.float64).astype(numpy_dtype(dtype)).astype(np.float64)


def unit_derivatives(tgt: Target, xs: Sequence[np.ndarray], dtype: str) -> list[np.ndarray]:
    """The elementwise derivative per input: the VJP of a cotangent of ones."""
    outs = tgt.evaluate(xs, dtype)
    t = numpy_dtype(dtype)
    gs = tgt.backend.vjp(tgt.fn, tgt.args(xs, dtype), list(range(tgt.n)),
                         [np.ones(np.shape(o), dtype=t) for o in outs], tgt.device)
    return [np.asarray(g, dtype=np.float64) for g in gs]


def ulp_units(subject: Subject, xs: Sequence[np.ndarray], order: int, seed: int, dtype: str
              ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The float64 derivative per input (order 1: ``df/dx_j``, order 2: the diagonal of the
    second derivative with a cotangent of ones) and its *unit* in ``dtype`` per element:

        unit = ulp(d) + min_k |dd/dx_k| (ulp(x_k) + ulp(y) / |df/dx_k|)

    the spacing of the rounded derivative plus what one rounding of an input (``ulp(x_k)``) or
    of the output (``ulp(y)``, as the input change that moves ``y`` that much) moves it: a
    backward-stable rule computed in the dtype from its own ``x`` and ``y`` (``tanh``'s
    ``1 - y^2``) is off by a few units, not by a few ulps of ``d`` (at saturation
    ``1 - y^2`` rounds to 0).  ``dd/dx_k`` by :func:`gradcheck.oracle.scaled.scaled_central`
    of the float64 derivative along input ``k`` (its estimate plus its error), at order 1 of a
    one-input subject with a second derivative at least the float64 second derivative by
    AD."""
    _, ref, units = _ulp_units(subject, xs, order, seed, dtype)
    return ref, units


def _ulp_units(subject: Subject, xs: Sequence[np.ndarray], order: int, seed: int, dtype: str
               ) -> tuple[Target, list[np.ndarray], list[np.ndarray]]:
    """:func:`ulp_units`, with the target it differentiates (:func:`target` at ``order``)."""
    tgt = target(subject, xs, order, seed)
    first = tgt if order == 1 else target(subject, xs, 1, seed)
    ref = unit_derivatives(tgt, xs, "float64")
    df = ref if order == 1 else unit_derivatives(first, xs, "float64")
    y = np.asarray(subject.backend.evaluate(subject.fn, [np.asarray(a) for a in xs],
                                            subject.device)[0], dtype=np.float64)
    scales = element_scales(list(xs))
    uy = spacing(rounded(y, dtype), dtype)
    # the next derivative by AD too where the subject has one (FD of a float64 derivative
    # that is itself quantized, tanh' = 1 - y^2 at x = 17, sees a flat staircase)
    nxt = None
    if order == 1 and subject.order2 and len(xs) == 1:
        try:
            nxt = np.abs(unit_derivatives(target(subject, xs, 2, seed), xs, "float64")[0])
        except Exception:
            nxt = None
    units = []
    for j, d in enumerate(ref):
        best = np.full(d.shape, np.inf)
        for k in range(len(xs)):
            u = [s if i == k else np.zeros_like(s) for i, s in enumerate(scales)]

            def deriv(zs: list[np.ndarray], j: int = j) -> np.ndarray:
                return unit_derivatives(tgt, zs, "float64")[j].ravel()

            est = scaled_central(deriv, list(xs), u)
            with np.errstate(all="ignore"):
                dd = (np.abs(est.value) + est.error).reshape(d.shape) / scales[k]
                if nxt is not None and nxt.shape == dd.shape:
                    dd = np.fmax(dd, nxt)
                term = dd * (spacing(rounded(xs[k], dtype), dtype) + uy / np.abs(df[k]))
            best = np.fmin(best, np.where(np.isfinite(term), term, np.inf))
        units.append(spacing(rounded(d, dtype), dtype) + best)
    return tgt, ref, units


def ulp_checks(subject: Subject, arrays: Sequence[np.ndarray], dtype: str, order: int,
               seed: int, modes: Sequence[str]) -> list[ComponentVerdict]:
    """The ``ulp`` checks of a subject elementwise in fact in a dtype below float64 (module
    docstring): each element of the derivative in ``dtype`` (reverse mode; forward mode per
    input) against the float64 one rounded to ``dtype``, in the units of :func:`ulp_units`."""
    if not subject.elementwise or dtype == "float64" or (order == 2 and len(arrays) > 1):
        return []  # at order 2 of two inputs the cotangent of ones sums mixed partials
    xs = [rounded(a, dtype) for a in arrays]  # the float64 reference at the dtype's inputs
    backend = subject.backend
    if not diagonal(backend, subject.fn, xs,
                    backend.evaluate(subject.fn, list(xs), subject.device),
                    device=subject.device):
        return []
    tgt, ref, units = _ulp_units(subject, xs, order, seed, dtype)
    bound = ULP_BOUND[(dtype, order)]
    out: list[ComponentVerdict] = []
    paths: list[tuple[str, int | None]] = [("rev", None)]
    if "fwd" in modes:
        paths += [("fwd", j) for j in range(len(xs))]
    for path, j in paths:
        if path == "rev":
            low, want, unit = unit_derivatives(tgt, xs, dtype), ref, units
        else:
            assert j is not None
            us = [np.full(a.shape, 1.0 if i == j else 0.0) for i, a in enumerate(xs)]
            low, want, unit = [tgt.jvp(xs, us, dtype)], [ref[j]], [units[j]]
        if any(np.size(a) != np.size(b) for a, b in zip(want, low, strict=True)):
            continue
        got = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in low])
        w64 = np.concatenate([np.asarray(r, dtype=np.float64).ravel() for r in want])
        un = np.concatenate([u.ravel() for u in unit])
        near = rounded(w64, dtype)
        judged = np.isfinite(near) & np.isfinite(w64) & np.isfinite(un)
        with np.errstate(all="ignore"):
            errs = np.where(got == near, 0.0, np.abs(got - near) / un)
        label = "reverse" if path == "rev" else f"forward (input {j})"
        what = (f"{label} mode derivative per element in {dtype} vs the float64 derivative "
                f"rounded to {dtype}, at most {bound:g} units (ulp of the derivative plus "
                "one rounding of its inputs and output)")
        out.append(verdict(CheckKind.ROUNDING, order, "ulp", got, near, bound * un, judged,
                           what, {"max_ulps": float(np.max(np.where(judged, errs, 0.0)))
                                  if judged.any() else None, "path": path}))
    return out


#: ``check``'s mpmath check allows this fraction of the derivative besides its rounding: it
#: is there for what finite differences cannot resolve (``expm1'(-100) = 3.7e-44`` computed
#: as 0, wrong by 100%), not to fail a special function a few hundred ulps off
#: (``log_ndtr'(-30)`` 7e-14, ``sinc'`` near 0.5 5e-14), which the projected checks pass too
MPMATH_RELATIVE = 1e-8
#: elements the mpmath check evaluates per point (most need one attempt at 100 bits, a few
#: milliseconds; spence' at 2e-308 needs 1600 bits, about 5 s; all of them together get
#: extended.CALL_BUDGET_S)
MPMATH_LIMIT = 16


def forward_matches(forward: float, x: float, mp_value: float | None, slope: float) -> bool:
    """Whether the backend's forward at ``x`` equals mpmath's value within the rounding of a
    backward-stable float64 formula, ``ROUNDING_GAMMA (eps64 (|f| + |x f'|) + tiny64)``:
    then the mapping is the function itself, not one of the same name with other fixed
    arguments (OpInfo's ``softplus`` sample has ``beta``) or an approximation (gelu's tanh)."""
    if mp_value is None or not np.isfinite(forward):
        return False
    bound = ROUNDING_GAMMA * (fd.EPS64 * (abs(mp_value) + abs(x * slope)) + TINY64)
    return abs(forward - mp_value) <= bound


def elementwise_derivatives(subject: Subject, x: np.ndarray, order: int, seed: int
                            ) -> tuple[np.ndarray, np.ndarray] | None:
    """The subject's forward and its ``order``-th derivative per element (float64, reverse
    mode: the VJP of ones, at order 2 of the VJP of ones) where it has one input and is
    elementwise in fact; ``None`` where it is not."""
    x = np.asarray(x, dtype=np.float64)
    tgt = target(subject, [x], order, seed)
    if not tgt.elementwise:
        return None
    forward = np.asarray(subject.backend.evaluate(subject.fn, [x], subject.device)[0],
                         dtype=np.float64)
    return forward.ravel(), unit_derivatives(tgt, [x], "float64")[0].ravel()


def hidden(x: np.ndarray, forward: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The elements whose derivative is hidden from differences of the function: exactly 0,
    or its contribution over the element's own scale ``|g x|`` (``|g|`` at ``|x| < 1``) below
    ``2^-20`` of the value ``|f|`` (differences of ``f`` lose 20 bits or more to its rounding:
    ``expm1'(-100)``, ``tanh'(20)``), where the value is finite and nonzero."""
    with np.errstate(all="ignore"):
        scale = np.abs(g) * np.maximum(np.abs(x), 1.0)
        return (np.isfinite(forward) & (forward != 0) & np.isfinite(g)
                & ((g == 0) | (scale < 2.0 ** -20 * np.abs(forward))))


def mpmath_checks(subject: Subject, arrays: Sequence[np.ndarray], order: int, seed: int,
                  leaf: str, relative: float = 0.0, hidden_only: bool = False
                  ) -> list[ComponentVerdict]:
    """The ``mpmath`` verdict (module docstring) of a one-input subject elementwise in fact
    that is the scalar function ``leaf`` names in :data:`gradcheck.oracle.extended.RULES`;
    none where it has no rule, mpmath is not installed, or no element is that function.
    ``relative``: a fraction of ``|d|`` allowed besides the rounding (``check``'s
    :data:`MPMATH_RELATIVE`; the sweep's triage classifies smaller errors itself);
    ``hidden_only`` (``check``): only the elements whose derivative is hidden from differences
    of the function (:func:`hidden`), none where there is no such element."""
    rule = extended.RULES.get(leaf)
    if rule is None or len(arrays) != 1:
        return []
    try:
        import mpmath  # noqa: F401  (the extra that provides it may be absent)
    except ImportError:
        return []
    x = np.asarray(arrays[0], dtype=np.float64)
    values = elementwise_derivatives(subject, x, order, seed)
    if values is None:
        return []
    forward, g = values
    idx = np.arange(x.size)
    if hidden_only:
        idx = idx[hidden(x.ravel(), forward, g)]
        if idx.size == 0:
            return []
    idx = idx[:MPMATH_LIMIT]
    want, allowed, judged = (np.full(idx.size, np.nan), np.zeros(idx.size),
                             np.zeros(idx.size, bool))
    deadline = time.monotonic() + extended.CALL_BUDGET_S
    other = 0
    for b, i in enumerate(idx):
        xi = float(x.ravel()[i])
        # each at the precision it needs (extended.derivative); an element mpmath cannot
        # evaluate, or that the budget does not reach, is not judged
        d = extended.derivative(rule, xi, order, deadline=deadline)
        d2 = extended.derivative(rule, xi, order + 1, deadline=deadline) if d is not None \
            else None
        if d is None or (d2 is None and d.value != 0):
            continue
        slope = abs(xi * d2.value) if d2 is not None else 0.0
        d1 = d if order == 1 else extended.derivative(rule, xi, 1, deadline=deadline)
        if d1 is None or not forward_matches(float(forward[i]), xi, extended.value(rule, xi),
                                             d1.value):
            other += 1  # not the function mpmath computes: not judged
            continue
        want[b] = d.value
        # the absolute rounding below the smallest normal number (TINY64): expm1' at -1e4 is
        # exp(-1e4), 0 in float64, and no float64 rule can do better
        allowed[b] = (ROUNDING_GAMMA * (fd.EPS64 * (abs(d.value) + slope) + TINY64)
                      + relative * abs(d.value))
        judged[b] = abs(d.value) > ROUNDING_GAMMA * TINY64 or g[i] != 0
    if other and not judged.any():
        return []  # not mpmath's function at this point (its fixed arguments)
    what = (f"{'first' if order == 1 else 'second'} derivative per element vs mpmath's "
            f"{leaf} (its precision raised until its rounding is below 2^-60 of it), allowed "
            "ROUNDING_GAMMA (eps64 (|d| + |x d'|) + tiny64)"
            + (f" + {relative:g} |d|" if relative else ""))
    return [verdict(kinds(order)[0], order, "mpmath", g[idx], want, allowed, judged, what)]
