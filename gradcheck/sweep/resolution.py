"""The sweep's own resolution checks at a point, run beside :func:`gradcheck.check`.

``gradcheck.check`` steps every input from ``2^-3 max(1, rms(x))`` and compares projections
``<v, J u>``: at 1e-300 it abstains, and a component far below the others is invisible.  These
checks judge what it cannot, each result tagged ``details["sweep"]["oracle"]``:

* ``scaled``: central differences along a direction scaled per element
  (:func:`gradcheck.oracle.scaled.element_scales`,
  :func:`gradcheck.oracle.scaled.scaled_central`) give ``(J u)_k`` for every output
  component ``k``; the backend's reverse mode gives the same components from rows
  ``J^T e_k`` (one VJP of ones for a one-input elementwise op), its forward mode from
  ``J u``.  Each component is compared *relative to its own terms*: ``|AD_k - FD_k|`` against
  ``FD_SAFETY * err_k + ROUNDING_GAMMA * (eps64 * sum_i |J_ki u_i| + n_k * tiny64)`` (``n_k``
  the nonzero terms; ``tiny64`` the smallest normal number, what a flush-to-zero engine loses
  per rounding below it: a component within that bound is not judged; a derivative entry
  below ``tiny64``, not representable, adds ``tiny64 |u_i|``: elementwise ops, and the
  nonzero subnormal entries of a row) (``vjp``/``jvp`` at order 1,
  ``vjp_of_vjp``/``jvp_of_vjp`` at order 2, on ``g(x) = J(x)^T w``), and forward against
  reverse component by component with the rounding term alone (``fwd_rev``).  A component
  whose FD error is above :data:`gradcheck.oracle.error_model.RESOLUTION` of its size abstains.
  float64 only (the FD is float64; a float32 rule is judged by the next check).
* ``ulp`` (dtypes below float64, elementwise ops, orders 1 and 2, reverse and forward): each
  derivative element in the dtype against the backend's float64 derivative rounded to the
  dtype, in units of the dtype (:func:`ulp_units`); failed above :data:`ULP_BOUND`
  (measured on correct ops: ``benchmarks/resolution_bounds.py``, docs/error-model.md 4b).
* ``mpmath`` (float64, one-input elementwise ops with a mapping, orders 1 and 2): each element
  of ``f'`` (order 2: ``f''``) against mpmath's derivative at the precision it needs
  (:func:`gradcheck.sweep.extended.derivative`), allowed
  ``ROUNDING_GAMMA * (eps64 * (|d| + |x d'|) + tiny64)`` (the rounding of a backward-stable
  formula: its result and its argument each off by a few ulps; and below the smallest normal
  number, its absolute rounding: an element whose true derivative lies within it and whose
  rule gives 0 is not judged).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.core.dtypes import numpy_dtype
from gradcheck.core.results import CheckResult, Status
from gradcheck.core.taxonomy import CheckKind
from gradcheck.oracle import fd
from gradcheck.oracle.error_model import FD_SAFETY, RESOLUTION, ROUNDING_GAMMA
from gradcheck.oracle.scaled import element_scales, scaled_central
from gradcheck.sweep import extended
from gradcheck.sweep.inventory.records import ELEMENTWISE, LINALG, Op

#: output components whose rows the scaled check compares (a seeded sample above this)
ROW_LIMIT = 32
#: inputs of at most this many elements have each element moved alone by :func:`diagonal`
ALONE_LIMIT = 32
#: the absolute rounding of one term in float64's subnormal range: an engine that flushes
#: subnormal results to zero (XLA on CPU) loses up to the smallest normal number per rounding,
#: whatever the relative model says; counted like ROUNDING_GAMMA counts relative roundings
TINY64 = fd.TINY64
#: elements the mpmath check evaluates per point (most need one attempt at 100 bits, a few
#: milliseconds; spence' at 2e-308 needs 1600 bits, about 5 s; all of them together get
#: extended.CALL_BUDGET_S)
MPMATH_LIMIT = 16
#: the allowed error of an elementwise derivative in a low-precision dtype, in the units of
#: :func:`ulp_units`, per (dtype, order), measured on correct ops
#: (``benchmarks/resolution_bounds.py``; docs/error-model.md section 4b: at order 1 about the
#: 99th percentile of the per-(op, point, path) maxima, at order 2 above 95-99% of them; the
#: ops above are named there: low-precision kernels with cancellation)
ULP_BOUND = {("float32", 1): 4.0, ("float16", 1): 4.0, ("bfloat16", 1): 4.0,
             ("float32", 2): 16.0, ("float16", 2): 16.0, ("bfloat16", 2): 16.0}


def _flat(outs: Sequence[Any]) -> np.ndarray:
    parts = [np.asarray(o, dtype=np.float64).ravel() for o in outs]
    return np.concatenate(parts) if parts else np.zeros(0)


@dataclass(frozen=True)
class _Target:
    """The function judged: the op (order 1) or ``g(x) = J(x)^T w`` (order 2), with its fixed
    trailing arguments (``w``), as the backend computes it."""

    backend: Any
    fn: Callable[..., Any]
    n: int  # differentiable leading arguments
    fixed: tuple[np.ndarray, ...]
    elementwise: bool  # one input, one output of its shape: the Jacobian is diagonal

    def args(self, xs: Sequence[np.ndarray], dtype: str) -> list[np.ndarray]:
        t = numpy_dtype(dtype)
        return [np.asarray(a).astype(t) for a in (*xs, *self.fixed)]

    def evaluate(self, xs: Sequence[np.ndarray], dtype: str = "float64") -> list[np.ndarray]:
        return [np.asarray(o) for o in self.backend.evaluate(self.fn, self.args(xs, dtype),
                                                             "cpu")]

    def rows(self, xs: Sequence[np.ndarray], ks: np.ndarray, dtype: str
             ) -> list[np.ndarray]:
        """``J^T e_k`` for the components ``ks`` (per input, stacked ``(len(ks), *shape)``);
        the diagonal (one VJP of ones) for an elementwise target."""
        args = self.args(xs, dtype)
        outs = self.evaluate(xs, dtype)
        t = numpy_dtype(dtype)
        diff = list(range(self.n))
        if self.elementwise:
            g = self.backend.vjp(self.fn, args, diff, [np.ones_like(outs[0], dtype=t)], "cpu")
            return [np.asarray(g[0], dtype=np.float64).ravel()[ks][:, None]]
        sizes = np.cumsum([0, *[o.size for o in outs]])
        cots = [np.zeros((len(ks), *o.shape), dtype=t) for o in outs]
        flat = [c.reshape(len(ks), -1) for c in cots]  # views (a 0-d row would be a copy)
        for b, k in enumerate(ks):
            j = int(np.searchsorted(sizes, k, side="right") - 1)
            flat[j][b, int(k - sizes[j])] = 1
        gs = self.backend.vjp_batch(self.fn, args, diff, cots, "cpu")
        return [np.asarray(g, dtype=np.float64).reshape(len(ks), -1) for g in gs]

    def jvp(self, xs: Sequence[np.ndarray], us: Sequence[np.ndarray], dtype: str) -> np.ndarray:
        t = numpy_dtype(dtype)
        return _flat(self.backend.jvp(self.fn, self.args(xs, dtype), list(range(self.n)),
                                      [np.asarray(u).astype(t) for u in us], "cpu"))


def diagonal(backend: Any, op: Op, arrays: Sequence[np.ndarray], outs: Sequence[Any],
             fn: Callable[..., Any] | None = None, fixed: Sequence[np.ndarray] = ()) -> bool:
    """Whether the op (or ``fn`` of ``arrays`` and the ``fixed`` trailing arguments, with
    outputs ``outs``) is elementwise in fact, not only by its shapes (``softmax`` and
    ``cumsum`` keep the shape too): moving elements of an input moves no other output element.
    Moved: each element alone (inputs of at most :data:`ALONE_LIMIT` elements) or else the
    first, the middle and the last, then three seeded random halves of the elements at once (a
    transpose fixes the first and the last; a softmax at large logits moves the other
    probabilities of a row only where they did not underflow, which a random half catches with
    probability 1/2 each)."""
    if op.family != ELEMENTWISE or len(outs) != 1:
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
        for mask in masks:
            flat = a.copy().ravel()
            flat[mask] = flat[mask] * (1 + 2.0 ** -10) + np.where(flat[mask] == 0, 2.0 ** -10,
                                                                   0.0)
            xs = [np.asarray(b) for b in arrays]
            xs[j] = flat.reshape(a.shape)
            now = np.asarray(backend.evaluate(fn or op.fn, [*xs, *fixed], "cpu")[0],
                             dtype=np.float64).ravel()
            if not np.array_equal(now[~mask], base[~mask], equal_nan=True):
                return False
    return True


def _target(op: Op, arrays: Sequence[np.ndarray], order: int, seed: int) -> _Target:
    from gradcheck.backends.registry import get_backend

    backend = get_backend(op.backend)
    n = len(arrays)
    outs = backend.evaluate(op.fn, list(arrays), "cpu")
    one = (n == 1 and len(outs) == 1 and np.shape(outs[0]) == np.shape(arrays[0])
           and diagonal(backend, op, arrays, outs))
    if order == 1:
        return _Target(backend, op.fn, n, (), one)
    rng = np.random.default_rng(seed + 7)
    ws = tuple(np.ones(np.shape(o)) if op.family == ELEMENTWISE else rng.normal(size=np.shape(o))
               for o in outs)
    g = backend.vjp_function(op.fn, list(range(n)), n)
    # the derivative's own structure: at a degenerate point an op can look elementwise while
    # its derivative is not (cumprod at all zeros: each output moves only with its own
    # element, but its gradient's element j moves with element j + 1)
    one = one and diagonal(backend, op, arrays, backend.evaluate(g, [*arrays, *ws], "cpu"),
                           g, ws)
    return _Target(backend, g, n, ws, one)


def _kinds(order: int) -> tuple[CheckKind, CheckKind]:
    return ((CheckKind.VJP, CheckKind.JVP) if order == 1
            else (CheckKind.VJP_OF_VJP, CheckKind.JVP_OF_VJP))


def _verdict(kind: CheckKind, op: Op, dtype: str, order: int, oracle: str,
             got: np.ndarray, want: np.ndarray, allowed: np.ndarray, judged: np.ndarray,
             what: str, seed: int, extra: dict[str, Any] | None = None) -> CheckResult:
    """One result from per-component comparisons: failed where a judged component is off by
    more than its allowance (the worst one reported), passed where every judged one is
    within, inconclusive where none could be judged."""
    base: dict[str, Any] = dict(kind=kind, backend=op.backend, dtype=dtype, name=op.name,
                                order=order, seed=seed,
                                allowed_source=f"sweep {oracle} check: {what}")
    details = {"sweep_oracle": oracle, **(extra or {})}
    with np.errstate(all="ignore"):
        finite = np.isfinite(got)
        diff = np.where(finite, np.abs(got - want), np.inf)
        ratio = np.where(judged, diff / np.where(allowed > 0, allowed, np.inf), 0.0)
        ratio = np.where(judged & (diff > 0) & ~(allowed > 0), np.inf, ratio)
    n_judged = int(judged.sum())
    if n_judged == 0:
        return CheckResult(status=Status.INCONCLUSIVE, details=details,
                           message=f"sweep {oracle} check ({what}): no component resolved "
                                   "at this point", **base)
    k = int(np.argmax(ratio))
    worst = float(ratio[k])
    status = Status.FAILED if worst > 1.0 else Status.PASSED
    details.update(components=n_judged, component=k)
    rel = float(diff[k] / abs(want[k])) if want[k] else None
    msg = (f"sweep {oracle} check: {what}; component {k} ({n_judged} of {len(judged)} judged): got "
           f"{got[k]:.17g}, expected {want[k]:.17g}, |diff| {diff[k]:.3g} vs allowed "
           f"{allowed[k]:.3g} (ratio {worst:.3g})")
    return CheckResult(status=status, actual=float(got[k]), expected=float(want[k]),
                       discrepancy=float(diff[k]), relative_discrepancy=rel,
                       allowed=float(allowed[k]), discrepancy_ratio=worst, message=msg,
                       details=details, **base)


def scaled_checks(op: Op, arrays: Sequence[np.ndarray], order: int, seed: int,
                  modes: Sequence[str]) -> list[CheckResult]:
    """The ``scaled`` checks in float64 (module docstring)."""
    xs = [np.asarray(a, dtype=np.float64) for a in arrays]
    tgt = _target(op, xs, order, seed)
    rng = np.random.default_rng(seed)
    us = [rng.normal(size=a.shape) * s for a, s in zip(xs, element_scales(xs), strict=True)]
    est = scaled_central(lambda ys: _flat(tgt.evaluate(ys)), xs, us, kinks=True)
    m = est.value.size
    ks = np.arange(m) if m <= ROW_LIMIT else np.sort(rng.choice(m, ROW_LIMIT, replace=False))
    rows = tgt.rows(xs, ks, "float64")
    uflat = [u.ravel() for u in us]
    if tgt.elementwise:
        d = rows[0][:, 0]
        rev = d * uflat[0][ks]
        terms = np.abs(rev)
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
        count = sum(np.count_nonzero(r, axis=1) for r in rows)
        # the same for the nonzero subnormal entries of a row (an exact zero may be structural)
        tiny_d = sum(((r != 0) & (np.abs(r) < TINY64)) @ np.abs(u)
                     for r, u in zip(rows, uflat, strict=True))
        huge_d = np.zeros(len(ks), dtype=bool)
    want, err = est.value[ks], est.error[ks]
    # relative rounding of the terms, plus the absolute rounding of each term in the subnormal
    # range (TINY64): a component of ~1e-308 is 0 in a flush-to-zero engine; and of each
    # derivative entry there, times its u
    underflow = ROUNDING_GAMMA * TINY64 * (np.maximum(count, 1) + tiny_d)
    scale = _normwise(tgt, xs, ks, terms) if op.family == LINALG else terms
    rounding = ROUNDING_GAMMA * fd.EPS64 * scale + underflow
    with np.errstate(all="ignore"):
        # resolved in its own terms: a step family that straddles a period, a kink or a pole
        # has no small error estimate; an exactly zero component resolves with err = 0
        # (every difference exactly zero: |J u| is below the noise err, judged with it); a
        # component whose terms and value lie within the underflow bound is not resolved
        judged = (np.isfinite(want) & ((err <= RESOLUTION * np.abs(want)) | (want == 0))
                  & ((terms > underflow) | (np.abs(want) > underflow)) & ~huge_d)
    allowed = FD_SAFETY * err + rounding
    inexact = np.zeros(len(ks), dtype=bool)
    if tgt.elementwise:
        with np.errstate(all="ignore"):
            off = judged & ~(np.abs(rev - want) <= allowed)
        inexact = _forward_off(op, tgt, xs, ks, off, order)
        judged &= ~inexact
    rev_kind, fwd_kind = _kinds(order)
    what = (f"(J u)_k with u scaled per element (|x_i|), central differences at two step "
            f"families vs {'reverse' if order == 1 else 'reverse-over-reverse'} mode")
    if inexact.any():
        what += (f" ({int(inexact.sum())} components not judged: the differenced function's "
                 "own value there is off mpmath's)")
    out = [_verdict(rev_kind, op, "float64", order, "scaled", rev, want, allowed, judged, what,
                    seed)]
    if "fwd" in modes:
        fwd = tgt.jvp(xs, us, "float64")[ks]
        out.append(_verdict(fwd_kind, op, "float64", order, "scaled", fwd, want, allowed,
                            judged, what.replace("reverse", "forward", 1), seed))
        # not at a kink on the direction (a tie of min/max): there the two modes may take
        # different sides
        kink = est.kink[ks] if est.kink is not None else np.zeros(len(ks), dtype=bool)
        both = np.isfinite(rev) & (terms > underflow) & ~kink
        out.append(_verdict(CheckKind.FWD_REV, op, "float64", order, "scaled", fwd, rev,
                            2 * rounding, both, "forward vs reverse mode per output component "
                            "(J u)_k, rounding bound of its own terms and of underflow",
                            seed))
    return out


def _normwise(tgt: _Target, xs: Sequence[np.ndarray], ks: np.ndarray, terms: np.ndarray
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


def _forward_off(op: Op, tgt: _Target, xs: Sequence[np.ndarray], ks: np.ndarray,
                 where: np.ndarray, order: int) -> np.ndarray:
    """Of the components ``where`` (of ``ks``) of an elementwise target, those where the
    backend's own value of the differenced function (the op at order 1, its derivative at
    order 2) is off mpmath's beyond the rounding of a backward-stable formula
    (:func:`forward_matches`): there the differences measure that error, not the derivative
    (torch's ``gelu`` at -8.3, computed from ``1 + erf``, is 9% off, and its derivative
    0.1%: a scaled FD of either is off the true next derivative by 1.5%, which reverse mode
    gets right).  Only for ops with an mpmath counterpart; ``where`` is left as it is
    elsewhere, and for an element mpmath cannot evaluate in the budget."""
    out = np.zeros(len(ks), dtype=bool)
    rule = extended.RULES.get(op.leaf)
    if rule is None or len(xs) != 1 or not where.any():
        return out
    try:
        import mpmath  # noqa: F401  (the extra that provides it may be absent)
    except ImportError:
        return out
    values = _flat(tgt.evaluate(xs))
    flat = np.asarray(xs[0], dtype=np.float64).ravel()
    deadline = time.monotonic() + extended.CALL_BUDGET_S
    for c in np.flatnonzero(where):
        x = float(flat[ks[c]])
        want = (extended.value(rule, x) if order == 1
                else _value_of(extended.derivative(rule, x, 1, deadline=deadline)))
        slope = _value_of(extended.derivative(rule, x, order, deadline=deadline))
        if want is not None and slope is not None:
            out[c] = not forward_matches(float(values[ks[c]]), x, want, slope)
    return out


def _value_of(d: extended.Derivative | None) -> float | None:
    return None if d is None else d.value


def _spacing(values: np.ndarray, dtype: str) -> np.ndarray:
    """The dtype's ulp at each value (its smallest subnormal at zero)."""
    t = numpy_dtype(dtype)
    v = np.abs(values).astype(t)
    sp = np.asarray(np.spacing(v), dtype=np.float64) if dtype != "bfloat16" else None
    if sp is None:  # ml_dtypes has no spacing: next representable above |v|
        sp = (np.nextafter(v.astype(np.float32), np.float32(np.inf)).astype(
            t).astype(np.float64) - v.astype(np.float64))
        sp = np.where(sp > 0, sp, np.abs(values) * 2.0 ** -7)
    return np.abs(sp)


def ulp_units(op: Op, xs: Sequence[np.ndarray], order: int, seed: int, dtype: str
              ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The float64 derivative per input (order 1: ``df/dx_j``, order 2: the diagonal of the
    second derivative with a cotangent of ones) and its *unit* in ``dtype`` per element:

        unit = ulp(d) + min_k |dd/dx_k| (ulp(x_k) + ulp(y) / |df/dx_k|)

    the spacing of the rounded derivative plus what one rounding of an input (``ulp(x_k)``) or
    of the output (``ulp(y)``, as the input change that moves ``y`` that much) moves it: a
    backward-stable rule computed in the dtype from its own ``x`` and ``y`` (``tanh``'s
    ``1 - y^2``) is off by a few units, not by a few ulps of ``d`` (at saturation
    ``1 - y^2`` rounds to 0).  ``dd/dx_k`` by :func:`gradcheck.oracle.scaled.scaled_central` of the
    float64 derivative along input ``k`` (its estimate plus its error), at order 1 of a
    one-input op at least the float64 second derivative by AD."""
    tgt = _target(op, xs, order, seed)
    first = tgt if order == 1 else _target(op, xs, 1, seed)
    ref = _unit_derivatives(tgt, xs, "float64")
    df = ref if order == 1 else _unit_derivatives(first, xs, "float64")
    y = np.asarray(tgt.backend.evaluate(op.fn, [np.asarray(a) for a in xs], "cpu")[0],
                   dtype=np.float64)
    scales = element_scales(list(xs))
    uy = _spacing(_rounded(y, dtype), dtype)
    # the next derivative by AD too where the op has one (FD of a float64 derivative that is
    # itself quantized, tanh' = 1 - y^2 at x = 17, sees a flat staircase)
    nxt = None
    if order == 1 and op.order2 and len(xs) == 1:
        try:
            nxt = np.abs(_unit_derivatives(_target(op, xs, 2, seed), xs, "float64")[0])
        except Exception:
            nxt = None
    units = []
    for j, d in enumerate(ref):
        best = np.full(d.shape, np.inf)
        for k in range(len(xs)):
            u = [s if i == k else np.zeros_like(s) for i, s in enumerate(scales)]
            def deriv(zs: list[np.ndarray], j: int = j) -> np.ndarray:
                return _unit_derivatives(tgt, zs, "float64")[j].ravel()

            est = scaled_central(deriv, list(xs), u)
            with np.errstate(all="ignore"):
                dd = (np.abs(est.value) + est.error).reshape(d.shape) / scales[k]
                if nxt is not None and nxt.shape == dd.shape:
                    dd = np.fmax(dd, nxt)
                term = dd * (_spacing(_rounded(xs[k], dtype), dtype)
                             + uy / np.abs(df[k]))
            best = np.fmin(best, np.where(np.isfinite(term), term, np.inf))
        units.append(_spacing(_rounded(d, dtype), dtype) + best)
    return ref, units


def _rounded(a: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(a, dtype=np.float64).astype(numpy_dtype(dtype)).astype(np.float64)


def ulp_checks(op: Op, arrays: Sequence[np.ndarray], dtype: str, order: int, seed: int,
               modes: Sequence[str]) -> list[CheckResult]:
    """The ``ulp`` checks of an elementwise op in a dtype below float64 (module docstring):
    each element of the derivative in ``dtype`` (reverse mode; forward mode per input)
    against the float64 one rounded to ``dtype``, in the units of :func:`ulp_units`."""
    if op.family != ELEMENTWISE or dtype == "float64" or (order == 2 and len(arrays) > 1):
        return []  # at order 2 of two inputs the cotangent of ones sums mixed partials
    xs = [_rounded(a, dtype) for a in arrays]  # the float64 reference at the dtype's inputs
    from gradcheck.backends.registry import get_backend

    backend = get_backend(op.backend)
    if not diagonal(backend, op, xs, backend.evaluate(op.fn, list(xs), "cpu")):
        return []
    ref, units = ulp_units(op, xs, order, seed, dtype)
    tgt = _target(op, xs, order, seed)
    bound = ULP_BOUND[(dtype, order)]
    out: list[CheckResult] = []
    paths: list[tuple[str, int | None]] = [("rev", None)]
    if "fwd" in modes:
        paths += [("fwd", j) for j in range(len(xs))]
    for path, j in paths:
        if path == "rev":
            low, want, unit = _unit_derivatives(tgt, xs, dtype), ref, units
        else:
            assert j is not None
            us = [np.full(a.shape, 1.0 if i == j else 0.0) for i, a in enumerate(xs)]
            low, want, unit = [tgt.jvp(xs, us, dtype)], [ref[j]], [units[j]]
        if any(np.size(a) != np.size(b) for a, b in zip(want, low, strict=True)):
            continue
        got = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in low])
        w64 = np.concatenate([np.asarray(r, dtype=np.float64).ravel() for r in want])
        un = np.concatenate([u.ravel() for u in unit])
        rounded = _rounded(w64, dtype)
        judged = np.isfinite(rounded) & np.isfinite(w64) & np.isfinite(un)
        with np.errstate(all="ignore"):
            errs = np.where(got == rounded, 0.0, np.abs(got - rounded) / un)
        label = "reverse" if path == "rev" else f"forward (input {j})"
        what = (f"{label} mode derivative per element in {dtype} vs the float64 derivative "
                f"rounded to {dtype}, at most {bound:g} units (ulp of the derivative plus "
                "one rounding of its inputs and output)")
        out.append(_verdict(CheckKind.ROUNDING, op, dtype, order, "ulp", got, rounded,
                            bound * un, judged, what, seed,
                            {"max_ulps": float(np.max(np.where(judged, errs, 0.0)))
                             if judged.any() else None, "path": path}))
    return out


def _unit_derivatives(tgt: _Target, xs: Sequence[np.ndarray], dtype: str) -> list[np.ndarray]:
    """The elementwise derivative per input: the VJP of a cotangent of ones."""
    outs = tgt.evaluate(xs, dtype)
    t = numpy_dtype(dtype)
    gs = tgt.backend.vjp(tgt.fn, tgt.args(xs, dtype), list(range(tgt.n)),
                         [np.ones(np.shape(o), dtype=t) for o in outs], "cpu")
    return [np.asarray(g, dtype=np.float64) for g in gs]


def elementwise_derivatives(op: Op, x: np.ndarray, order: int, seed: int
                            ) -> tuple[np.ndarray, np.ndarray] | None:
    """The backend's forward and its ``order``-th derivative per element (float64, reverse
    mode: the VJP of ones, at order 2 of the VJP of ones) of a one-input op that is
    elementwise in fact; ``None`` where it is not."""
    x = np.asarray(x, dtype=np.float64)
    tgt = _target(op, [x], order, seed)
    if not tgt.elementwise:
        return None
    forward = np.asarray(tgt.backend.evaluate(op.fn, [x], "cpu")[0], dtype=np.float64)
    return forward.ravel(), _unit_derivatives(tgt, [x], "float64")[0].ravel()


def forward_matches(forward: float, x: float, mp_value: float | None, slope: float) -> bool:
    """Whether the backend's forward at ``x`` equals mpmath's value within the rounding of a
    backward-stable float64 formula, ``ROUNDING_GAMMA (eps64 (|f| + |x f'|) + tiny64)``:
    then the mapping is the op itself, not a function of the same name with other fixed
    arguments (OpInfo's ``softplus`` sample has ``beta``) or an approximation (gelu's tanh)."""
    if mp_value is None or not math.isfinite(forward):
        return False
    bound = ROUNDING_GAMMA * (fd.EPS64 * (abs(mp_value) + abs(x * slope)) + TINY64)
    return abs(forward - mp_value) <= bound


def mpmath_checks(op: Op, arrays: Sequence[np.ndarray], order: int, seed: int
                  ) -> list[CheckResult]:
    """The ``mpmath`` check of a one-input elementwise op with a mapping (float64)."""
    rule = extended.RULES.get(op.leaf)
    if rule is None or op.family != ELEMENTWISE or len(arrays) != 1:
        return []
    try:
        import mpmath  # noqa: F401  (the extra that provides it may be absent)
    except ImportError:
        return []
    x = np.asarray(arrays[0], dtype=np.float64)
    values = elementwise_derivatives(op, x, order, seed)
    if values is None:
        return []
    forward, g = values
    idx = np.arange(x.size)[:MPMATH_LIMIT]
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
        allowed[b] = ROUNDING_GAMMA * (fd.EPS64 * (abs(d.value) + slope) + TINY64)
        judged[b] = abs(d.value) > ROUNDING_GAMMA * TINY64 or g[i] != 0
    if other and not judged.any():
        return []  # the op is not mpmath's function at this point (its fixed arguments)
    what = (f"{'first' if order == 1 else 'second'} derivative per element vs mpmath (its "
            "precision raised until its rounding is below 2^-60 of it), allowed "
            "ROUNDING_GAMMA (eps64 (|d| + |x d'|) + tiny64)")
    rev_kind = _kinds(order)[0]
    return [_verdict(rev_kind, op, "float64", order, "mpmath", g[idx], want,
                     allowed, judged, what, seed)]


def resolution_checks(op: Op, arrays: Sequence[np.ndarray], dtype: str, order: int,
                      seed: int, modes: Sequence[str]) -> list[CheckResult]:
    """Every resolution check that applies to ``op`` at this point (module docstring); a
    check that raises becomes an ``error`` result naming the oracle."""
    out: list[CheckResult] = []
    jobs: list[tuple[str, Callable[[], list[CheckResult]]]] = []
    if dtype == "float64":
        jobs.append(("scaled", lambda: scaled_checks(op, arrays, order, seed, modes)))
        jobs.append(("mpmath", lambda: mpmath_checks(op, arrays, order, seed)))
    else:
        jobs.append(("ulp", lambda: ulp_checks(op, arrays, dtype, order, seed, modes)))
    for oracle, job in jobs:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                out.extend(job())
        except Exception as exc:
            out.append(CheckResult(kind=CheckKind.CALL, status=Status.INCONCLUSIVE,
                                   backend=op.backend, dtype=dtype, name=op.name, order=order,
                                   seed=seed, details={"sweep_oracle": oracle},
                                   message=f"sweep {oracle} check could not run: "
                                           f"{type(exc).__name__}: {str(exc)[:200]}"))
    return out
