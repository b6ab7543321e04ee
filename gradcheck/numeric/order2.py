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
from gradcheck.core.results import CheckKind, Status
from gradcheck.numeric.context import CheckConfig, Identity, Prepared, Recorder, Relabel

# (the function differentiated, the first-order kind of its check) -> the order-2 kind
KINDS: dict[tuple[str, CheckKind], CheckKind] = {
    ("vjp", CheckKind.VJP): CheckKind.VJP_OF_VJP,
    ("vjp", CheckKind.JVP): CheckKind.JVP_OF_VJP,
    ("jvp", CheckKind.JVP): CheckKind.JVP_OF_JVP,
}
_KEPT = frozenset({CheckKind.CALL, CheckKind.FWD_REV})  # reported as they are
#: the dtypes whose order-2 derivative is computed in the dtype too (:func:`half_rounding`)
HALF = ("float16", "bfloat16")

# runs the first-order checks of ``fn`` at ``inputs`` into the recorder (never raises)
SubRun = Callable[[Any, Sequence[Any], str, CheckConfig, Recorder], None]


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
                         cfg.test_id)
        sub = Recorder(ident, relabel=relabel(first))
        run(g, inputs, "float64", cfg, sub)
        prep.recorder.absorb(sub.results)
        if first == "vjp" and prep.dtype in HALF and prep.cfg.resolution:
            half_rounding(prep, g, inputs, cfg, ident, run)



def half_rounding(prep: Prepared, g: Any, inputs: Sequence[Any], cfg: CheckConfig,
                  ident: Identity, run: SubRun) -> None:
    """The second derivative computed in float16/bfloat16 against the same backend's float64
    one: the VJP function ``g`` run again in the dtype, keeping only its rounding check
    (:mod:`gradcheck.numeric.rounding`), reported as a ``rounding`` result of order 2.  The
    rule was checked in float64 above; this sees an ``inf`` or NaN Hessian that only the
    dtype computes, through any composition (docs/error-model.md section 4c; left out with
    ``check(resolution=False)``, as the sweep calls it).  A rounding
    comparison that could not be made (the dtype's order-2 path raised or returned another
    dtype) is left out: order 2 in the dtype is a detection, not a requirement."""
    keep = Relabel({}, frozenset({CheckKind.ROUNDING}), {"order": 2, "first": "vjp"})
    half = Recorder(ident, relabel=keep)
    run(g, inputs, prep.dtype, replace(cfg, modes=("rev",)), half)
    prep.recorder.absorb(r for r in half.results
                         if r.status in (Status.FAILED, Status.PASSED))
