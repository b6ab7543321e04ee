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
# reported as they are (the rounding check of a half-precision sub-run: :func:`sub_dtype`)
_KEPT = frozenset({CheckKind.CALL, CheckKind.FWD_REV, CheckKind.ROUNDING})
#: the dtypes whose order-2 derivative is computed in the dtype too (:func:`sub_dtype`)
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
        run(g, inputs, sub_dtype(prep.dtype, first), cfg, sub)
        prep.recorder.absorb(sub.results)


def sub_dtype(dtype: str, first: str) -> str:
    """The dtype the order-2 sub-run checks ``g`` in: float64 (the rule), but for the VJP
    function of a half-precision check the dtype itself, so that its rounding check
    (:mod:`gradcheck.numeric.rounding`) judges the second derivative computed in the dtype
    against the same backend's float64 one: an ``inf`` or NaN Hessian in float16 whose float64
    twin is finite fails there (docs/error-model.md section 4c)."""
    return dtype if dtype in HALF and first == "vjp" else "float64"
