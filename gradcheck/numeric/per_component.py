"""The per-component stage of ``check``: the shared resolution checks
(:mod:`gradcheck.numeric.resolution`, the sweep's too) on the user's function, where the
projected comparisons are blind.

``check`` compares projections ``<v, J u>`` against the size of all their terms, with steps
from ``2^-3 max(1, rms(x))``.  That cannot see a component far below the others (a VJP that
drops a ``5e-17`` component next to components of 1), nor judge inputs near the ends of the
float64 range in every case (a scalar at 1e-300 or in the subnormals), and below float64 it
judges the low-precision derivative norm-wise, as a whole, never element by element against
the correctly rounded float64 value.  This stage runs, after the first-order (and order-2)
comparisons, where one of these can happen (:func:`reasons`):

* the dtype under test is float16 or bfloat16 (:data:`ULP_DTYPES`): the ``ulp`` checks of a
  function elementwise in fact (each element of the derivative in the dtype, orders 1 and 2,
  against the same function's float64 derivative correctly rounded, in ulp units; a
  non-finite element where the rounded float64 one is finite fails);
* the dtype under test is float32, float16 or bfloat16 (:data:`kernel_ulps.KERNEL_DTYPES`)
  and the adapter traces its engine's kernels: the ``kernel_ulp`` checks (each elementwise
  kernel the function runs, forward, reverse and forward mode, orders 1 and 2, judged on its
  own inputs against the same op in float64 correctly rounded, within a float32
  computation's error: :mod:`gradcheck.numeric.kernel_ulps`), run first;
* the nonzero magnitudes of the inputs, the outputs (and at order 2 the first derivative)
  span more than :data:`SPREAD` or reach below :data:`SMALL` or above :data:`LARGE`: the
  ``scaled`` checks (every output component against its own resolution, with steps relative
  to each element's magnitude, subnormal inputs at :data:`SUBNORMAL_SCALE`), in float64,
  reverse mode (a tangent scaled by ``|x|`` overflows the products of a correct forward-mode
  formula), a component whose differences are all exactly zero abstaining; where the function
  is not elementwise in fact, each component's rounding measured
  (:attr:`gradcheck.numeric.resolution.Subject.measured`);
* the function is, by its name, a scalar special function of
  :data:`gradcheck.oracle.extended.RULES` (an engine's own ``torch.expm1``,
  ``jax.numpy.expm1``, ``jax.nn.elu``, ``torch.special.expm1``: :func:`leaf_name`) of one
  input, in float64, and mpmath is installed: the ``mpmath`` check (each element of the
  derivative, orders 1 and 2, against mpmath's at the precision it needs, where the
  function's own value is mpmath's: a derivative far below the value, ``expm1'(-100) =
  3.7e-44``, which no finite difference of the function resolves), on the elements where the
  derivative is so hidden (:func:`gradcheck.numeric.resolution.hidden`), allowed its rounding
  plus :data:`~gradcheck.numeric.resolution.MPMATH_RELATIVE` of it.

A failed verdict is a result of the compared kind (``vjp``, ``vjp_of_vjp``, ``rounding``)
with ``details["per_component"]`` naming the oracle and ``details["per_component_reason"]``
why the stage ran, recorded where no comparison of that kind and order failed already.  A
verdict that passed or abstained is not recorded: the projected comparisons' results stand
as they are (the stage adds detections, never changes what was decided).  Functions whose
inputs are not all floating and differentiable, engines without float64, and
``resolution=False`` skip the stage.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from gradcheck.core.results import CheckResult, Status
from gradcheck.numeric import kernel_ulps, resolution
from gradcheck.numeric.context import Prepared
from gradcheck.numeric.resolution import ComponentVerdict, Subject
from gradcheck.oracle import extended, fd

#: nonzero magnitudes (inputs, outputs, first derivatives) spanning more than this ratio run
#: the scaled checks: the projected comparison resolves about ``sqrt(eps64)`` of its largest
#: terms (its FD error), so a component more than ``2^26`` below the largest is invisible
SPREAD = 2.0 ** 26
#: the dtypes the ulp checks judge: float32 keeps the norm-wise rounding check alone (correct
#: float32 kernels with cancellation, torch's i0e', i1e' and log_ndtr' at -30, are 45 to 115
#: units off: benchmarks/per_component_false_alarms.py, docs/error-model.md section 4c)
ULP_DTYPES = ("float16", "bfloat16")
#: a nonzero magnitude below this (or above :data:`LARGE`) runs the scaled checks: steps of
#: ``2^-3 max(1, rms(x))`` are far above such an input, and FD of a function of it loses
#: precision to the step (``exp`` at -700 differenced at steps of 87)
SMALL = 2.0 ** -64
LARGE = 2.0 ** 64
#: the direction's scale at a subnormal input: the differences of values rounded by up to the
#: smallest normal number (a flush-to-zero engine) resolve the slope only where the step is
#: far above it; 2^60 above it, the smallest steps of the scaled families (2^-15 and 3^-11 of
#: this) move the input by about 1e-295, and a value's absolute rounding is about 1e-13 of the
#: change of a function of slope 1
SUBNORMAL_SCALE = fd.TINY64 * 2.0 ** 60


def applies(prep: Prepared) -> bool:
    """Whether the stage can run: every input floating and differentiable, every output
    floating, a float64 engine (no ``oracle_forward``), at the top level of a check."""
    cfg = prep.cfg
    return (cfg.resolution and cfg.order_level == 0 and prep.oracle is None
            and prep.rule_dtype == "float64"
            and tuple(prep.diff) == tuple(range(len(prep.args64)))
            and tuple(prep.float_outs) == tuple(range(len(prep.outs64))))


def _range(arrays: Sequence[np.ndarray]) -> tuple[float, float] | None:
    """The smallest and the largest finite nonzero ``|a|`` over ``arrays`` (None where there
    is none): ``|a|``, its min and max, per array (an array with an infinite, NaN or zero
    element indexes out the others first), no concatenated copy of them all."""
    lo, hi = np.inf, 0.0
    for a in arrays:
        m = np.abs(np.asarray(a, dtype=np.float64)).ravel()
        if not m.size:
            continue
        bottom, top = float(m.min()), float(m.max())
        if not (bottom > 0 and np.isfinite(top)):
            m = m[np.isfinite(m) & (m > 0)]
            if not m.size:
                continue
            bottom, top = float(m.min()), float(m.max())
        lo, hi = min(lo, bottom), max(hi, top)
    return None if hi == 0.0 else (lo, hi)


def extreme(arrays: Sequence[np.ndarray]) -> str | None:
    """Why the magnitudes of ``arrays`` call for the scaled checks, or ``None``."""
    got = _range(arrays)
    if got is None:
        return None
    lo, hi = got
    if lo < SMALL:
        return f"a magnitude of {lo:.3g} (below 2^-64)"
    if hi > LARGE:
        return f"a magnitude of {hi:.3g} (above 2^64)"
    if hi / lo > SPREAD:
        return f"magnitudes from {lo:.3g} to {hi:.3g} (more than 2^26 apart)"
    return None


def _first_derivative(prep: Prepared, subject: Subject) -> list[np.ndarray]:
    tgt = resolution.target(subject, prep.args64, 2, prep.cfg.seed)
    return tgt.evaluate(list(prep.args64))


def reasons(prep: Prepared, subject: Subject, order: int) -> str | None:
    """Why the scaled checks run at ``order`` (module docstring), or ``None``."""
    why = extreme([*prep.args64, *prep.outs64])
    if why is None and order == 2:
        why = extreme(_first_derivative(prep, subject))
        why = None if why is None else f"first derivatives with {why}"
    return why


def run(prep: Prepared) -> None:
    """The stage (module docstring); never raises for what the function or the adapter does:
    a check that cannot run records nothing (the projected comparisons stand)."""
    if not applies(prep):
        return
    subject = Subject(prep.backend.backend, prep.fn, elementwise=True, measured=True,
                      order2=prep.cfg.order >= 2 and prep.backend.supports_order2,
                      device=prep.device, ones_in_fact=True)
    modes = tuple(m for m in prep.cfg.modes if m == "rev" or prep.backend.supports_jvp)
    if "rev" not in modes:
        return
    orders = [1] + ([2] if prep.cfg.order >= 2 and prep.backend.supports_order2 else [])
    leaf = leaf_name(prep.fn)
    for order in orders:
        if leaf is not None and prep.dtype == "float64" and len(prep.args64) == 1:
            _record(prep, _mpmath(prep, subject, order, leaf), ("rev",), "")
        if prep.dtype in kernel_ulps.KERNEL_DTYPES:
            _record(prep, _kernels(prep, subject, order), modes, "")
        if prep.dtype in ULP_DTYPES:
            _record(prep, _ulp(prep, subject, order), modes, "")
        why = _guarded(partial(reasons, prep, subject, order))
        if isinstance(why, str):
            # reverse mode only (:func:`_scaled`): no forward-mode retry to fall back on
            _record(prep, _scaled(prep, subject, order), ("rev",), why)


Job = Callable[[tuple[str, ...]], list[ComponentVerdict]]  # modes -> verdicts


def _kernels(prep: Prepared, subject: Subject, order: int) -> Job:
    def job(modes: tuple[str, ...]) -> list[ComponentVerdict]:
        return kernel_ulps.kernel_checks(subject, prep.args64, prep.dtype, order,
                                         prep.cfg.seed, modes)

    return job


def leaf_name(fn: Callable[..., object]) -> str | None:
    """The scalar special function ``fn`` is by its name (``special_`` dropped:
    ``torch.special.expm1``), where :data:`gradcheck.oracle.extended.RULES` has it; None for a
    lambda or any other name.  (A function of that name that is another function is not
    judged: the mpmath check compares the function's own value with mpmath's first.)"""
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return None
    name = name.removeprefix("special_")
    return name if name in extended.RULES else None


def _mpmath(prep: Prepared, subject: Subject, order: int, leaf: str) -> Job:
    def job(modes: tuple[str, ...]) -> list[ComponentVerdict]:
        return resolution.mpmath_checks(subject, prep.args64, order, prep.cfg.seed, leaf,
                                        resolution.MPMATH_RELATIVE, hidden_only=True)

    return job


def _ulp(prep: Prepared, subject: Subject, order: int) -> Job:
    def job(modes: tuple[str, ...]) -> list[ComponentVerdict]:
        return resolution.ulp_checks(subject, prep.args64, prep.dtype, order, prep.cfg.seed,
                                     modes)

    return job


def _scaled(prep: Prepared, subject: Subject, order: int) -> Job:
    def job(modes: tuple[str, ...]) -> list[ComponentVerdict]:
        # reverse mode only: a tangent scaled by |x| (1e200 at 1e200) overflows the products
        # of a correct forward-mode formula (x t), which the projected JVP check does not
        return resolution.scaled_checks(subject, prep.args64, order, prep.cfg.seed, ("rev",),
                                        subnormal_scale=SUBNORMAL_SCALE, flat_abstains=True)

    return job


def _guarded(job: Callable[[], object]) -> object:
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return job()
    except Exception:  # the function or adapter failed here: the projected results stand
        return None


def _record(prep: Prepared, job: Job,
            modes: tuple[str, ...], why: str) -> None:
    """The verdicts of ``job(modes)`` recorded (module docstring); where forward mode fails
    for this function (a custom rule without one), those of reverse mode alone."""
    verdicts = _guarded(lambda: job(modes))
    if not isinstance(verdicts, list) and modes != ("rev",):
        verdicts = _guarded(lambda: job(("rev",)))
    if not isinstance(verdicts, list):
        return
    for v in verdicts:
        if v.status is Status.FAILED and not _failed(prep.recorder.results, v):
            _result(prep, v, why)


def _failed(results: Sequence[CheckResult], v: ComponentVerdict) -> bool:
    """Whether a comparison of ``v``'s kind and order already failed (then the stage adds
    nothing: the failure is reported, with its reproducer)."""
    return any(r.kind is v.kind and r.order == v.order and r.status is Status.FAILED
               for r in results)


def _result(prep: Prepared, v: ComponentVerdict, why: str) -> None:
    label = f"per-component {v.oracle} check"
    details = {"per_component": v.oracle, "components": v.judged, "component": v.component,
               **v.extra}
    if why:
        details["per_component_reason"] = why
    message = v.message(label)
    if why:
        message += f" (run because of {why})"
    prep.result(v.kind, v.status, message=message, actual=v.actual, expected=v.expected,
                discrepancy=v.discrepancy, relative_discrepancy=v.relative, allowed=v.allowed,
                discrepancy_ratio=v.ratio, allowed_source=f"{label}: {v.what}",
                order=v.order, details=details)
