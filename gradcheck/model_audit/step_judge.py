"""Judging what a user's training step did, from the ``model.step`` answers alone (pure).

* **applied**: what the optimizer received under a name vs ``s g``, ``s = min(1, max_norm /
  ||g||)`` (``||g||`` the global L2 norm over every registry tensor, float64 from the sums),
  on the sampled elements plus two whole-tensor numbers: the factor ``applied . g / (s g . g)``
  and the norm ``||applied||`` vs ``s ||g||``.  A mismatch is named by the first known cause
  whose prediction matches under the same error model: ``2`` (a second backward into an
  accumulating store, an extra ``RunAll``), ``(1 + s) / s`` (a two-pass clip on an accumulating
  engine), ``1 / s`` (the clip not applied where due), ``s`` (clipped twice), per-tensor
  factors (per-tensor clipping), zeros, a same-shape tensor's gradient (a swap), and after the
  first step of a run the previous step's gradient, alone or added (stale state).
* **effective**: the parameter change vs the declared optimizer applied to the observed
  applied gradient (:func:`gradcheck.model_audit.optimizers.update`, elementwise on the
  sampled coordinates, optimizer state threaded over the steps of a run).
* **repeatable**: the two calls of the ``repeat`` experiment.
* **grad_norm**: the logged norm vs the global L2 norm it claims to be.

Allowances: the error model's rounding bound in the build's dtype over each compared value's
sum of absolute terms (for a sampled element of a received gradient, the element's sizes plus
the tensor's RMS gradient: two backward passes round differently, and an element that cancels
keeps its terms' rounding).  Where the user's step computed a global norm in its dtype (the clip
scale, the logged norm) the terms grow by ``sqrt(N)`` (``N`` the registry's element count):
the probabilistic rounding bound of a sum of ``N`` terms (Higham and Mary, 2019: the error of
recursive summation stays below ``lambda sqrt(N) eps`` except with probability ``2
exp(-lambda^2 / 2)``; the error model's ``rounding_gamma`` plays ``lambda``).  Candle's CPU
sums are recursive (32 SIMD lanes of sequential sums in float32, one sequential sum in
float64; candle-core 0.11 ``cpu/avx.rs`` ``vec_sum``, ``cpu/kernels.rs``), so the worst-case
``N eps`` would be rigorous but would hide a factor 2 in a float32 model of a million
parameters; ``sqrt(N)`` keeps such factors visible.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.model_audit.optimizers import update
from gradcheck.model_audit.step_answers import StepRecord, TensorStep
from gradcheck.model_audit.steps import _diagnose
from gradcheck.oracle.error_model import ErrorModel
from gradcheck.semantics.context import Assessment, BugClass, assess

# the epsilon a clip may add to the norm it divides by (torch's clip_grad_norm_ adds 1e-6;
# a hand-written Candle or Gorgonia clip usually adds none): either is a correct clip
CLIP_EPSILONS = (0.0, 1e-6)


def growth(n: int) -> float:
    """How much a global norm's rounding grows over ``n`` summed squares (module doc)."""
    return math.sqrt(max(1, n))


def clip_scale(max_norm: float | None, norm: float, eps: float = 0.0) -> float:
    """``min(1, max_norm / (norm + eps))``; 1 without a clip or a gradient."""
    if max_norm is None or norm <= 0:
        return 1.0
    return min(1.0, max_norm / (norm + eps))


@dataclass(frozen=True)
class Verdict:
    """One judged comparison: its assessment, the bug it points at (when it fails) and the
    hint naming the cause."""

    assessment: Assessment
    bug: BugClass
    hint: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.assessment.ok


class _Elements:
    """Compared scalars under labels, as the three dicts :func:`assess` takes."""

    def __init__(self) -> None:
        self.actual: dict[str, Any] = {}
        self.expected: dict[str, Any] = {}
        self.mag: dict[str, Any] = {}

    def add(self, labels: Sequence[str], actual: Any, expected: Any, mag: Any) -> None:
        a, e, m = (np.broadcast_to(np.asarray(v, dtype=np.float64), np.shape(actual)).ravel()
                   for v in (actual, expected, mag))
        for k, x, y, z in zip(labels, a, e, m, strict=True):
            self.actual[k], self.expected[k], self.mag[k] = x, y, z

    def assess(self, dtype: str, model: ErrorModel) -> Assessment:
        return assess(self.actual, self.expected, self.mag, dtype, model=model)


# -- applied -------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Expect:
    """A prediction of one tensor's applied gradient: sampled values, and optionally the
    whole-tensor factor and norm it implies."""

    samples: np.ndarray
    factor: float | None
    norm: float | None
    grow: float = 1.0


def _applied_elements(t: TensorStep, exp: _Expect, s: float, grow: float) -> _Elements:
    el = _Elements()
    a = t.applied if t.applied is not None else np.zeros_like(t.grad)
    el.add(t.labels(), a, exp.samples,
           (np.abs(a) + np.abs(exp.samples) + _backward_terms(t, s, exp)) * grow * exp.grow)
    if exp.factor is not None and t.grad_sumsq > 0:
        f = t.applied_dot_grad / (s * t.grad_sumsq) if s > 0 else 0.0
        el.add([f"{t.name} (whole-tensor factor applied.g / (s g.g))"], [f], [exp.factor],
               [(abs(f) + abs(exp.factor)) * grow * exp.grow])
    if exp.norm is not None:
        n = math.sqrt(t.applied_sumsq)
        el.add([f"{t.name} (whole-tensor norm of the applied gradient)"], [n], [exp.norm],
               [(n + exp.norm) * grow * exp.grow])
    return el


def _backward_terms(t: TensorStep, s: float, exp: _Expect) -> float:
    """The size of the terms each element of a backward pass sums, for the allowance of the
    sampled elements: the received gradient comes from the user's own backward (``(s L)``'s in
    a two-pass clip, a second ``RunAll``), the expected one from the library's, and the two
    round differently in every op.  An element that cancels (``|g_j|`` far below its terms)
    keeps the rounding of its terms, which ``|g_j|`` alone does not show; the tensor's RMS
    gradient (scaled like the prediction) stands for them."""
    n = int(np.prod(t.shape, dtype=np.int64)) or 1
    return abs(s) * max(1.0, abs(exp.factor or 0.0)) * math.sqrt(max(t.grad_sumsq, 0.0) / n)


def _merge(parts: Sequence[_Elements]) -> _Elements:
    out = _Elements()
    for p in parts:
        out.actual.update(p.actual)
        out.expected.update(p.expected)
        out.mag.update(p.mag)
    return out


def _scaled(t: TensorStep, s: float, c: float) -> _Expect:
    return _Expect(c * s * t.grad, c, c * s * math.sqrt(t.grad_sumsq), max(1.0, c))


def _candidates(tensors: Sequence[TensorStep], rec: StepRecord, prev: StepRecord | None,
                s: float, max_norm: float | None, grow: float, dtype: str, model: ErrorModel
                ) -> list[tuple[BugClass, str, Callable[[TensorStep], _Expect | None]]]:
    """Known causes, each a prediction per tensor (None: not offered for that tensor)."""
    out: list[tuple[BugClass, str, Callable[[TensorStep], _Expect | None]]] = []

    def const(c: float) -> Callable[[TensorStep], _Expect | None]:
        return lambda t: _scaled(t, s, c)

    out.append((BugClass.DOUBLED_SECOND_BACKWARD,
                "factor 2: a second backward into an accumulating gradient store before the "
                "step (Gorgonia: an extra RunAll with dual values bound; Candle: two GradStores "
                "added), a two-pass clip on an accumulating engine at s = 1 ((1 + s) / s = 2), "
                "or the loss counted twice", const(2.0)))
    if s < 1.0:
        out.append((BugClass.DOUBLE_BACKWARD_CLIP,
                    f"factor (1 + s) / s = {(1 + s) / s:.6g}: a two-pass clip on an "
                    "accumulating engine (the backward of the loss rescaled by s was added to "
                    "the unreset first gradient: g + s g)", const((1 + s) / s)))
        out.append((BugClass.CLIP_IGNORES_THRESHOLD,
                    f"factor 1/s = {1 / s:.6g}: the clip was not applied where it was due (the "
                    "optimizer received the unclipped gradient)", const(1.0 / s)))
        out.append((BugClass.RECEIVED_GRADIENT_SCALED,
                    f"factor s = {s:.6g}: the gradient was clipped twice (scaled by s on top of "
                    "the clip)", const(s)))
    if max_norm is not None:
        for e in CLIP_EPSILONS:
            per = {t.name: clip_scale(max_norm, math.sqrt(t.grad_sumsq), e)
                   for t in rec.tensors.values()}
            out.append((BugClass.CLIP_CHANGES_DIRECTION,
                        "per-tensor factors min(1, max_norm / ||g_k||) / s: each tensor was "
                        "clipped by its own norm, not by the global one (the clipped gradient "
                        "changes direction)", _per_tensor(s, per)))
    out.append((BugClass.RECEIVED_GRADIENT_SCALED,
                "factor 0: the optimizer received zeros under this name (gradients reset "
                "before the step)", const(0.0)))

    def fits(t: TensorStep, x: _Expect) -> bool:
        return _applied_elements(t, x, s, grow).assess(dtype, model).ok

    def swapped(t: TensorStep) -> _Expect | None:
        own = _scaled(t, s, 1.0)
        if fits(t, own):
            return own
        for o in rec.tensors.values():
            if o.name != t.name and o.shape == t.shape and np.array_equal(o.index, t.index):
                x = _Expect(s * o.grad, None, s * math.sqrt(o.grad_sumsq))
                if fits(t, x):
                    return x
        return None

    out.append((BugClass.WRONG_NAME,
                "the optimizer received, under this name, the gradient of a same-shape tensor "
                "(gradients matched to parameters by position or by a wrong name)", swapped))
    if prev is not None:
        def stale_plus(t: TensorStep) -> _Expect | None:
            p = prev.tensors[t.name]
            return _Expect(s * (t.grad + p.grad), None, None, 2.0)

        def stale(t: TensorStep) -> _Expect | None:
            p = prev.tensors[t.name]
            return _Expect(s * p.grad, None, None)

        out.append((BugClass.STALE_STATE,
                    "stale + fresh: the stored gradients (Gorgonia dual values, a GradStore "
                    "kept across steps) were not zeroed after the previous step, so this step "
                    "received the previous gradient plus the fresh one", stale_plus))
        out.append((BugClass.STALE_STATE,
                    "the previous step's gradient: the step applied a gradient computed at the "
                    "previous parameters (a stored gradient that was never recomputed)", stale))
    return out


def _per_tensor(s: float, per: Mapping[str, float]) -> Callable[[TensorStep], _Expect | None]:
    return lambda t: _scaled(t, s, per[t.name] / s)


def clip_scales(rec: StepRecord, max_norm: float | None) -> list[float]:
    """The clip scales a correct clip may have used: ``max_norm / (||g|| + eps)`` for each of
    :data:`CLIP_EPSILONS`, and the scale fitted from the sums (``sum applied.g / sum g.g``)
    where it lies between those."""
    G = rec.grad_norm
    if max_norm is None or G <= max_norm:
        return [1.0]
    out = [clip_scale(max_norm, G, e) for e in CLIP_EPSILONS]
    seen = [t for t in rec.tensors.values() if t.applied_present]
    den = sum(t.grad_sumsq for t in seen)
    if den > 0:
        f = sum(t.applied_dot_grad for t in seen) / den
        if min(out) < f < max(out):
            out.append(f)
    return out


def judge_applied(tensors: Sequence[TensorStep], rec: StepRecord, prev: StepRecord | None, *,
                  max_norm: float | None, n_elements: int, dtype: str,
                  model: ErrorModel) -> Verdict:
    """What the optimizer received under each of ``tensors`` (one call of the step) vs the
    clipped fresh gradient; tensors absent from the optimizer's input are judged by the
    caller."""
    G = rec.grad_norm
    grow = growth(n_elements) if max_norm is not None else 1.0
    scales = clip_scales(rec, max_norm)
    best: tuple[Assessment, float] | None = None
    for s in scales:
        a = _merge([_applied_elements(t, _scaled(t, s, 1.0), s, grow)
                    for t in tensors]).assess(dtype, model)
        if best is None or a.ratio < best[0].ratio:
            best = (a, s)
    assert best is not None
    a, s = best
    details: dict[str, Any] = {
        "s": s, "global_grad_norm": G, "max_norm": max_norm,
        "factors": {t.name: (t.applied_dot_grad / (s * t.grad_sumsq)
                             if t.grad_sumsq > 0 and s > 0 else None) for t in tensors},
        "residuals": {t.name: _residual(t, s) for t in tensors}}
    if a.ok:
        return Verdict(a, BugClass.RECEIVED_GRADIENT_SCALED, details=details)
    lists = [(sc, _candidates(tensors, rec, prev, sc, max_norm, grow, dtype, model))
             for sc in scales]
    for i in range(len(lists[0][1])):
        for sc, cands in lists:
            bug, hint, predict = cands[i]
            parts = []
            for t in tensors:  # a cause not offered for one tensor is not the cause
                x = predict(t)
                if x is None:
                    break
                parts.append(_applied_elements(t, x, sc, grow))
            if len(parts) == len(tensors) and _merge(parts).assess(dtype, model).ok:
                return Verdict(a, bug, "; " + hint, details=details)
    f = [v for v in details["factors"].values() if v is not None]
    hint = (f"; whole-tensor factor {f[0]:.6g}, relative residual "
            f"{next(iter(details['residuals'].values())):.3g} (no known cause matches)"
            if len(f) == 1 else "; no known cause matches")
    return Verdict(a, BugClass.RECEIVED_GRADIENT_SCALED, hint, details=details)


def _residual(t: TensorStep, s: float) -> float | None:
    """``||applied - s g|| / (s ||g||)`` from the three sums (float64; resolves about
    ``sqrt(eps)``: the elementwise samples are the precise test)."""
    if not t.applied_present or t.grad_sumsq <= 0 or s <= 0:
        return None
    r2 = t.applied_sumsq - 2.0 * s * t.applied_dot_grad + s * s * t.grad_sumsq
    return math.sqrt(max(0.0, r2)) / (s * math.sqrt(t.grad_sumsq))


# -- effective -----------------------------------------------------------------------------

def judge_effective(steps: Sequence[StepRecord], name: str, h: Mapping[str, Any], dtype: str,
                    model: ErrorModel) -> tuple[Verdict, int]:
    """The parameter change of ``name`` at each step of a run vs the declared rule ``h``
    applied to what the optimizer received (state threaded on the sampled coordinates, from
    a fresh optimizer); returns the verdict of the first failing step (else the last) and its
    0-based step."""
    st: dict = {}
    m_abs: np.ndarray | Any = 0.0
    verdict: Verdict | None = None
    for i, rec in enumerate(steps):
        t = rec.tensors[name]
        if t.applied is None:
            pred, mag, new_st = t.theta, np.abs(t.theta), st
        else:
            pred, new_st, mag = update(h, t.theta, t.applied, st)
            if h["kind"] == "adam":
                m_abs, extra = _moment_terms(h, t.applied, m_abs, new_st)
                mag = mag + extra
        el = _Elements()
        el.add(t.labels(), t.delta, pred - t.theta, mag)
        a = el.assess(dtype, model)
        verdict = Verdict(a, BugClass.STEP_MISMATCH)
        if not a.ok:
            return Verdict(a, *_name_effective(t, h, st, i, pred, dtype, model)), i
        st = new_st
    assert verdict is not None
    return verdict, len(steps) - 1


def _moment_terms(h: Mapping[str, Any], g: np.ndarray, m_abs: Any, st: Mapping[str, Any]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Adam's first moment sums gradients of either sign, so its rounding scales with the
    sum of their magnitudes, not with ``|m|``: the update's terms through that sum,
    ``lr / (1 - beta1^t) x sum|terms of m| / (sqrt(v_hat) + eps)``."""
    b1, b2 = h["betas"]
    t = st["step"]
    m_abs = b1 * m_abs + (1.0 - b1) * np.abs(g)
    denom = np.sqrt(st["exp_avg_sq"]) / np.sqrt(1.0 - b2 ** t) + h["eps"]
    return m_abs, 2.0 * h["lr"] / (1.0 - b1 ** t) * m_abs / denom


def _name_effective(t: TensorStep, h: Mapping[str, Any], st: dict, i: int, pred: np.ndarray,
                    dtype: str, model: ErrorModel) -> tuple[BugClass, str]:
    a = t.applied if t.applied is not None else np.zeros_like(t.theta)
    tries: list[tuple[BugClass, str, np.ndarray, np.ndarray]] = []
    p1, st1, m1 = update(h, t.theta, a, st)
    p2, _, m2 = update(h, p1, a, st1)
    tries.append((BugClass.TWO_UPDATES, "two optimizer updates with one received gradient "
                  "(optimizer.step / solver.Step called twice, or the update applied twice)",
                  p2, m1 + m2))
    if i > 0 and h["kind"] == "adam":
        p0, _, m0 = update(h, t.theta, a, {})
        tries.append((BugClass.OPTIMIZER_STATE_LOST, f"step {i + 1} moved as a first step "
                      "from a fresh optimizer (the optimizer, or its moments, rebuilt every "
                      "step)", p0, m0))
    for bug, hint, p, m in tries:
        el = _Elements()
        el.add(t.labels(), t.delta, p - t.theta, m)
        if el.assess(dtype, model).ok:
            return bug, "; " + hint
    d, e = t.delta, pred - t.theta
    ee = float(e @ e)
    if ee > 0:
        f = float(d @ e) / ee
        rate = f" (an effective rate {f * h['lr']:.6g} on the received gradient)" \
            if h["kind"] in ("sgd", "vanilla") else ""
        return BugClass.STEP_MISMATCH, (f"; the parameters moved {f:.6g} x the declared "
                                        f"update (least-squares factor){rate}")
    return BugClass.STEP_MISMATCH, "; the declared update is zero here but the parameters moved"


# -- repeatable ----------------------------------------------------------------------------

def judge_repeat(first: StepRecord, second: StepRecord, *, stateless: bool, dtype: str,
                 model: ErrorModel) -> Verdict:
    """The two calls of the ``repeat`` experiment (both from ``theta0``, the second with the
    state the first left): the received gradients agree, and for a stateless optimizer the
    parameter changes too."""
    got, twice, moved = _Elements(), _Elements(), _Elements()
    for k, t1 in first.tensors.items():
        t2 = second.tensors[k]
        a1 = t1.applied if t1.applied is not None else np.zeros_like(t1.grad)
        a2 = t2.applied if t2.applied is not None else np.zeros_like(t2.grad)
        labels = [f"{lab} (applied)" for lab in t1.labels()]
        got.add(labels, a2, a1, np.abs(a1) + np.abs(a2))
        twice.add(labels, a2, 2.0 * a1, 2.0 * (np.abs(a1) + np.abs(a2)))
        n1, n2 = math.sqrt(t1.applied_sumsq), math.sqrt(t2.applied_sumsq)
        got.add([f"{k} (whole-tensor norm of the applied gradient)"], [n2], [n1], [n1 + n2])
        if stateless:
            moved.add([f"{lab} (delta)" for lab in t1.labels()], t2.delta, t1.delta,
                      np.abs(t1.delta) + np.abs(t2.delta) + np.abs(t1.theta))
    received = got.assess(dtype, model)
    a = _merge([got, moved]).assess(dtype, model)
    if a.ok:
        return Verdict(a, BugClass.STALE_STATE)
    f = received.factor
    if twice.assess(dtype, model).ok:
        hint = ("; the second call received 2 x the first call's gradient: stale + fresh, the "
                "stored gradients (Gorgonia dual values, a kept GradStore, the user's own "
                "accumulator) were not zeroed after the first call")
    elif received.ok:
        hint = ("; the received gradients agree but the parameter changes differ: the update "
                "depends on state the first call left (a stateless optimizer was declared)")
    elif f is not None:
        hint = (f"; the second call received {f:.6g} x the first call's gradient (least-squares "
                "factor; a clip that acted on both calls normalises a stale gradient's size, "
                "so a factor near 1 can still be stale + fresh)")
    else:
        hint = "; the second call received a different gradient"
    return Verdict(a, BugClass.STALE_STATE, hint, details={"repeat_factor": f})


# -- grad_norm -----------------------------------------------------------------------------

def norm_reference(rec: StepRecord, max_norm: float | None) -> tuple[float, float, str]:
    """(the norm the log claims to be, the other one, its description).  A post-clip norm
    with the optimizer's input unobserved is the declared clip's ``s ||g||`` (of the clip
    scales a correct clip may use, the one nearest the logged value)."""
    if rec.which == "post_clip":
        if any(t.applied_present for t in rec.tensors.values()):
            return rec.applied_norm, rec.grad_norm, ("the global L2 norm of what the optimizer "
                                                     "received (post_clip)")
        got = rec.logged if rec.logged is not None else 0.0
        ref = min((s * rec.grad_norm for s in clip_scales(rec, max_norm)),
                  key=lambda v: abs(v - got))
        return ref, rec.grad_norm, ("s x the global L2 norm of the fresh gradient (post_clip; "
                                    "the optimizer's input is not observed)")
    return rec.grad_norm, rec.applied_norm, "the global L2 norm of the fresh gradient (pre_clip)"


def judge_norm(rec: StepRecord, *, max_norm: float | None, n_elements: int, dtype: str,
               model: ErrorModel, loss: Callable[[], float | None]) -> Verdict:
    """The logged norm vs the global L2 norm it claims to be (``rec.logged`` is not None)."""
    assert rec.logged is not None
    ref, other, _ = norm_reference(rec, max_norm)
    got = rec.logged
    g = growth(n_elements)
    a = assess(got, ref, (ref + abs(got)) * g, dtype, model=model)
    details = {"grad_norm": ref, "logged": got}
    if a.ok:
        return Verdict(a, BugClass.NORM_NOT_GLOBAL_L2, details=details)

    def near(x: float, y: float, dt: str = dtype) -> bool:
        return assess(x, y, (abs(x) + abs(y)) * g, dt, model=model).ok

    # a mix-up is told apart only where the clip acted and the optimizer received s g
    clipped = any(s < 1.0 and near(rec.applied_norm, s * rec.grad_norm)
                  for s in clip_scales(rec, max_norm)) and \
        not near(rec.applied_norm, rec.grad_norm)
    if clipped and rec.which == "pre_clip" and near(got, other):
        return Verdict(a, BugClass.PRE_POST_CLIP_MIXUP, "; the logged value is the norm of what "
                       f"the optimizer received ({other:.6g}, post-clip) but the step says "
                       "pre_clip", details=details)
    if clipped and rec.which == "post_clip" and near(got, other):
        return Verdict(a, BugClass.PRE_POST_CLIP_MIXUP, "; the logged value is the pre-clip "
                       f"gradient norm ({other:.6g}) but the step says post_clip",
                       details=details)
    if dtype == "float64" and near(got, ref, "float32"):
        return Verdict(a, BugClass.LOW_PRECISION_NORM, "; within float32 rounding of the true "
                       "norm: the norm of a float64 model was accumulated in float32",
                       details=details)
    per = {k: np.array([math.sqrt(t.grad_sumsq if rec.which == "pre_clip"
                                  else t.applied_sumsq)]) for k, t in rec.tensors.items()}
    bug, hint = _diagnose(got, ref, per, loss(), dtype, model)
    return Verdict(a, bug, hint, details=details)
