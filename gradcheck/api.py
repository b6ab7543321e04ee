"""The public entry points: :func:`check` and :func:`assert_gradients`."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gradcheck import stream
from gradcheck._reproducer import Reproducer, heading
from gradcheck._reproducer import build as _reproducer_build
from gradcheck.backends import trees
from gradcheck.backends._cache import FunctionCache
from gradcheck.backends.base import Backend
from gradcheck.backends.guarded import AdapterFailed, AdapterFailure, GuardedBackend
from gradcheck.backends.registry import get_backend
from gradcheck.core import arguments
from gradcheck.core.dtypes import float_bits, is_floating
from gradcheck.core.errors import GradientMismatch, InvalidArgument, NothingDecided
from gradcheck.core.results import CheckResult, Report, Shown, Status, number, shown, shown_element
from gradcheck.core.rules import NumpyFunction
from gradcheck.core.taxonomy import INFO, CheckKind
from gradcheck.numeric import CheckConfig, run_numeric_checks
from gradcheck.numeric.bisection import PREFIX as BISECTED
from gradcheck.oracle.error_model import DEFAULT_MODEL, ErrorModel, validated_model

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


def _rebuilt(value: Any, name: str, paths: Sequence[str]) -> str:
    """The reproducer's expression of one nested or complex input (docs/pytrees.md)."""
    try:
        return trees.source(value, name, paths)
    except ValueError as exc:  # a node only the engine knows: the script says so
        return f"None  # {exc}: build {name} here from leaves"


def _structured(be: Backend, fn: Callable, call: Callable, inputs: Sequence[Any],
                 names: Sequence[str]) -> trees.FlatInputs:
    """Nested or complex inputs as real arrays named by path (docs/pytrees.md,
    docs/complex.md); refused where the backend cannot check them."""
    if isinstance(fn, NumpyFunction):
        raise InvalidArgument(
            "a NumpyFunction takes flat real arrays (its vjp receives and returns one array per "
            "input): pass the arrays of a nested input one by one, and a complex one as its "
            ".real and .imag; nested and complex inputs are checked on the torch and jax "
            "backends")
    flat = trees.flatten_inputs(be, call, inputs, names)
    if flat.call.complex_parts and be.complex_convention is None:
        k = next(p for p in flat.paths if p.endswith(".imag"))
        raise InvalidArgument(
            f"input {k.removesuffix('.imag')} is complex, and backend {be.name!r} declares no "
            "convention for complex derivatives (Backend.complex_convention): pass its .real "
            "and .imag as two floating inputs and build the complex value inside fn; the "
            "torch and jax backends check complex inputs as they are (docs/complex.md)")
    return flat


def _plain(inputs: Sequence[Any]) -> bool:
    """Every input a real NumPy array (a leaf for every engine's pytree utility, never complex):
    nothing to flatten, without asking the engine."""
    return all(isinstance(x, np.ndarray) and x.dtype.kind in "fiub" for x in inputs)


def _default_dtype(backend: Backend, arrays: Sequence[np.ndarray],
                   paths: Sequence[str] | None = None) -> str:
    """The widest floating dtype of the inputs (ml_dtypes' bfloat16 included), float64 for
    none; an input dtype the backend cannot check is an InvalidArgument."""
    floats = [(k, a.dtype) for k, a in enumerate(arrays) if is_floating(a.dtype)]
    if not floats:
        return "float64"
    k, widest = max(floats, key=lambda t: float_bits(t[1]))
    if widest.name not in backend.dtypes:
        where = f"inputs[{k}]" if paths is None else f"input {paths[k]}"
        raise InvalidArgument(
            f"{where} has dtype {widest.name}, which backend {backend.name!r} cannot check "
            f"(its dtypes: {', '.join(backend.dtypes)}): pass dtype= one of those (the inputs "
            "are rounded to it) or cast the input, e.g. x.astype(np.float32)")
    return widest.name


def _reproducer(fn: Callable, arrays: Sequence[np.ndarray], backend: str, device: str,
                dtype: str, modes: tuple[str, ...], order: int, seed: int,
                kwargs: Mapping[str, Any] | None = None,
                rebuild: Sequence[str] | None = None, **optional: Any) -> Reproducer:
    """The runnable reproducer script (:mod:`gradcheck._reproducer`); ``optional`` holds the
    other arguments of :func:`check`, written out where they differ from the default."""
    defaults = {"atol": None, "rtol": None, "probes": 3, "name": None, "fast": False,
                "timeout": None, "error_model": DEFAULT_MODEL, "wrt": None,
                "resolution": True}
    options = {"backend": backend, "device": device, "dtype": dtype, "modes": modes,
               "order": order, "seed": seed,
               **{k: v for k, v in optional.items() if v != defaults.get(k)}}
    return _reproducer_build(fn, arrays, options, kwargs, rebuild)


class _WithKwargs:
    """``fn`` with fixed keyword arguments: ``fn(*args, **kwargs)`` on every evaluation (the
    keyword arguments are constants, never differentiated)."""

    def __init__(self, fn: Callable, kwargs: Mapping[str, Any]) -> None:
        self.fn, self.kwargs = fn, dict(kwargs)
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args, **self.kwargs)


# the same wrapper object for the same function and (hashable) keyword arguments: adapters key
# their compiled transforms on the function object, so checking again does not trace again
_BOUND = FunctionCache(size=64)


def _bind_numpy(f: NumpyFunction, kw: dict[str, Any]) -> NumpyFunction:
    """A :class:`NumpyFunction` whose forward and hand-written rules (order 2 included) all
    receive the keyword arguments."""
    rule = f.vjp
    vjp = (_bind_numpy(rule, kw) if isinstance(rule, NumpyFunction)
           else lambda a, c: rule(a, c, **kw))
    jvp = None if f.jvp is None else (lambda a, t, tangent=f.jvp: tangent(a, t, **kw))
    return NumpyFunction(lambda *a: f.forward(*a, **kw), vjp, jvp, name=f.__name__)


def _with_kwargs(fn: Callable, kwargs: Mapping[str, Any] | None) -> Callable:
    if kwargs is None:
        return fn
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise InvalidArgument(f"kwargs={kwargs!r} must be a mapping of keyword names to values, "
                              "e.g. kwargs={'dim': 1}")
    if not kwargs:
        return fn
    kw = dict(kwargs)
    try:
        # with the types: 1, 1.0 and True are equal keys but different arguments
        key: Any = tuple((k, type(v), v) for k, v in sorted(kw.items()))
        hash(key)
    except TypeError:  # an array among the values: a fresh wrapper (it may change in place)
        key = None
    build = (lambda: _bind_numpy(fn, kw)) if isinstance(fn, NumpyFunction) else (
        lambda: _WithKwargs(fn, kw))
    return build() if key is None else _BOUND.get(fn, ("kwargs", key), build)


def _validate(backend: Backend, device: str, dtype: str | None, modes: Sequence[str], order: int,
              probes: int, atol: float | None, rtol: float | None) -> tuple[str, ...]:
    devices = GuardedBackend(backend).devices()
    if isinstance(devices, AdapterFailure):  # a broken adapter: an error result, not a crash
        raise AdapterFailed(devices)
    if device not in devices:
        raise InvalidArgument.choice("device", device, devices)
    if dtype is not None and dtype not in backend.dtypes:
        raise InvalidArgument.choice("dtype", dtype, backend.dtypes)
    if isinstance(modes, str):
        modes = (modes,)
    modes = tuple(modes)
    if not modes or any(m not in _MODES for m in modes):
        raise InvalidArgument.choice("modes", modes, _MODES)
    if isinstance(order, bool) or order not in (1, 2) or not isinstance(order, numbers.Integral):
        raise InvalidArgument.choice("order", order, (1, 2))
    arguments.integer("probes", probes, minimum=1)
    arguments.tolerance("atol", atol)
    arguments.tolerance("rtol", rtol)
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
    kwargs: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    error_model: ErrorModel | None = None,
    wrt: int | str | Sequence[int | str] | None = None,
    resolution: bool = True,
) -> Report:
    """Check the derivatives of ``fn`` at ``inputs`` against the finite-difference oracle.

    ``fn`` is written for ``backend`` (a name such as ``"torch"``, ``"jax"``, ``"numpy"``, a
    ``"package.module:Attr"`` path, or an adapter instance) and may take and return several
    arrays; integer inputs pass through undifferentiated.  ``dtype`` (default: the inputs' own
    floating dtype) is the precision under test; below float64 the rule is checked in float64
    and the rounding of the low-precision derivative separately.  ``modes`` chooses reverse
    (``"rev"``) and/or forward (``"fwd"``) mode; ``order=2`` adds VJP-of-VJP, JVP-of-VJP and
    JVP-of-JVP checks.  ``seed`` fixes the random probe vectors.  ``atol``/``rtol`` replace the
    error model by ``atol + rtol * |expected|`` exactly.  ``kwargs`` (e.g. ``{"dim": 1}``) are
    passed to ``fn`` as keyword arguments on every evaluation and never differentiated (a
    :class:`NumpyFunction`'s ``vjp``/``jvp`` receive them too); the reproducer shows them.
    ``error_model`` (default ``None``: :class:`ErrorModel()`, ``docs/error-model.md``) is the
    profile every allowance is computed with: e.g. ``ErrorModel(fd_safety=3.0)`` trusts the
    oracle's error estimate with a 3x margin instead of 10x (stricter: a borderline pass may
    fail), ``ErrorModel(rounding_gamma=64.0)`` allows 4x the default rounding; the failure
    message's allowance derivation shows the constants used, and the reproducer passes the
    same profile.  Every comparison of ``check`` judges with it (the screen, the full
    comparisons and their second and scaled estimates, forward vs reverse, eager vs
    functional, order 2, the rounding check, the runs around kinks); the finite-difference
    tables' own tuning fields (steps, retries, kink thresholds) are read from the default
    model (``docs/error-model.md`` section 5a).

    Every float64 check screens first: the comparisons with finite differences are judged
    against a cheap estimate (8 evaluations per input along one tangent that the probes share,
    projected on each probe's cotangent before extrapolating, streamed
    in bounded batches), which passes only where it converged below ``1e-11`` of the compared
    terms and every comparison agrees; anything else (a disagreement, a suspected kink, an
    unresolved allowance) runs the full oracle, whose results are returned (with
    ``details["screen"]`` saying why); float32/16 always run the full check.  The comparisons
    of two AD values (forward vs reverse, eager vs functional) need no finite differences.
    The cost does not grow with the input beyond the evaluations themselves
    (``docs/cost-model.md``).  ``fast=True`` runs only the backend's primary derivative
    paths (no eager-vs-functional or forward-vs-reverse comparison; ``details["fast_screen"]``).

    Inputs and outputs may be nested (pytrees): dicts, lists, tuples, NamedTuples and
    dataclasses of arrays, flattened with the engine's own pytree utility; every result and
    message names an array by its path (``VJP of output 0 w.r.t. input params['w']``, worst
    element ``params['w'][1, 0]``); Python numbers, strings and ``None`` inside them are
    constants.  ``wrt`` chooses the inputs differentiated: a position (``0``), a path
    (``"params"``, ``"params['w']"``: that array or every array under it) or a list of them
    (default: every floating array; integer arrays are never differentiated).  Complex inputs
    and outputs (torch and jax) are checked as their real and imaginary parts against the
    real finite-difference oracle, through the engine's own complex rules and convention,
    which every result names (``details["complex_convention"]``): ``docs/pytrees.md``,
    ``docs/complex.md``.

    ``timeout`` (seconds, default none) limits the whole check: a function or an in-process
    adapter still running then is stopped and reported as an ``error`` result (a ``SIGALRM``
    timer on the main thread and a watchdog thread that ``fn`` cannot disable by changing
    signal state; C code that never returns to Python is stopped only when it returns;
    process adapters have their own request timeout: ``docs/error-model.md`` section 3b).

    ``resolution`` (default ``True``) runs the per-component checks where the projected
    comparisons are blind (``docs/error-model.md`` section 4c): below float64 every element of
    the derivative (orders 1 and 2) against the same function's float64 derivative correctly
    rounded to the dtype, in ulps; and where the inputs, outputs or first derivatives span many
    decades or reach the ends of the float64 range, every output component against finite
    differences with steps relative to each element's magnitude; at ``order=2`` in
    float16/bfloat16 the second derivative computed in the dtype against its float64 one; in
    float32, float16 and bfloat16 (torch and jax) every elementwise kernel the function runs,
    forward and backward, against the same op in float64 on its own inputs, correctly
    rounded (``kernel_ulp``: a kernel 1 ulp off is caught).
    ``resolution=False`` leaves them out (the sweep runs its own).

    Returns a :class:`Report`; ``report.passed`` is False if any check failed or errored,
    and when nothing was decided (every result inconclusive or skipped: ``report.decided`` is
    empty, where :func:`assert_gradients` raises :class:`NothingDecided`).
    Never raises for a misbehaving ``fn`` or adapter (that is an ``error`` result); raises
    :class:`InvalidArgument` for invalid arguments.
    """
    seed = arguments.seed(seed)
    be = get_backend(backend)
    try:
        modes_t = _validate(be, device, dtype, modes, order, probes, atol, rtol)
    except AdapterFailed as exc:  # the adapter's own answer is broken: an error result
        bad = CheckResult(CheckKind.CALL, Status.ERROR, backend=be.name, device=device,
                          dtype=dtype or "float64", name=str(name or getattr(fn, "__name__", "")),
                          seed=seed, message=f"the {be.name} adapter's {exc.failure.call}() "
                                             f"failed: {exc.failure.text}")
        return Report(stream.record_many([bad]))
    order, probes = int(order), int(probes)
    limit = arguments.timeout(timeout)
    model = validated_model(error_model)
    call = _with_kwargs(fn, kwargs)
    if not inputs:
        raise InvalidArgument("inputs=() : check needs at least one input array")
    names: tuple[str, ...] = ()  # read only for nested inputs and wrt=
    paths: tuple[str, ...] | None = None
    rebuild: list[str] | None = None
    if not _plain(inputs) and trees.needs_flattening(be, inputs):
        names = trees.input_names(fn, len(inputs))
        flat = _structured(be, fn, call, inputs, names)
        call, arrays, paths = flat.call, list(flat.arrays), flat.paths
        if not arrays:
            raise InvalidArgument(f"the inputs hold no array (only constants): {names}")
        rebuild = [_rebuilt(x, n, paths) for x, n in zip(inputs, names, strict=True)]
    else:
        arrays = [_to_numpy(be, x, k) for k, x in enumerate(inputs)]
    if wrt is not None and not names:
        names = trees.input_names(fn, len(inputs))
    only = None if wrt is None else trees.select(paths or names, names, wrt)
    dt = dtype or _default_dtype(be, arrays, paths)
    owner = getattr(fn, "__self__", None)
    fn_name = name or (owner.__name__ if isinstance(owner, type) else None) or getattr(
        fn, "__name__", None) or type(fn).__name__
    repro = _reproducer(fn, arrays, be.name, device, dt, modes_t, order, seed, kwargs,
                        rebuild, atol=atol, rtol=rtol, probes=probes, name=name,
                        fast=bool(fast), timeout=limit, error_model=model, wrt=wrt,
                        resolution=bool(resolution))
    cfg = CheckConfig(
        modes=modes_t, order=order, seed=seed, atol=atol, rtol=rtol, probes=probes,
        name=fn_name, fast=bool(fast), timeout=limit, error_model=model, exclude_kinks=True,
        resolution=bool(resolution),
        reproducer=repro.text,
        only_inputs=only, input_paths=paths,
    )
    results = run_numeric_checks(be, call, arrays, device=device, dtype=dt, config=cfg)
    results = repro.for_results(results)  # large inputs saved where a result needs them
    return Report(stream.record_many(results))  # appended to the active result stream, if any


def format_failure(report: Report) -> str:
    """The multi-line message of :class:`GradientMismatch` for a failed report.

    Values are written by :func:`gradcheck.core.results.shown` (the same strings the HTML report's
    detail panel shows); each result ends with its reproducer, a script printed unindented so
    that it runs as printed."""
    lines = [f"gradient check failed: {report.summary()}"]
    conventions = {str(r.details["complex_convention"]) for r in report.failures
                   if r.details.get("complex_convention")}
    for convention in sorted(conventions):  # complex inputs or outputs: as real, imaginary
        lines.append(f"complex values checked as (real, imaginary) parts against the real "
                     f"finite-difference oracle, in the convention of {convention}")
    for r in report.failures:
        lines.append("")
        dtype = f"{r.dtype} (checked in {r.computed_in})" if r.computed_in else r.dtype
        lines.append(f"* {r.subject} [{r.status.value}] ({r.name}, backend={r.backend}, "
                     f"device={r.device}, dtype={dtype}, seed={r.seed})")
        values = shown(r) if r.status is Status.FAILED else None
        if values is not None:
            lines += _comparison_lines(r, values)
            for key in ("kinks", "hint"):  # the elements left out; an engine's silent zero
                if r.details.get(key):
                    lines.append(f"  {r.details[key]}")
        else:
            lines.append(f"  {r.message}")
        if r.reproducer:
            lines += [f"  {heading(r.reproducer)}:", r.reproducer]
    return "\n".join(lines)


def _comparison_lines(r: CheckResult, values: Shown) -> list[str]:
    kind = INFO[r.kind]
    what, by_ad, by_ref = kind.compared, kind.actual_by, kind.expected_by
    probe = f" (probe {r.probe + 1} of {r.probes})" if r.probe is not None else ""
    lines = [f"  compared {what}{probe}: {values.actual} {by_ad} vs {values.expected} {by_ref}",
             f"  |difference| {values.difference} (relative {values.relative}), allowed "
             f"{values.allowed} from {r.allowed_source}; ratio {values.ratio}"]
    if r.max_abs_discrepancy is not None:
        over = f", {r.elements_over} element(s) over the allowed error" if \
            r.elements_over is not None else ""
        # relative to the block's largest oracle element where a Jacobian was localized
        rel = (f", relative {number(r.max_rel_discrepancy)}" if r.localized is not None
               else "")
        where = f" ({r.localized})" if r.localized is not None else ""
        lines.append(f"  largest element difference{where}: {number(r.max_abs_discrepancy)}"
                     f"{rel}{over}")
    elif r.localized is not None:
        lines.append(f"  localization: {r.localized}")
    if r.rounding_level is not None:
        lines.append(f"  at the rounding level: |difference| within {number(r.rounding_level)}"
                     " (docs/error-model.md section 5b): a rounding inconsistency of the rule, "
                     "not a wrong rule")
    if r.worst:
        lines.append(f"  worst elements ({by_ad.removeprefix('by ')} vs "
                     f"{by_ref.removeprefix('by ')}, |difference|, allowed, ratio):")
        for w in r.worst:
            ad, ref, diff, allowed, ratio = shown_element(w)
            lines.append(f"    {_element(r, w.index)}: {ad} vs {ref}, |difference| {diff}, "
                         f"allowed {allowed}, ratio {ratio}")
    return lines


def _element(r: CheckResult, index: tuple[int, ...]) -> str:
    """``output[i, j] / input[k]`` for a Jacobian element, ``input[k]`` for a gradient one,
    ``output[i]`` along the probe's tangent for an element localized on a budget."""
    if r.localized is not None and r.localized.startswith(BISECTED):
        out = r.output_index if r.path is None else r.path
        return f"output {out}{list(index)} along the tangent"
    n_in = len(r.shapes[r.input_index]) if r.input_index is not None and r.input_index < len(
        r.shapes) else 0
    at = list(index[len(index) - n_in:])
    inp = (f"input {r.input_index}{at}" if r.input_path is None
           else f"{r.input_path}{at}" if at else r.input_path)
    if len(index) > n_in:
        out = r.output_index if r.path is None else r.path
        return f"d output {out}{list(index[:len(index) - n_in])} / d {inp}"
    return inp


def format_nothing_decided(report: Report) -> str:
    """The message of :class:`NothingDecided`: why each result decided nothing."""
    lines = [f"gradient check decided nothing: {report.summary()}; no comparison passed, so "
             "nothing was shown correct"]
    for r in report.undecided:
        lines += ["", f"* {r.subject} [{r.status.value}] ({r.name}, backend={r.backend}, "
                      f"device={r.device}, dtype={r.dtype}, seed={r.seed})", f"  {r.message}"]
    script = next((r.reproducer for r in report.undecided if r.reproducer), "")
    if script:  # one call made every result: one script
        lines += ["", f"{heading(script)}:", script]
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
    if report.failures:
        raise GradientMismatch(format_failure(report), report)
    if not report.passed:  # nothing failed, nothing was decided either
        raise NothingDecided(format_nothing_decided(report), report)
    return report
