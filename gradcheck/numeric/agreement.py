"""Agreement checks: one engine's VJP against another's on identical inputs and probes.

Used for ``reference`` (a backend vs the hand-derived NumPy reference), ``cross_backend``
(e.g. torch vs jax) and ``cross_device`` (CPU vs GPU).  No finite differences are involved, so
the allowed error is the rounding bound alone (docs/error-model.md, sections 3 and 5b)::

    allowed = gamma * eps(float64) * (sum_j |g_a,j| |u_j| + sum_j |g_b,j| |u_j|
                                      + sum_i |v_i| |(J_b u)_i|)

The last term (the output-side sum of absolute terms, from the expected side's JVP when it has
one) keeps the bound honest where ``J^T v`` cancels (``cumsum``).  Without finite differences
nothing limits the resolution: a derivative of ``4e-18`` that one engine computes as ``0`` is
a 100 % relative discrepancy, which is what this check exists to catch.

Where the discrepancy exceeds ``ErrorModel.conditioning_above`` (1/8) of that bound, every
comparison adds the rule's **argument conditioning** to the terms (docs/error-model.md, section
5d; :func:`gradcheck.oracle.error_model.argument_conditioning_elements`)::

    allowed = gamma * eps(float64) * (terms + k sum_j |u_j| min(|D_d g_a,j|, |D_d g_b,j|))

``D_d g`` is the change of a side's ``J^T v`` per unit of a relative perturbation of the inputs
(:func:`_argument_sensitivity`): two backward-stable engines each compute the derivative at an
argument a few ulps off, which an ill-conditioned rule (``acosh'`` near 1) amplifies far beyond
the final terms.  ``k = 2`` for two engines (``cross_backend``, ``cross_device``: each may be
that far off), ``k = 1`` for ``reference`` (only the backend under test: the reference is held to
the accurate value, so a rule that is not backward stable is still reported).  Where the bound
is still exceeded, the *judging* side's measured rounding bound replaces its modelled share of
it where it is larger (docs/error-model.md, "Exact comparisons: the judging side's measured
noise")::

    allowed += max(0, NOISE_FACTOR * sum_k |u_k| sigma_k
                      - gamma * eps * (sum_k |g_b,k| |u_k| + its half of the conditioning))

``sigma_k`` is the rounding noise of element ``k`` of the judging side's ``J^T v``, measured
between inputs a few units in the last place apart (:func:`_element_noise`): intermediates that
cancel (``digamma(b) - digamma(a + b)`` at ``a = 1e-3``) carry rounding errors that change
pseudo-randomly between such inputs, so the scatter measures them; an error that is the same at
every nearby input (a rule that cancels to exactly 0, a truncated series) does not scatter.
Whose noise counts: for ``reference`` the reference's alone (the oracle: the backend under test
is never excused by its own noise); for the symmetric ``cross_backend``/``cross_device`` the
smaller of the two, element by element (a disagreement above the noise of the steadier engine
is reported).  The conditioning and the noise are measured only when the bound before them is
exceeded (the conditioning: a fraction of it), so a comparison far inside its bound costs
nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from gradcheck.backends.base import Backend
from gradcheck.backends.guarded import AdapterFailed, AdapterFailure, GuardedBackend, attempt
from gradcheck.core.results import CheckResult, Status, WorstElement, shorten
from gradcheck.oracle import error_model as tolerance
from gradcheck.oracle import fd

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
                 name: str = "", reproducer: str = "", test_id: str = "",
                 error_model: tolerance.ErrorModel = tolerance.DEFAULT_MODEL
                 ) -> list[CheckResult]:
    """Compare ``actual``'s VJP with ``expected``'s, in float64, one result per input, every
    allowance from ``error_model``.

    Never raises: an engine that raises yields an ``error`` result naming it.
    """
    args = [np.asarray(a, dtype=np.float64) if np.issubdtype(np.asarray(a).dtype, np.floating)
            else np.asarray(a) for a in inputs]
    if diff is None:
        diff = [k for k, a in enumerate(args) if np.issubdtype(a.dtype, np.floating)]
    base: dict[str, Any] = dict(
        kind=kind, backend=actual.backend.name, device=actual.device, dtype="float64",
        name=name, seed=seed, shapes=tuple(a.shape for a in args), reproducer=reproducer,
        test_id=test_id)
    sampled = _sample(actual, expected, args, diff, seed, probes)
    if isinstance(sampled, str):
        return [CheckResult(status=Status.ERROR, message=f"{kind}: {sampled}", **base)]
    vs, us, ga, gb, out_mag = sampled
    noise = _LazyNoise(kind, actual, expected, args, diff, vs, us, seed,
                       error_model.noise_ulps)
    cond = _LazyConditioning(kind, actual, expected, args, diff, vs, us, seed)
    results = []
    for pos, j in enumerate(diff):
        results.append(_judge(error_model, base, actual, expected, j, [g[pos] for g in ga],
                              [g[pos] for g in gb], [u[pos] for u in us],
                              [m[pos] for m in out_mag], partial(noise.of, pos),
                              partial(cond.of, pos)))
    return results


_Sampled = tuple[list, list, list[list[np.ndarray]], list[list[np.ndarray]], list[list[float]]]


def _sample(actual: Side, expected: Side, args, diff, seed: int, probes: int
            ) -> _Sampled | str:
    """The probes (``vs``, ``us``), both sides' VJPs along them and the output magnitudes;
    or what failed, as the ``error`` result says it (every call through the adapter
    boundary)."""
    outs = GuardedBackend(expected.backend).evaluate(expected.fn, args, expected.device)
    if isinstance(outs, AdapterFailure):
        return outs.text
    rng = np.random.default_rng(seed)
    vs = [[rng.standard_normal(np.shape(o)) for o in outs] for _ in range(probes)]
    us = [[rng.standard_normal(args[k].shape) for k in diff] for _ in range(probes)]
    ga: list[list[np.ndarray]] = []
    gb: list[list[np.ndarray]] = []
    out_mag: list[list[float]] = []
    for side, grads in ((actual, ga), (expected, gb)):
        for v in vs:
            g = _vjp(side, args, diff, v)
            if isinstance(g, str):
                return g
            grads.append(g)
    for v, u in zip(vs, us, strict=True):
        m = _output_magnitudes(expected, args, diff, v, u)
        if isinstance(m, AdapterFailure):
            return m.text
        out_mag.append(m)
    return vs, us, ga, gb, out_mag


def _vjp(side: Side, args, diff, v) -> list[np.ndarray] | str:
    """``side``'s ``J^T v`` per input of ``diff`` as float64, or the problem."""
    grads = GuardedBackend(side.backend).call("vjp", side.backend.vjp, side.fn, args, diff, v,
                                              side.device)
    if isinstance(grads, AdapterFailure):  # worded as the check has always reported it
        return shorten(f"RuntimeError: the VJP of {side.label} raised {grads.text}", 500)
    out = attempt("vjp", lambda: [np.asarray(g, dtype=np.float64) for g in grads])
    if isinstance(out, AdapterFailure):
        return out.text
    if len(out) != len(diff):
        return (f"ValueError: the VJP of {side.label} returned {len(out)} arrays for "
                f"{len(diff)} inputs")
    for g, k in zip(out, diff, strict=True):
        if g.shape != args[k].shape:
            return (f"ValueError: the VJP of {side.label} returned shape {g.shape} for input "
                    f"{k}, expected {args[k].shape}")
    return out


def _output_magnitudes(side: Side, args, diff, v, u) -> list[float] | AdapterFailure:
    """``sum_i |v_i| |(J u_j)_i|`` per input ``j`` from ``side``'s JVP (0 without one)."""
    if not side.backend.supports_jvp:
        return [0.0] * len(diff)
    guard = GuardedBackend(side.backend)
    mags = []
    for pos in range(len(diff)):
        tans = [u[q] if q == pos else np.zeros_like(u[q]) for q in range(len(diff))]
        ju = guard.call("jvp", side.backend.jvp, side.fn, args, diff, tans, side.device)
        if isinstance(ju, AdapterFailure) and ju.unsupported:
            return [0.0] * len(diff)
        if isinstance(ju, AdapterFailure):
            return ju
        # the adapter's answer as arrays of the outputs' shapes (else the failure says why)
        m = attempt("jvp", lambda ju=ju: float(sum(
            np.sum(np.abs(vi) * np.abs(np.asarray(t, dtype=np.float64)))
            for vi, t in zip(v, ju, strict=True))))
        if isinstance(m, AdapterFailure):
            return m
        mags.append(m)
    return mags


def _judge(model: tolerance.ErrorModel, base: dict, actual: Side, expected: Side, j: int, ga,
           gb, us, out_mag,
           noise_of: Callable[[], np.ndarray], conditioning_of: Callable[[], np.ndarray]
           ) -> CheckResult:
    sa = np.array([g.ravel() @ u.ravel() for g, u in zip(ga, us, strict=True)])
    sb = np.array([g.ravel() @ u.ravel() for g, u in zip(gb, us, strict=True)])
    mag = np.array([np.abs(a.ravel()) @ np.abs(u.ravel()) + np.abs(b.ravel()) @ np.abs(u.ravel())
                    + m for a, b, u, m in zip(ga, gb, us, out_mag, strict=True)])
    allows = [model.allowance(0.0, float(m)) for m in mag]
    ratios = _ratios(sa, sb, allows)
    cond = np.zeros(len(sa))
    if max(ratios) > model.conditioning_above and np.all(np.isfinite(sa)):
        # near or beyond the rounding bound of the final terms: add the rounding of the
        # arguments amplified by the rule's conditioning, so no verdict sits on a bound that
        # leaves it out (the engines' vector units and libms move such a discrepancy)
        cond = conditioning_of()
        allows = [model.allowance(0.0, float(m), conditioning=float(c))
                  for m, c in zip(mag, cond, strict=True)]
        ratios = _ratios(sa, sb, allows)
    if max(ratios) > 1.0 and np.all(np.isfinite(sa)):
        # still exceeded: the judging side's measured bound replaces its modelled share
        # (gamma eps (sum_j |g_b,j| |u_j| + its half of the conditioning)) where it is larger
        share = [model.rounding(float(np.abs(b.ravel()) @ np.abs(u.ravel())) + float(c) / 2)
                 for b, u, c in zip(gb, us, cond, strict=True)]
        extra = [max(0.0, model.noise_bound(float(nz)) - sh)
                 for nz, sh in zip(noise_of(), share, strict=True)]
        allows = [model.allowance(0.0, float(m), conditioning=float(c), measured=x)
                  for m, c, x in zip(mag, cond, extra, strict=True)]
        ratios = _ratios(sa, sb, allows)
    p = int(np.argmax(ratios))
    disc = abs(float(sa[p] - sb[p]))
    rel = disc / abs(float(sb[p])) if sb[p] != 0 else (0.0 if disc == 0 else float("inf"))
    ok = bool(ratios[p] <= 1.0) and bool(np.isfinite(sa[p]))
    worst = () if ok else _worst(model, ga[p], gb[p])
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
        probe=p, probes=len(sa), details={"expected_side": expected.label}, **base)


def _ratios(sa: np.ndarray, sb: np.ndarray, allows: list[tolerance.Allowance]) -> list[float]:
    with np.errstate(invalid="ignore"):
        return [tolerance.ratio(abs(float(a - b)), al.allowed) if np.isfinite(a) else np.inf
                for a, b, al in zip(sa, sb, allows, strict=True)]


class _LazyNoise:
    """The judging side's rounding noise per (probe, input), measured on first use only."""

    def __init__(self, kind: str, actual: Side, expected: Side, args, diff, vs, us, seed: int,
                 ulps: int) -> None:
        self._sides = (expected,) if kind == "reference" else (actual, expected)
        self._call = (args, diff, vs, us, seed)
        self._ulps = ulps
        self._noise: np.ndarray | None = None

    def of(self, pos: int) -> np.ndarray:
        if self._noise is None:
            args, diff, vs, us, seed = self._call
            try:
                sigma = np.minimum.reduce([_element_noise(side, args, diff, vs, seed, self._ulps)
                                           for side in self._sides])
            except AdapterFailed:  # a side misbehaves off the point: no credit
                sigma = np.zeros((len(vs), sum(args[k].size for k in diff)))
            # bounded like the rounding of a dot product, element by element: sum_k |u_k| sigma_k
            self._noise = _project(sigma, args, diff, us)
        return self._noise[:, pos]


class _LazyConditioning:
    """The argument-rounding conditioning term per (probe, input), in units of eps, measured on
    first use only: :func:`gradcheck.oracle.error_model.argument_conditioning_elements` of both
    sides' :func:`_argument_sensitivity`, for two backward-stable engines (``cross_backend``,
    ``cross_device``) or for the backend alone against the accurate reference (``reference``)."""

    def __init__(self, kind: str, actual: Side, expected: Side, args, diff, vs, us, seed: int
                 ) -> None:
        self._sides = (actual, expected)
        self._engines = 1 if kind == "reference" else 2
        self._call = (args, diff, vs, us, seed)
        self._cond: np.ndarray | None = None

    def of(self, pos: int) -> np.ndarray:
        args, diff, vs, us, seed = self._call
        if self._cond is None:
            try:
                sens = [_argument_sensitivity(side, args, diff, vs, seed)
                        for side in self._sides]
                per_elem = tolerance.argument_conditioning_elements(*sens,
                                                                    engines=self._engines)
            except AdapterFailed:  # a side misbehaves off the point: no credit
                per_elem = np.zeros((len(vs), sum(args[k].size for k in diff)))
            self._cond = _project(per_elem, args, diff, us)
        return self._cond[:, pos]


def _project(per_elem: np.ndarray, args, diff, us) -> np.ndarray:
    """``sum_k |u_k| e_k`` per (probe, input) of a per-element bound ``e`` of shape ``(P, n)``."""
    bounds = np.cumsum([0] + [args[k].size for k in diff])
    return np.array([[np.abs(u[q].ravel()) @ per_elem[p, bounds[q]:bounds[q + 1]]
                      for q in range(len(diff))] for p, u in enumerate(us)])


def _vjps_along(side: Side, args, diff, vs) -> Callable[[np.ndarray], np.ndarray]:
    """``X (B, n) -> (B, P * n)``: ``side``'s ``J^T v_p`` at each row of ``X`` (the
    differentiable inputs concatenated in ``diff`` order), all probes batched.  Raises
    :class:`AdapterFailed` where the adapter fails or answers with arrays that do not fit
    (the FD engine counts such a row as outside the domain)."""
    P = len(vs)
    n = sum(args[k].size for k in diff)
    bounds = np.cumsum([0] + [args[k].size for k in diff])
    cts = [np.stack([v[i] for v in vs]) for i in range(len(vs[0]))]
    guard = GuardedBackend(side.backend)

    def fill(out: np.ndarray, a: list) -> None:
        g = side.backend.vjp_batch(side.fn, a, diff, cts, side.device)
        for pos in range(len(diff)):
            out[:, bounds[pos]:bounds[pos + 1]] = np.asarray(
                g[pos], dtype=np.float64).reshape(P, -1)

    def grads(X: np.ndarray) -> np.ndarray:
        out = np.empty((len(X), P, n))
        for b, row in enumerate(X):
            a = list(args)
            for pos, k in enumerate(diff):
                a[k] = row[bounds[pos]:bounds[pos + 1]].reshape(args[k].shape)
            # the adapter's answer, read into the row (a wrong number or size of arrays fails)
            failed = guard.call("vjp_batch", fill, out[b], a)
            if isinstance(failed, AdapterFailure):
                raise AdapterFailed(failed)
        return out.reshape(len(X), -1)

    return grads


def _argument_sensitivity(side: Side, args, diff, vs, seed: int) -> np.ndarray:
    """``|D_d (J^T v_p)|``, ``(P, n)``: how much every element of ``side``'s VJP changes per
    unit of a relative perturbation ``d = x * s`` of every differentiable input element (``s``
    random signs), by central differences at the largest of the relative steps
    :data:`gradcheck.oracle.error_model.ARGUMENT_STEPS` that converges for the element (4 VJP points
    per step tried).  For an elementwise op it is ``|v_j f''(x_j) x_j|`` whatever the signs;
    for a coupled one a random-sign sample of
    ``sum_k |d(J^T v)_j / dx_k| |x_k|``.  Zeros and non-finite inputs stay put; an element
    for which no step converges (a kink at ``x``, a VJP that is not finite nearby) counts as 0
    (no credit)."""
    x = np.concatenate([args[k].ravel() for k in diff])
    rng = np.random.default_rng([seed, 13])
    with np.errstate(all="ignore"):
        d = np.where(np.isfinite(x), x * rng.choice((-1.0, 1.0), size=x.size), 0.0)
    grads = _vjps_along(side, args, diff, vs)
    sens = np.full(len(vs) * x.size, np.nan)
    for h in tolerance.ARGUMENT_STEPS:
        todo = np.isnan(sens)
        if not todo.any():
            break
        g = grads(np.stack([x + sign * t * d for t in (h, h / 4) for sign in (1.0, -1.0)]))
        sens = np.where(todo, tolerance.argument_sensitivity(g, h), sens)
    return np.where(np.isnan(sens), 0.0, sens).reshape(len(vs), x.size)


def _element_noise(side: Side, args, diff, vs, seed: int,
                   ulps: int = tolerance.DEFAULT_MODEL.noise_ulps) -> np.ndarray:
    """Rounding noise ``sigma`` of every element of ``J^T v_p``, ``(P, n)`` (``n`` the
    differentiable elements, inputs concatenated in ``diff`` order).

    The VJPs are recomputed along a line ``x + t d``, ``t = -3..3``, where ``d`` moves every
    non-zero finite input element by 1 to ``ulps`` (2 by default) units in its last place,
    either sign (exact: the points are floats); :func:`gradcheck.oracle.fd.noise_level`'s 4th and
    6th
    differences remove the smooth change of the derivative along the line and leave the rounding
    noise ``sigma_k`` of every element of ``J^T v_p``.  Zeros and non-finite elements stay put
    (a special case at 0 is not a rounding regime).  Non-finite differences count as no noise;
    a side that fails there (:class:`AdapterFailed`, caught by the caller) measures none either:
    no allowance is added.
    """
    P = len(vs)
    x = np.concatenate([args[k].ravel() for k in diff])
    rng = np.random.default_rng([seed, 11])
    moves = [t for t in range(-ulps, ulps + 1) if t]  # (-2, -1, 1, 2) by default
    with np.errstate(all="ignore"):
        d = np.where(np.isfinite(x) & (x != 0),
                     rng.choice(moves, size=x.size) * np.spacing(np.abs(x)), 0.0)
    grads = _vjps_along(side, args, diff, vs)
    return fd.noise_level(grads, x, d[None, :], np.ones(1),
                          grads(x[None, :])[0])[0].reshape(P, x.size)


def _worst(model: tolerance.ErrorModel, ga: np.ndarray, gb: np.ndarray
           ) -> tuple[WorstElement, ...]:
    """The elements of the two VJPs that differ most relative to their own rounding bound."""
    a, b = ga.ravel(), gb.ravel()
    allowed = model.rounding(np.abs(a) + np.abs(b))
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
