"""The sweep's own resolution checks at a point, run beside :func:`gradcheck.check`.

The ``scaled`` and ``ulp`` checks are :mod:`gradcheck.numeric.resolution`, the one
implementation ``check`` runs too (:mod:`gradcheck.numeric.per_component`); this module
gives them the sweep's op, adds the ``mpmath`` check and makes the sweep's results.
``check`` called by the sweep does not run them (``resolution=False``): the sweep runs them
here, with mpmath.

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
  (:func:`gradcheck.oracle.extended.derivative`), allowed
  ``ROUNDING_GAMMA * (eps64 * (|d| + |x d'|) + tiny64)`` (the rounding of a backward-stable
  formula: its result and its argument each off by a few ulps; and below the smallest normal
  number, its absolute rounding: an element whose true derivative lies within it and whose
  rule gives 0 is not judged).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gradcheck.core.results import CheckResult, Status
from gradcheck.core.taxonomy import CheckKind
from gradcheck.numeric import resolution as shared
from gradcheck.numeric.resolution import (
    ALONE_LIMIT,
    MPMATH_LIMIT,
    ROW_LIMIT,
    TINY64,
    ULP_BOUND,
    ComponentVerdict,
    Subject,
    Target,
    forward_matches,
)
from gradcheck.oracle import extended
from gradcheck.sweep.inventory.records import ELEMENTWISE, LINALG, Op

__all__ = ["ALONE_LIMIT", "MPMATH_LIMIT", "ROW_LIMIT", "TINY64", "ULP_BOUND", "diagonal",
           "elementwise_derivatives", "forward_matches", "mpmath_checks", "resolution_checks",
           "scaled_checks", "ulp_checks", "ulp_units"]



def subject(op: Op) -> Subject:
    """The op as the shared checks see it: its backend instance and function, elementwise
    where its family is, normwise where it is a decomposition."""
    from gradcheck.backends.registry import get_backend

    return Subject(get_backend(op.backend), op.fn, elementwise=op.family == ELEMENTWISE,
                   normwise=op.family == LINALG, order2=bool(op.order2))


def diagonal(backend: Any, op: Op, arrays: Sequence[np.ndarray], outs: Sequence[Any],
             fn: Callable[..., Any] | None = None, fixed: Sequence[np.ndarray] = ()) -> bool:
    """Whether the op (or ``fn`` of ``arrays`` and the ``fixed`` trailing arguments, with
    outputs ``outs``) is elementwise in fact: an elementwise op by its family for which
    :func:`gradcheck.numeric.resolution.diagonal` holds."""
    return op.family == ELEMENTWISE and shared.diagonal(backend, fn or op.fn, arrays, outs,
                                                        fixed)


def _target(op: Op, arrays: Sequence[np.ndarray], order: int, seed: int) -> Target:
    return shared.target(subject(op), arrays, order, seed)


def _result(v: ComponentVerdict, op: Op, dtype: str, seed: int) -> CheckResult:
    """The sweep's result of one shared verdict (tagged ``details["sweep_oracle"]``)."""
    details: dict[str, Any] = {"sweep_oracle": v.oracle, **v.extra}
    if v.status is not Status.INCONCLUSIVE:
        details.update(components=v.judged, component=v.component)
    return CheckResult(kind=v.kind, status=v.status, backend=op.backend, dtype=dtype,
                       name=op.name, order=v.order, seed=seed,
                       allowed_source=f"sweep {v.oracle} check: {v.what}", actual=v.actual,
                       expected=v.expected, discrepancy=v.discrepancy,
                       relative_discrepancy=v.relative, allowed=v.allowed,
                       discrepancy_ratio=v.ratio, message=v.message(f"sweep {v.oracle} check"),
                       details=details)


def scaled_checks(op: Op, arrays: Sequence[np.ndarray], order: int, seed: int,
                  modes: Sequence[str]) -> list[CheckResult]:
    """The ``scaled`` checks in float64 (:func:`gradcheck.numeric.resolution.scaled_checks`),
    with the components where the op's own value is off mpmath's not judged."""

    def inexact(tgt: Target, xs: Sequence[np.ndarray], ks: np.ndarray, where: np.ndarray,
                order: int) -> np.ndarray:
        return _forward_off(op, tgt, xs, ks, where, order)

    return [_result(v, op, "float64", seed)
            for v in shared.scaled_checks(subject(op), arrays, order, seed, modes, inexact)]


def _forward_off(op: Op, tgt: Target, xs: Sequence[np.ndarray], ks: np.ndarray,
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
    values = shared.flat(tgt.evaluate(xs))
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


def ulp_units(op: Op, xs: Sequence[np.ndarray], order: int, seed: int, dtype: str
              ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """:func:`gradcheck.numeric.resolution.ulp_units` of the op."""
    return shared.ulp_units(subject(op), xs, order, seed, dtype)


def ulp_checks(op: Op, arrays: Sequence[np.ndarray], dtype: str, order: int, seed: int,
               modes: Sequence[str]) -> list[CheckResult]:
    """The ``ulp`` checks of an elementwise op in a dtype below float64
    (:func:`gradcheck.numeric.resolution.ulp_checks`)."""
    return [_result(v, op, dtype, seed)
            for v in shared.ulp_checks(subject(op), arrays, dtype, order, seed, modes)]


def elementwise_derivatives(op: Op, x: np.ndarray, order: int, seed: int
                            ) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`gradcheck.numeric.resolution.elementwise_derivatives` of the op."""
    return shared.elementwise_derivatives(subject(op), x, order, seed)


def mpmath_checks(op: Op, arrays: Sequence[np.ndarray], order: int, seed: int
                  ) -> list[CheckResult]:
    """The ``mpmath`` check of a one-input elementwise op with a mapping (float64):
    :func:`gradcheck.numeric.resolution.mpmath_checks`."""
    if op.family != ELEMENTWISE:
        return []
    return [_result(v, op, "float64", seed)
            for v in shared.mpmath_checks(subject(op), arrays, order, seed, op.leaf)]


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
