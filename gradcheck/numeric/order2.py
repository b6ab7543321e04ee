"""Order 2: the first-order checks of the backend's VJP (and JVP) written as a function.

``vjp_function(fn)`` is ``g(*args, *cotangents) -> J^T v``, itself differentiable; its VJP
checked against finite differences of ``g`` is the ``vjp_of_vjp`` check, its JVP the
``jvp_of_vjp`` check, and the JVP of ``jvp_function(fn)`` the ``jvp_of_jvp`` check.  The
sub-run records straight into the order-2 kinds (:class:`~.context.Relabel`): a result is
created once with its order-2 kind, order and subject."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from gradcheck.backends.guarded import AdapterFailure
from gradcheck.core.dtypes import float_info, numpy_dtype
from gradcheck.core.results import CheckKind, CheckResult, Status
from gradcheck.numeric.context import CheckConfig, Identity, Prepared, Recorder, Relabel

# (the function differentiated, the first-order kind of its check) -> the order-2 kind
KINDS: dict[tuple[str, CheckKind], CheckKind] = {
    ("vjp", CheckKind.VJP): CheckKind.VJP_OF_VJP,
    ("vjp", CheckKind.JVP): CheckKind.JVP_OF_VJP,
    ("jvp", CheckKind.JVP): CheckKind.JVP_OF_JVP,
}
_KEPT = frozenset({CheckKind.CALL, CheckKind.FWD_REV})  # reported as they are
#: the dtypes whose order-2 derivative is computed in the dtype too (:func:`half_non_finite`)
HALF = ("float16", "bfloat16")

# runs the first-order checks of ``fn`` at ``inputs`` into the recorder (never raises)
SubRun = Callable[[Any, Sequence[Any], str, CheckConfig, Recorder], Any]


def relabel(first: str) -> Relabel:
    """How the checks of the ``first`` ("vjp" / "jvp") function are reported."""
    kinds = {kind: order2 for (f, kind), order2 in KINDS.items() if f == first}
    return Relabel(kinds, _KEPT, {"order": 2, "first": first})


def _mode_kind(mode: str) -> CheckKind:
    return CheckKind.VJP if mode == "rev" else CheckKind.JVP


def second_order(prep: Prepared, run: SubRun) -> None:
    """The order-2 checks of ``prep``'s function (``run``: the first-order run)."""
    backend = prep.backend
    if not backend.supports_order2:
        prep.result(CheckKind.VJP_OF_VJP, Status.SKIPPED,
                    message=f"backend {backend.name!r} declares no order-2 support")
        return
    rng = np.random.default_rng(prep.cfg.seed + 1)
    n_args = len(prep.args64)
    for first in ("vjp", "jvp"):
        if first == "jvp" and not backend.supports_jvp:
            continue
        modes = tuple(m for m in prep.cfg.modes if (first, _mode_kind(m)) in KINDS)
        if not modes:
            continue
        g = (backend.vjp_function if first == "vjp" else backend.jvp_function)(
            prep.fn, prep.diff, n_args)
        if isinstance(g, AdapterFailure):
            if not g.unsupported:  # an adapter bug, not a missing composable derivative
                prep.result(CheckKind.CALL, Status.ERROR,
                            message=f"unexpected failure while checking: {g.text}")
                return
            kind = CheckKind.VJP_OF_VJP if first == "vjp" else CheckKind.JVP_OF_JVP
            prep.result(kind, Status.SKIPPED, message=g.reason,
                        details={"order": 2, "first": first})
            continue
        # the extra inputs drawn only for a function the engine gave (the seeded sequence)
        extra = ([rng.standard_normal(np.shape(o)) for o in prep.outs64] if first == "vjp"
                 else [rng.standard_normal(prep.args64[k].shape) for k in prep.diff])
        cfg = replace(prep.cfg, order=1, modes=modes, only_inputs=tuple(prep.diff),
                      order_level=1, name=f"{prep.cfg.name} [{first.upper()} as a function]")
        inputs = list(prep.args64) + extra
        outer = prep.recorder.identity
        # the sub-run's own identity (its inputs' shapes), reported under the outer name and
        # dtype; its own record (preparation reads what it recorded), then appended
        ident = Identity(outer.backend, prep.device, outer.dtype, outer.name, cfg.seed,
                         tuple(tuple(np.shape(a)) for a in inputs), cfg.reproducer,
                         cfg.test_id, cfg.input_paths)
        sub = Recorder(ident, relabel=relabel(first))
        run(g, inputs, "float64", cfg, sub)
        hints = getattr(backend.backend, "zero_hints", {})
        prep.recorder.absorb(_hinted(r, hints) for r in sub.results)
        if first == "vjp" and prep.dtype in HALF and prep.cfg.resolution:
            half_non_finite(prep, g, [*prep.args64, *(np.ones_like(e) for e in extra)])


def _hinted(r: CheckResult, hints: dict[str, str]) -> CheckResult:
    """``r`` with the engine's hint where it failed with an AD value of exactly 0 (a silent
    zero the engine is known to give there: :attr:`Backend.zero_hints`)."""
    hint = hints.get(r.kind.value)
    if hint is None or r.status is not Status.FAILED or r.actual != 0.0 or not r.expected:
        return r
    return replace(r, message=f"{r.message}; {hint}", details={**r.details, "hint": hint})


def half_non_finite(prep: Prepared, g: Any, inputs: Sequence[Any]) -> None:
    """The second derivative computed in float16/bfloat16 where the same backend's float64 one
    is finite and stays finite rounded to the dtype: an element that is ``inf`` or NaN in the
    dtype there fails (docs/error-model.md section 4c, class a; left out with
    ``check(resolution=False)``, as the sweep calls it).  One VJP of ``g`` (the VJP function
    of the checked function, its cotangent ``w`` of ones) per dtype, with a cotangent of ones:
    for an elementwise function each element is then the second derivative itself, whose
    overflow in the dtype excuses an ``inf`` (a smaller cotangent would make a product
    representable whose factor is not).  Only non-finite values are judged: a finite value's
    accuracy in the dtype is the first-order rounding and ulp checks' business, and an
    element whose float64 value overflows the dtype (or underflows it) is correctly ``inf``
    (or 0) there.  A VJP that
    cannot be computed in the dtype (it raises, or answers another dtype) is left out."""
    low = numpy_dtype(prep.dtype)
    with np.errstate(all="ignore"):
        d_inputs = [np.asarray(a).astype(low) for a in inputs]
        outs = prep.backend.evaluate(g, [a.astype(np.float64) for a in d_inputs], prep.device)
        if isinstance(outs, AdapterFailure):
            return
        v_d = [np.ones(np.shape(o), dtype=low) for o in outs]
        g_low = prep.backend.vjp(g, d_inputs, prep.diff, v_d, prep.device)
        g64 = prep.backend.vjp(g, [a.astype(np.float64) for a in d_inputs], prep.diff,
                               [v.astype(np.float64) for v in v_d], prep.device)
    if isinstance(g_low, AdapterFailure) or isinstance(g64, AdapterFailure):
        return
    for pos, k in enumerate(prep.diff):
        a = np.asarray(g_low[pos])
        if a.dtype != np.dtype(low):
            continue
        got = a.astype(np.float64)
        want = np.asarray(g64[pos], dtype=np.float64)
        with np.errstate(all="ignore"):
            near = want.astype(low).astype(np.float64)
        bad = np.isfinite(want) & np.isfinite(near) & ~np.isfinite(got)
        if not bad.any():
            continue
        flat = int(np.flatnonzero(bad.ravel())[0])
        idx = tuple(int(t) for t in np.unravel_index(flat, bad.shape))
        g_val, w_val, r_val = float(got.ravel()[flat]), float(want.ravel()[flat]), float(
            near.ravel()[flat])
        prep.result(
            CheckKind.ROUNDING, Status.FAILED, input_index=k, order=2, actual=g_val,
            expected=r_val, discrepancy=float("inf"), allowed=float(float_info(low).max),
            allowed_source=f"the float64 value rounded to {prep.dtype} is finite: any finite "
                           f"{prep.dtype} value is within range",
            details={"order": 2, "first": "vjp", "per_component": "rounding",
                     "non_finite": int(bad.sum()), "element": list(idx)},
            message=f"the second derivative (VJP of the VJP) w.r.t. input {k} computed in "
                    f"{prep.dtype} is {g_val} at element {list(idx)} ({int(bad.sum())} of "
                    f"{bad.size} elements non-finite) where the same function's float64 value "
                    f"{w_val:.17g} is finite and rounds to {r_val:.6g} in {prep.dtype}")
