"""Agreement checks: one engine's VJP against another's on identical inputs and probes.

Used for ``reference`` (a backend vs the hand-derived NumPy reference), ``cross_backend``
(e.g. torch vs jax) and ``cross_device`` (CPU vs GPU).  No finite differences are involved, so
the allowed error is the rounding bound alone (DESIGN.md section 2)::

    allowed = gamma * eps(float64) * (sum_j |g_a,j| |u_j| + sum_j |g_b,j| |u_j|
                                      + sum_i |v_i| |(J_b u)_i|)

The last term (the output-side sum of absolute terms, from the expected side's JVP when it has
one) keeps the bound honest where ``J^T v`` cancels (``cumsum``).  Without finite differences
nothing limits the resolution: a derivative of ``4e-18`` that one engine computes as ``0`` is
a 100 % relative discrepancy, which is what this check exists to catch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .. import tolerance
from ..backends.base import Backend
from ..results import CheckResult, Status, WorstElement

_WORST = 5


@dataclass(frozen=True)
class Side:
    """One side of a comparison: an engine, its implementation of the op, and a device."""

    backend: Backend
    fn: Callable
    device: str = "cpu"

    @property
    def label(self) -> str:
        return f"{self.backend.name}/{self.device}"


def compare_vjps(kind: str, actual: Side, expected: Side, inputs: Sequence[np.ndarray], *,
                 diff: Sequence[int] | None = None, seed: int = 0, probes: int = 3,
                 name: str = "", reproducer: str = "", test_id: str = "") -> list[CheckResult]:
    """Compare ``actual``'s VJP with ``expected``'s, in float64, one result per input.

    Never raises: an engine that raises yields an ``error`` result naming it.
    """
    args = [np.asarray(a, dtype=np.float64) if np.issubdtype(np.asarray(a).dtype, np.floating)
            else np.asarray(a) for a in inputs]
    if diff is None:
        diff = [k for k, a in enumerate(args) if np.issubdtype(a.dtype, np.floating)]
    base = dict(kind=kind, backend=actual.backend.name, device=actual.device, dtype="float64",
                name=name, seed=seed, shapes=tuple(a.shape for a in args),
                reproducer=reproducer, test_id=test_id)
    try:
        outs = expected.backend.evaluate(expected.fn, args, expected.device)
        rng = np.random.default_rng(seed)
        vs = [[rng.standard_normal(np.shape(o)) for o in outs] for _ in range(probes)]
        us = [[rng.standard_normal(args[k].shape) for k in diff] for _ in range(probes)]
        ga = [_vjp(actual, args, diff, v) for v in vs]
        gb = [_vjp(expected, args, diff, v) for v in vs]
        out_mag = [_output_magnitudes(expected, args, diff, v, u) for v, u in zip(vs, us,
                                                                               strict=True)]
    except Exception as exc:
        return [CheckResult(status=Status.ERROR, message=f"{kind}: {_describe(exc)}", **base)]
    results = []
    for pos, j in enumerate(diff):
        results.append(_judge(base, actual, expected, j, [g[pos] for g in ga],
                              [g[pos] for g in gb], [u[pos] for u in us],
                              [m[pos] for m in out_mag]))
    return results


def _describe(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]


def _vjp(side: Side, args, diff, v) -> list[np.ndarray]:
    try:
        grads = side.backend.vjp(side.fn, args, diff, v, side.device)
    except Exception as exc:
        raise RuntimeError(f"the VJP of {side.label} raised {_describe(exc)}") from exc
    out = [np.asarray(g, dtype=np.float64) for g in grads]
    for g, k in zip(out, diff, strict=True):
        if g.shape != args[k].shape:
            raise ValueError(f"the VJP of {side.label} returned shape {g.shape} for input {k}, "
                             f"expected {args[k].shape}")
    return out


def _output_magnitudes(side: Side, args, diff, v, u) -> list[float]:
    """``sum_i |v_i| |(J u_j)_i|`` per input ``j`` from ``side``'s JVP (0 without one)."""
    if not side.backend.supports_jvp:
        return [0.0] * len(diff)
    mags = []
    for pos in range(len(diff)):
        tans = [u[q] if q == pos else np.zeros_like(u[q]) for q in range(len(diff))]
        try:
            ju = side.backend.jvp(side.fn, args, diff, tans, side.device)
        except NotImplementedError:
            return [0.0] * len(diff)
        mags.append(float(sum(np.sum(np.abs(vi) * np.abs(np.asarray(t, dtype=np.float64)))
                              for vi, t in zip(v, ju, strict=True))))
    return mags


def _judge(base: dict, actual: Side, expected: Side, j: int, ga, gb, us, out_mag
           ) -> CheckResult:
    sa = np.array([g.ravel() @ u.ravel() for g, u in zip(ga, us, strict=True)])
    sb = np.array([g.ravel() @ u.ravel() for g, u in zip(gb, us, strict=True)])
    mag = np.array([np.abs(a.ravel()) @ np.abs(u.ravel()) + np.abs(b.ravel()) @ np.abs(u.ravel())
                    + m for a, b, u, m in zip(ga, gb, us, out_mag, strict=True)])
    allows = [tolerance.model_allowance(0.0, float(m), "float64") for m in mag]
    with np.errstate(invalid="ignore"):
        ratios = [tolerance.ratio(abs(float(a - b)), al.allowed) if np.isfinite(a) else np.inf
                  for a, b, al in zip(sa, sb, allows, strict=True)]
    p = int(np.argmax(ratios))
    disc = abs(float(sa[p] - sb[p]))
    rel = disc / abs(float(sb[p])) if sb[p] != 0 else (0.0 if disc == 0 else float("inf"))
    ok = bool(ratios[p] <= 1.0) and bool(np.isfinite(sa[p]))
    worst = () if ok else _worst(ga[p], gb[p])
    verdict = "agrees" if ok else "DISAGREES"
    message = (f"VJP of {actual.label} w.r.t. input {j} {verdict} with {expected.label}: "
               f"<J^T v, u> {float(sa[p]):.10g} vs {float(sb[p]):.10g}; |diff| {disc:.3g} "
               f"(relative {rel:.3g}), allowed {allows[p].allowed:.3g} [{allows[p].source}], "
               f"ratio {ratios[p]:.3g}")
    return CheckResult(
        status=Status.PASSED if ok else Status.FAILED, input_index=j, expected=float(sb[p]),
        actual=float(sa[p]), discrepancy=disc, relative_discrepancy=float(rel),
        allowed=allows[p].allowed, allowed_source=allows[p].source,
        discrepancy_ratio=float(ratios[p]), worst=worst, message=message,
        details={"probe": p, "probes": len(sa), "expected_side": expected.label}, **base)


def _worst(ga: np.ndarray, gb: np.ndarray) -> tuple[WorstElement, ...]:
    """The elements of the two VJPs that differ most relative to their own rounding bound."""
    a, b = ga.ravel(), gb.ravel()
    allowed = tolerance.ROUNDING_GAMMA * tolerance.eps("float64") * (np.abs(a) + np.abs(b))
    with np.errstate(all="ignore"):
        r = np.where(a == b, 0.0, np.abs(a - b) / np.maximum(allowed, 1e-300))
    r = np.where(np.isnan(r), np.inf, r)
    out = []
    for flat in np.argsort(-r)[:_WORST]:
        if r[flat] <= 1.0:
            break
        idx = tuple(int(t) for t in np.unravel_index(flat, ga.shape))
        out.append(WorstElement(idx, float(a[flat]), float(b[flat]), float(allowed[flat])))
    return tuple(out)
