"""The public entry points: :func:`check` and :func:`assert_gradients`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import stream
from .backends.base import Backend, float_bits, is_complex, is_floating
from .backends.numpy_backend import NumpyFunction
from .backends.registry import get_backend
from .checks.numeric import CheckConfig, run_numeric_checks
from .errors import GradientMismatch, InvalidArgument, NothingDecided
from .results import CheckResult, Report, Status

_MODES = ("rev", "fwd")


def _to_numpy(backend: Backend, value: Any, k: int) -> np.ndarray:
    native = backend.native_to_numpy(value)
    if native is not None:
        return native
    try:
        return np.asarray(value)
    except Exception as exc:
        raise InvalidArgument(f"inputs[{k}]={type(value).__name__} cannot be converted to an "
                              f"array: {exc}") from exc


def _reject_complex(arrays: Sequence[np.ndarray]) -> None:
    """Complex inputs are rejected, never left out silently: see docs/error-model.md."""
    for k, a in enumerate(arrays):
        if is_complex(a.dtype):
            raise InvalidArgument(
                f"inputs[{k}] has the complex dtype {a.dtype.name}: gradcheck does not check "
                "complex derivatives (engines differ in their convention: for a real loss "
                "PyTorch's gradient is the conjugate of JAX's). Split it into real and "
                "imaginary parts: pass x.real and x.imag as two floating inputs and build the "
                "complex value inside fn (torch.complex(re, im), or re + 1j * im in JAX), and "
                "return a complex output as its .real and .imag")


def _default_dtype(backend: Backend, arrays: Sequence[np.ndarray]) -> str:
    """The widest floating dtype of the inputs (ml_dtypes' bfloat16 included), float64 for
    none; an input dtype the backend cannot check is an InvalidArgument."""
    floats = [(k, a.dtype) for k, a in enumerate(arrays) if is_floating(a.dtype)]
    if not floats:
        return "float64"
    k, widest = max(floats, key=lambda t: float_bits(t[1]))
    if widest.name not in backend.dtypes:
        raise InvalidArgument(
            f"inputs[{k}] has dtype {widest.name}, which backend {backend.name!r} cannot check "
            f"(its dtypes: {', '.join(backend.dtypes)}): pass dtype= one of those (the inputs "
            "are rounded to it) or cast the input, e.g. x.astype(np.float32)")
    return widest.name


def _reproducer(fn: Callable, arrays: Sequence[np.ndarray], backend: str, device: str,
                dtype: str, modes: tuple[str, ...], order: int, seed: int,
                fast: bool = False) -> str:
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    if isinstance(fn, NumpyFunction):  # named after its forward, defined where that was
        fn = fn.forward
    if isinstance(owner, type):  # a bound classmethod such as MyFunction.apply
        name = f"{owner.__qualname__}.{fn.__name__}"
        fn = owner
    module = getattr(fn, "__module__", None)
    where = f"{module}.{name}" if module and module != "__main__" else name
    shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for a in arrays)
    return (f"gradcheck.check({where}, *inputs, backend={backend!r}, device={device!r}, "
            f"dtype={dtype!r}, modes={modes!r}, order={order}, seed={seed}"
            f"{', fast=True' if fast else ''})"
            f"  # inputs: {shapes}")


def _validate(backend: Backend, device: str, dtype: str | None, modes: Sequence[str], order: int,
              probes: int, atol: float | None, rtol: float | None) -> tuple[str, ...]:
    devices = backend.devices()
    if device not in devices:
        raise InvalidArgument.choice("device", device, devices)
    if dtype is not None and dtype not in backend.dtypes:
        raise InvalidArgument.choice("dtype", dtype, backend.dtypes)
    if isinstance(modes, str):
        modes = (modes,)
    modes = tuple(modes)
    if not modes or any(m not in _MODES for m in modes):
        raise InvalidArgument.choice("modes", modes, _MODES)
    if order not in (1, 2):
        raise InvalidArgument.choice("order", order, (1, 2))
    if probes < 1:
        raise InvalidArgument(f"probes={probes!r} must be at least 1")
    for name, tol in (("atol", atol), ("rtol", rtol)):
        if tol is not None and not (tol >= 0 and np.isfinite(tol)):
            raise InvalidArgument(f"{name}={tol!r} must be a finite number >= 0")
    return modes


def check(
    fn: Callable,
    *inputs: Any,
    backend: str | Backend,
    device: str = "cpu",
    dtype: str | None = None,
    modes: Sequence[str] = _MODES,
    order: int = 1,
    seed: int = 0,
    atol: float | None = None,
    rtol: float | None = None,
    probes: int = 3,
    name: str | None = None,
    fast: bool = False,
) -> Report:
    """Check the derivatives of ``fn`` at ``inputs`` against the finite-difference oracle.

    ``fn`` is written for ``backend`` (a name such as ``"torch"``, ``"jax"``, ``"numpy"``, a
    ``"package.module:Attr"`` path, or an adapter instance) and may take and return several
    arrays; integer inputs pass through undifferentiated.  ``dtype`` (default: the inputs' own
    floating dtype) is the precision under test; below float64 the rule is checked in float64
    and the rounding of the low-precision derivative separately.  ``modes`` chooses reverse
    (``"rev"``) and/or forward (``"fwd"``) mode; ``order=2`` adds VJP-of-VJP, JVP-of-VJP and
    JVP-of-JVP checks.  ``seed`` fixes the random probe vectors.  ``atol``/``rtol`` replace the
    error model by ``atol + rtol * |expected|`` exactly.

    ``fast=True`` screens first: the same probes compared against a cheap finite-difference
    estimate (8 evaluations per probe, projected before extrapolating), the backend's primary
    derivative paths only.  It passes only where that estimate converged below ``1e-11`` of the
    compared terms and every comparison agrees; anything else (a disagreement, a suspected
    kink, a float32/16 dtype) runs the full check, whose results are returned (with
    ``details["fast_screen"]`` saying why).  What a passing screen does not run: the
    eager-vs-functional and forward-vs-reverse comparisons (``docs/performance.md``).

    Returns a :class:`Report`; ``report.passed`` is False if any check failed or errored.
    Never raises for a misbehaving ``fn`` or adapter (that is an ``error`` result); raises
    :class:`InvalidArgument` for invalid arguments.
    """
    be = get_backend(backend)
    modes_t = _validate(be, device, dtype, modes, order, probes, atol, rtol)
    arrays = [_to_numpy(be, x, k) for k, x in enumerate(inputs)]
    if not arrays:
        raise InvalidArgument("inputs=() : check needs at least one input array")
    _reject_complex(arrays)
    dt = dtype or _default_dtype(be, arrays)
    owner = getattr(fn, "__self__", None)
    fn_name = name or (owner.__name__ if isinstance(owner, type) else None) or getattr(
        fn, "__name__", None) or type(fn).__name__
    cfg = CheckConfig(
        modes=modes_t, order=order, seed=seed, atol=atol, rtol=rtol, probes=probes,
        name=fn_name, fast=bool(fast),
        reproducer=_reproducer(fn, arrays, be.name, device, dt, modes_t, order, seed, fast),
    )
    results = run_numeric_checks(be, fn, arrays, device=device, dtype=dt, config=cfg)
    return Report(stream.record_many(results))  # appended to the active result stream, if any


def format_failure(report: Report) -> str:
    """The multi-line message of :class:`GradientMismatch` for a failed report."""
    lines = [f"gradient check failed: {report.summary()}"]
    for r in report.failures:
        lines.append("")
        computed = r.details.get("computed_in")
        dtype = f"{r.dtype} (checked in {computed})" if computed else r.dtype
        lines.append(f"* {r.subject} [{r.status.value}] ({r.name}, backend={r.backend}, "
                     f"device={r.device}, dtype={dtype}, seed={r.seed})")
        if r.status is Status.FAILED and r.discrepancy is not None:
            d = r.details
            what, by_ad, by_ref = _COMPARED.get(r.kind, ("value", "actual", "expected"))
            probe = f" (probe {d['probe'] + 1} of {d['probes']})" if "probe" in d else ""
            lines.append(f"  compared {what}{probe}: {r.actual:.10g} {by_ad} vs "
                         f"{r.expected:.10g} {by_ref}")
            lines.append(f"  max abs discrepancy {d.get('max_abs_discrepancy', r.discrepancy):.3g}"
                         f", relative {d.get('max_rel_discrepancy', r.relative_discrepancy):.3g}")
            lines.append(f"  allowed {r.allowed:.3g} from {r.allowed_source}; "
                         f"ratio {r.discrepancy_ratio:.3g}")
            if r.worst:
                lines.append(f"  worst elements ({by_ad.removeprefix('by ')} vs "
                             f"{by_ref.removeprefix('by ')}, allowed):")
                for w in r.worst:
                    lines.append(f"    {_element(r, w.index)}: {w.actual:.10g} vs "
                                 f"{w.expected:.10g} (allowed {w.allowed:.3g})")
            elif "localized" in d:
                lines.append(f"  localization: {d['localized']}")
        else:
            lines.append(f"  {r.message}")
        if r.reproducer:
            lines.append(f"  reproduce: {r.reproducer}")
    return "\n".join(lines)


_COMPARED = {
    "vjp": ("<J^T v, u>", "by reverse mode", "by finite differences"),
    "jvp": ("<v, J u>", "by forward mode", "by finite differences"),
    "fwd_rev": ("<v, J u>", "by forward mode", "by reverse mode"),
    "eager_func": ("<J^T v, u>", "by the alternative path", "by the VJP"),
    "rounding": ("||J^T v||", "in the dtype under test", "in float64"),
    "vjp_of_vjp": ("the VJP's <J^T v, u>", "by reverse mode", "by finite differences"),
    "jvp_of_vjp": ("the VJP's <v, J u>", "by forward mode", "by finite differences"),
    "jvp_of_jvp": ("the JVP's <v, J u>", "by forward mode", "by finite differences"),
}


def _element(r: CheckResult, index: tuple[int, ...]) -> str:
    """``output[i, j] / input[k]`` for a Jacobian element, ``input[k]`` for a gradient one."""
    n_in = len(r.shapes[r.input_index]) if r.input_index is not None and r.input_index < len(
        r.shapes) else 0
    inp = f"input {r.input_index}{list(index[len(index) - n_in:])}"
    if len(index) > n_in:
        return f"d output {r.output_index}{list(index[:len(index) - n_in])} / d {inp}"
    return inp


def format_nothing_decided(report: Report) -> str:
    """The message of :class:`NothingDecided`: why each result decided nothing."""
    lines = [f"gradient check decided nothing: {report.summary()}; no comparison passed, so "
             "nothing was shown correct"]
    for r in report.undecided:
        lines += ["", f"* {r.subject} [{r.status.value}] ({r.name}, backend={r.backend}, "
                      f"device={r.device}, dtype={r.dtype}, seed={r.seed})", f"  {r.message}"]
    return "\n".join(lines)


def assert_gradients(fn: Callable, *inputs: Any, **kwargs: Any) -> Report:
    """Like :func:`check`, but raise :class:`GradientMismatch` if any check fails or errors,
    and :class:`NothingDecided` (a ``GradientMismatch``) if no comparison was decided.

    The message names each failing check ("VJP of output 0 w.r.t. input 1"), the max absolute
    and relative discrepancy, the allowed error and where it came from, the worst elements, the
    seed, dtype and device, and a runnable reproducer.  A run whose results are all
    inconclusive or skipped (an all-NaN function, ``modes=("fwd",)`` without forward mode)
    raises ``NothingDecided`` listing each reason: it is never green on nothing.  Returns the
    report when nothing failed and at least one comparison passed (``report.summary()`` counts
    the ones not decided).
    """
    __tracebackhide__ = True
    report = check(fn, *inputs, **kwargs)
    if not report.passed:
        raise GradientMismatch(format_failure(report), report)
    if not report.decided:
        raise NothingDecided(format_nothing_decided(report), report)
    return report
