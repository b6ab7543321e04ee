"""Numeric gradient checks: projected VJP/JVP against the FD oracle, cross-mode, order 2.

For each differentiable input ``j`` and floating output ``i`` and each of ``probes`` random
Gaussian pairs ``(v, u)`` we compare three scalars:

* ``<v, (J u)_FD>``  from the oracle (:mod:`gradcheck.fd`, one batched call per input),
* ``<J^T v, u>``     from the backend's reverse mode (VJP check),
* ``<v, J u>``       from the backend's forward mode (JVP check),

and, between the two AD values, the forward-vs-reverse check (rounding bound only).  The cost
does not depend on the input size.  When a projected check fails the block ``J_ij`` is
localized with the full Jacobian and the worst elements are reported.

A low-precision dtype is checked in two parts (docs/error-model.md s.4): the *rule* in float64 at
the point rounded to that dtype (tight), and the *rounding* of the dtype's VJP against the
backend's own float64 VJP (norm-wise, with measured noise: :mod:`gradcheck.checks.rounding`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import fd, tolerance
from ..backends.base import Backend, is_complex, is_floating, widest_dtype
from ..results import CheckKind, CheckResult, Status, WorstElement, number, shorten, shown
from . import _limits, _path_noise, _sparse_jacobian, rounding

# Localization is batched (FD columns and AD rows/columns in vectorized calls), so its cost is
# set by the Jacobian's size: up to 2048 x 2048 elements (~10 s on a slow CPU for a cheap f).
_LOCALIZE_MAX_ELEMENTS = 2048 * 2048
_LOCALIZE_MAX_COLUMNS = 2048  # a dense FD Jacobian costs 5 evaluations of f per column (or 16+)
_LOCALIZE_ROWS = 256  # unit cotangents / tangents per batched AD call (bounds memory)
_WORST = 5


@dataclass(frozen=True)
class CheckConfig:
    """Options of one numeric check run (see :func:`gradcheck.check`)."""

    modes: tuple[str, ...] = ("rev", "fwd")
    order: int = 1
    seed: int = 0
    atol: float | None = None
    rtol: float | None = None
    probes: int = 3
    localize: bool = True
    name: str = ""
    reproducer: str = ""
    test_id: str = ""
    only_inputs: tuple[int, ...] | None = None
    fast: bool = False  # screen first (:mod:`._screen`); the full check only where it cannot pass
    timeout: float | None = None  # seconds for the whole check (:mod:`._limits`)
    order_level: int = 0  # 1 inside the order-2 sub-run (the outer deadline covers it)
    error_model: tolerance.ErrorModel = tolerance.DEFAULT_MODEL  # check(error_model=...)


@dataclass
class _Ctx:
    """Everything the comparisons of one run share."""

    backend: Backend
    fn: Callable
    device: str
    dtype: str
    cfg: CheckConfig
    args64: list[np.ndarray]
    args_d: list[np.ndarray]
    diff: list[int]
    outs64: list[np.ndarray]
    float_outs: list[int]
    shapes: tuple[tuple[int, ...], ...]
    results: list[CheckResult] = field(default_factory=list)
    # engines without float64 (Backend.oracle_forward): FD runs on this NumPy forward and the
    # rule is checked with a rounding bound in ``rule_dtype``, the engine's widest dtype
    oracle: Callable | None = None
    rule_dtype: str = "float64"
    outs_d: list[np.ndarray] = field(default_factory=list)  # outputs in the dtype under test
    # input index -> the oracle's estimate with 2^-8 smaller steps (:mod:`._second_estimate`)
    confirmations: dict[int, Any] = field(default_factory=dict)
    # each output's path in the function's output structure (a dict, a pytree), where the
    # adapter names them (Outputs.paths); results carry it as details["output_path"]
    output_paths: tuple[str, ...] | None = None

    def result(self, kind: str, status: Status, **kw: Any) -> CheckResult:
        i = kw.get("output_index")
        if self.output_paths is not None and i is not None and i < len(self.output_paths):
            kw["details"] = {**kw.get("details", {}), "output_path": self.output_paths[i]}
        r = CheckResult(
            kind=kind, status=status, backend=self.backend.name, device=self.device,
            dtype=self.dtype, name=self.cfg.name, seed=self.cfg.seed, shapes=self.shapes,
            reproducer=self.cfg.reproducer, test_id=self.cfg.test_id, **kw,
        )
        self.results.append(r)
        return r


def _describe_exc(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return shorten(f"{type(exc).__name__}: {text[0] if text else ''}", 500)


def _is_float(a: np.ndarray) -> bool:
    return is_floating(a.dtype)  # ml_dtypes' bfloat16 included


def run_numeric_checks(
    backend: Backend,
    fn: Callable,
    inputs: Sequence[np.ndarray],
    *,
    device: str,
    dtype: str,
    config: CheckConfig,
) -> list[CheckResult]:
    """Run every numeric check of ``config`` for ``fn`` at ``inputs``; never raises (but for
    ``KeyboardInterrupt``): an exception, a ``SystemExit`` or the time limit reached in ``fn``
    or the adapter is an ``error`` result (:mod:`._limits`)."""
    start = time.perf_counter()
    results: list[CheckResult] = []
    base = _Ctx(backend, fn, device, dtype, config, [], [], [], [], [],
                tuple(tuple(np.shape(a)) for a in inputs), results=results)
    try:
        with _limits.deadline(config.timeout if config.order_level == 0 else None):
            ctx = _prepare(base, inputs)
            if ctx is not None:
                _first_order_or_screen(ctx)
                if config.order >= 2:
                    _second_order(ctx)
    except _limits.Timeout:
        base.result(CheckKind.CALL.value, Status.ERROR,
                    message=f"the check did not finish within timeout={config.timeout:g} s (the "
                            "function or the adapter hung or is too slow); the checks not "
                            "reported above did not run")
    except BaseException as exc:  # a bug in an adapter, a sys.exit in fn: not the run's end
        if not _limits.contained(exc):
            raise
        base.result(CheckKind.CALL.value, Status.ERROR,
                    message=f"unexpected failure while checking: {_describe_exc(exc)}")
    elapsed = time.perf_counter() - start
    return [replace(r, duration_s=elapsed / max(len(results), 1)) for r in results]


def _first_order_or_screen(ctx: _Ctx) -> None:
    """The first-order checks: the screen first where it applies (:mod:`._screen`; with
    ``fast`` it is all that runs when it passes, in the default the comparisons of two AD
    values run beside it), the full checks where it cannot pass (their results then say why
    they ran, in ``details["screen"]``, ``details["fast_screen"]`` under ``fast``)."""
    from . import _screen  # imports this module

    if _screen.applies(ctx):
        reason = _screen.screen(ctx)
        if reason is None:
            return
    elif not ctx.cfg.fast:
        _first_order(ctx)
        return
    else:
        reason = f"the screen covers float64 rule checks only (dtype {ctx.dtype})"
    key = _screen.label(ctx)[0]
    start = len(ctx.results)
    _first_order(ctx)
    ctx.results[start:] = [replace(r, details={**r.details, key: f"escalated: {reason}"})
                           for r in ctx.results[start:]]


# -- preparation -------------------------------------------------------------------------------


def _prepare(base: _Ctx, inputs) -> _Ctx | None:
    """The context of the checks, or ``None`` where the results in ``base`` end the run."""
    backend, fn, dtype, cfg = base.backend, base.fn, base.dtype, base.cfg
    device = base.device
    args = [np.asarray(a) for a in inputs]
    diff = [k for k, a in enumerate(args) if _is_float(a)]
    if cfg.only_inputs is not None:
        diff = [k for k in diff if k in cfg.only_inputs]
    if not diff:
        base.result(CheckKind.CALL.value, Status.ERROR,
                    message="no floating-point input to differentiate (integer inputs pass "
                            "through undifferentiated)")
        return None
    empty = [k for k in diff if args[k].size == 0]
    for k in empty:
        base.result(CheckKind.VJP.value, Status.INCONCLUSIVE, input_index=k,
                    message=f"input {k} is empty (shape {args[k].shape}): nothing to check")
    diff = [k for k in diff if k not in empty]
    if not diff:
        return None
    oracle, rule_dtype = None, "float64"
    if "float64" not in backend.dtypes:
        rule_dtype = widest_dtype(backend.dtypes)
        oracle = backend.oracle_forward(fn)
        if oracle is None:
            base.result(CheckKind.CALL.value, Status.SKIPPED,
                        message=f"backend {backend.name!r} cannot compute in float64 and gives no "
                                "float64 forward for the oracle (Backend.oracle_forward): finite "
                                f"differences of a {rule_dtype} function are not a reliable oracle")
            return None
    np_dtype = _np_dtype(dtype)
    args_d = [a.astype(np_dtype) if k in diff else a for k, a in enumerate(args)]
    # args_d is the check's own copy; in float64 args64 is the same array (no second copy)
    args64 = [a.astype(np.float64, copy=False) if k in diff else a
              for k, a in enumerate(args_d)]
    evaluate = ((lambda: backend.evaluate(fn, args64, device)) if oracle is None
                else lambda: [np.asarray(o, dtype=np.float64) for o in _outputs(oracle(*args64))])
    before = [np.array(a, copy=True) for a in args64]
    try:
        outs64 = evaluate()
    except NotImplementedError as exc:  # a capability the adapter declares missing
        base.result(CheckKind.CALL.value, Status.SKIPPED, message=str(exc))
        return None
    except Exception as exc:
        base.result(CheckKind.CALL.value, Status.ERROR,
                    message=f"the function raised at the sample point (float64): "
                            f"{_describe_exc(exc)}")
        return None
    if not _pure(base, before, args64) or not _deterministic(base, evaluate, outs64):
        return None
    base.output_paths = getattr(outs64, "paths", None)
    float_outs = [i for i, o in enumerate(outs64) if _is_float(np.asarray(o))]
    for i, o in enumerate(outs64):
        if is_complex(np.asarray(o).dtype):  # not left out silently
            base.result(CheckKind.CALL.value, Status.SKIPPED, output_index=i,
                        message=f"{_output(base, i)} is complex ({np.asarray(o).dtype.name}): "
                                "complex derivatives are not checked; return its .real and "
                                ".imag as two outputs to check them")
    if not float_outs and any(r.status is Status.SKIPPED for r in base.results):
        return None
    if not float_outs:
        base.result(CheckKind.CALL.value, Status.ERROR,
                    message="the function returned no floating-point output")
        return None
    for i in float_outs:
        bad = int(np.size(outs64[i]) - np.count_nonzero(np.isfinite(outs64[i])))
        if bad:
            base.result(CheckKind.CALL.value, Status.INCONCLUSIVE, output_index=i,
                        message=f"{_output(base, i)} has {bad} non-finite value(s) at the sample "
                                "point: "
                                "derivatives are not defined there")
            return None
    if all(np.size(outs64[i]) == 0 for i in float_outs):
        _empty_outputs(base, args64, diff, outs64, float_outs)
        return None
    float_outs = [i for i in float_outs if np.size(outs64[i]) > 0]
    ctx = replace(base, args64=args64, args_d=args_d, diff=diff, outs64=outs64,
                  float_outs=float_outs, results=base.results, oracle=oracle,
                  rule_dtype=rule_dtype)
    if dtype != "float64" and not _low_precision_outputs_ok(ctx):
        return None
    return ctx


def _equal(a: np.ndarray, b: np.ndarray, *, equal_nan: bool) -> bool:
    """``np.array_equal(a, b, equal_nan=...)`` (same shape), one pass where no element
    differs (``array_equal`` with ``equal_nan`` indexes out the NaNs first: several copies)."""
    if bool(np.all(a == b)):
        return True
    return bool(np.array_equal(a, b, equal_nan=equal_nan))


def _pure(base: _Ctx, before: list[np.ndarray], after: list[np.ndarray]) -> bool:
    """Whether the first evaluation left every input as it was (the arrays handed to the
    adapter; an adapter whose native tensors share their memory, as torch's ``as_tensor`` does
    for float64, shows a tensor's in-place change in them); an ``error`` result naming each
    modified input where not."""
    changed = []
    for k, (a, b) in enumerate(zip(before, after, strict=True)):
        if a.shape == b.shape and _equal(a, b, equal_nan=_is_float(a)):
            continue
        with np.errstate(all="ignore"):
            size = (float(np.nanmax(np.abs(b.astype(np.float64) - a.astype(np.float64))))
                    if a.shape == b.shape and a.size and np.issubdtype(a.dtype, np.number)
                    else float("nan"))
        changed.append(k)
        base.result(CheckKind.CALL.value, Status.ERROR, input_index=k,
                    details={"modified_input": k, "max_change": size},
                    message=f"fn modified input {k} in place (max change {size:.3g}); gradcheck "
                            "needs a pure function: copy the input before changing it "
                            "(x = x.clone() / x.copy())")
    return not changed


def _deterministic(base: _Ctx, evaluate: Callable[[], Any], outs64: Sequence[Any]) -> bool:
    """Whether a second evaluation at the same point gives the same outputs, within
    ``ROUNDING_GAMMA`` ulps of each output element (a multithreaded reduction may sum in another
    order); an ``inconclusive`` result with the size of the difference where not: finite
    differences of a function that changes between calls estimate nothing."""
    again = evaluate()
    worst, where = 0.0, None
    for i, (a, b) in enumerate(zip(outs64, again, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        if not _is_float(a) or (a.shape == b.shape and _equal(a, b, equal_nan=True)):
            continue  # (the common case: bit-identical, one pass)
        a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a64.shape != b64.shape:
            worst, where = float("inf"), i
            break
        with np.errstate(all="ignore"):
            d = np.abs(a64 - b64)
            bound = tolerance.ROUNDING_GAMMA * tolerance.eps(a.dtype.name) * np.maximum(
                np.abs(a64), np.abs(b64))
            over = (d > bound) & ~(np.isnan(a64) & np.isnan(b64))
        if np.any(over):
            size = float(np.nanmax(np.where(over, d, 0.0)))
            if size > worst or where is None:
                worst, where = size, i
    if where is None:
        return True
    base.result(CheckKind.CALL.value, Status.INCONCLUSIVE, output_index=where,
                details={"nondeterministic": worst},
                message=f"fn is nondeterministic: two evaluations at the same point differ by "
                        f"up to {worst:.3g} in {_output(base, where)} (more than "
                        f"{tolerance.ROUNDING_GAMMA:g} ulps of the output); finite differences "
                        "of it estimate nothing, so no derivative was checked (make it "
                        "deterministic: fix its random seed inside fn, or pass the noise as an "
                        "input)")
    return False


def _output(ctx: _Ctx, i: int) -> str:
    """``output 1``, or ``output ['a']`` where the adapter names outputs by path."""
    paths = ctx.output_paths
    return f"output {paths[i]}" if paths is not None and i < len(paths) else f"output {i}"


def _empty_outputs(base: _Ctx, args64: list[np.ndarray], diff: list[int],
                   outs64: Sequence[Any], float_outs: list[int]) -> None:
    """Every floating output is empty: the Jacobian has no rows and nothing can be compared
    with finite differences, but the VJP of an empty cotangent must still be exactly zero (an
    engine that returns anything else for an unused parameter is wrong)."""
    shapes = ", ".join(str(np.shape(outs64[i])) for i in float_outs)
    cts = [np.zeros(np.shape(o), dtype=np.float64) for o in outs64]
    try:
        grads = base.backend.vjp(base.fn, args64, diff, cts, base.device)
    except NotImplementedError as exc:
        base.result(CheckKind.VJP.value, Status.SKIPPED, message=str(exc))
        return
    except Exception as exc:
        base.result(CheckKind.VJP.value, Status.ERROR,
                    message=f"VJP with the empty output(s) {shapes} raised: {_describe_exc(exc)}")
        return
    if len(grads) != len(diff):
        base.result(CheckKind.VJP.value, Status.ERROR,
                    message=f"VJP with the empty output(s) {shapes} returned {len(grads)} "
                            f"gradients for {len(diff)} differentiable inputs")
        return
    for k, g in zip(diff, grads, strict=True):
        g = np.asarray(g, dtype=np.float64)
        if g.shape != args64[k].shape:
            base.result(CheckKind.VJP.value, Status.ERROR, input_index=k,
                        message=f"VJP for input {k} has shape {g.shape}, expected "
                                f"{args64[k].shape} (empty output(s) {shapes})")
        elif np.any(g != 0):
            worst = int(np.argmax(np.abs(g)))
            where = tuple(int(i) for i in np.unravel_index(worst, g.shape))
            base.result(CheckKind.VJP.value, Status.FAILED, input_index=k,
                        discrepancy=float(np.abs(g).flat[worst]), allowed=0.0,
                        message=f"output(s) {shapes} are empty, so the VJP for input {k} must be "
                                f"exactly 0; element {where} is {float(g.flat[worst]):.10g}")
        else:
            base.result(CheckKind.VJP.value, Status.PASSED, input_index=k,
                        message=f"output(s) {shapes} are empty: the VJP for input {k} is exactly "
                                "0 as it must be (no finite-difference comparison possible)")


def _outputs(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _np_dtype(dtype: str) -> Any:
    if dtype == "bfloat16":
        import ml_dtypes  # shipped with jax; bfloat16 inputs need it

        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def _low_precision_outputs_ok(ctx: _Ctx) -> bool:
    try:
        outs_d = ctx.backend.evaluate(ctx.fn, ctx.args_d, ctx.device)
    except Exception as exc:
        ctx.result(CheckKind.CALL.value, Status.ERROR,
                   message=f"the function raised in {ctx.dtype}: {_describe_exc(exc)}")
        return False
    for i in ctx.float_outs:
        o, o64 = np.asarray(outs_d[i]), np.asarray(ctx.outs64[i])
        if o.shape != o64.shape:
            ctx.result(CheckKind.CALL.value, Status.ERROR, output_index=i,
                       message=f"output {i} has shape {o.shape} in {ctx.dtype} but "
                               f"{o64.shape} in float64")
            return False
    ctx.outs_d = [np.asarray(o) for o in outs_d]
    return True


# -- first order -------------------------------------------------------------------------------


@dataclass
class _Probes:
    v: dict[int, list[np.ndarray]]  # output index -> P cotangents
    u: dict[int, list[np.ndarray]]  # input index -> P tangents


def _probes(ctx: _Ctx, tangents: int | None = None) -> _Probes:
    """``P`` (``probes``) seeded cotangents per output and ``tangents`` (default ``P``)
    tangents per input."""
    rng = np.random.default_rng(ctx.cfg.seed)
    P = ctx.cfg.probes
    T = P if tangents is None else tangents
    low = _np_dtype(ctx.dtype)
    # cotangents exactly representable in the dtype under test, so that the low-precision and
    # the float64 VJP of the rounding check see the same v
    # drawn P at a time (the same numbers as P draws in turn), so that each probe is a row of
    # one array and the batched calls need no stacked copy (_stacked)
    v = {i: _rows(_representable(rng.standard_normal((P,) + np.shape(ctx.outs64[i])), low))
         for i in ctx.float_outs}
    u = {j: _rows(rng.standard_normal((T,) + ctx.args64[j].shape)) for j in ctx.diff}
    return _Probes(v, u)


def _rows(a: np.ndarray) -> list[np.ndarray]:
    """The rows of ``a`` as arrays (views; 0-d arrays, not scalars, for a 1-d ``a``)."""
    return [a[p, ...] for p in range(len(a))]


def _stacked(rows: Sequence[np.ndarray]) -> np.ndarray:
    """``np.stack(rows)``, without the copy where the rows already are the consecutive rows of
    one C-contiguous float array (the probes, :func:`_probes`; the screen's rounded
    directions): then a view of that array."""
    first = np.asarray(rows[0])
    base = first.base
    if (isinstance(base, np.ndarray) and base.flags.c_contiguous and base.dtype == first.dtype
            and base.size == first.size * len(rows)
            and all(isinstance(r, np.ndarray) and r.shape == first.shape and r.base is base
                    and r.flags.c_contiguous
                    and r.ctypes.data == base.ctypes.data + k * first.nbytes
                    for k, r in enumerate(rows))):
        return base.reshape((len(rows),) + first.shape)
    return np.stack(rows)


def _representable(v: np.ndarray, low: Any) -> np.ndarray:
    """``v`` rounded to the dtype ``low`` and back to float64 (no copy in float64)."""
    return v if np.dtype(low) == np.float64 else v.astype(low).astype(np.float64)


def _out_slices(ctx: _Ctx) -> dict[int, slice]:
    out, start = {}, 0
    for i in ctx.float_outs:
        n = int(np.size(ctx.outs64[i]))
        out[i] = slice(start, start + n)
        start += n
    return out


def _f0(ctx: _Ctx) -> np.ndarray:
    """``f(x)`` as the FD oracle sees it (float outputs, flattened, concatenated): already
    evaluated by :func:`_prepare`, so the oracle does not evaluate it again."""
    parts = [np.asarray(ctx.outs64[i], dtype=np.float64).ravel() for i in ctx.float_outs]
    if len(parts) == 1:  # a read-only view, not a copy
        out = parts[0].view()
        out.flags.writeable = False
        return out
    return np.concatenate(parts)


def _batch_fn(ctx: _Ctx, j: int) -> Callable[[np.ndarray], np.ndarray]:
    """``X (B, n_j)`` -> concatenated flattened float outputs ``(B, m)``, float64."""
    shape = ctx.args64[j].shape

    def f(X: np.ndarray) -> np.ndarray:
        args = list(ctx.args64)
        args[j] = X.reshape((len(X),) + shape)
        batched = [k == j for k in range(len(args))]
        if ctx.oracle is None:
            outs = ctx.backend.evaluate_batch(ctx.fn, args, batched, ctx.device)
        else:
            pick = [(a, b) for a, b in zip(args, batched, strict=True)]
            rows = [_outputs(ctx.oracle(*[a[r] if b else a for a, b in pick]))
                    for r in range(len(X))]
            outs = [np.stack([np.asarray(row[k]) for row in rows]) for k in range(len(rows[0]))]
        parts = [np.asarray(outs[i], dtype=np.float64).reshape(len(X), -1)
                 for i in ctx.float_outs]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

    return f


def _cotangents(ctx: _Ctx, i: int, v: np.ndarray, dtype: Any) -> list[np.ndarray]:
    cts = []
    for k, o in enumerate(ctx.outs64):
        cts.append(np.asarray(v, dtype=dtype) if k == i else np.zeros(np.shape(o), dtype=dtype))
    return cts


def _has_dtype(g: np.ndarray, dtype: np.dtype) -> bool:
    """``g`` has ``dtype``; NumPy has no bfloat16 of its own, so adapters hand bfloat16 results
    over as float32: accepted when every value is a bfloat16 value."""
    if g.dtype == dtype:
        return True
    if dtype.name == "bfloat16" and g.dtype == np.float32:
        return bool(np.array_equal(g, g.astype(dtype).astype(np.float32), equal_nan=True))
    return False


def _checked_grads(ctx: _Ctx, grads: Sequence[Any], want: Sequence[np.ndarray], what: str,
                   dtype: Any) -> list[np.ndarray]:
    """Validate shapes (and dtype for low precision) of derivatives returned by the adapter."""
    out = []
    for g, a in zip(grads, want, strict=True):
        g = np.asarray(g)
        if g.shape != a.shape:
            raise ValueError(f"{what} returned shape {g.shape}, expected {a.shape}")
        if np.dtype(dtype) != np.float64 and not _has_dtype(g, np.dtype(dtype)):
            raise ValueError(f"{what} returned dtype {g.dtype}, expected {np.dtype(dtype)}")
        out.append(np.asarray(g, dtype=np.float64))  # no copy in float64
    if len(out) != len(want):
        raise ValueError(f"{what} returned {len(out)} arrays, expected {len(want)}")
    return out


def _batched_cotangents(ctx: _Ctx, i: int, vs: Sequence[np.ndarray], dtype: Any
                        ) -> list[np.ndarray]:
    """The rows ``vs`` for output ``i`` (zeros for the others), stacked: one batched call."""
    P = len(vs)
    return [(_stacked(vs) if np.dtype(dtype) == np.float64
             else np.stack([np.asarray(v, dtype=dtype) for v in vs])) if k == i
            else np.zeros((P,) + np.shape(o), dtype=dtype) for k, o in enumerate(ctx.outs64)]


def _unstack(grads: Sequence[Any], rows: int, what: str) -> list[list[np.ndarray]]:
    """``grads[k]`` with a leading batch axis -> per row, the list over ``k``."""
    grads = [np.asarray(g) for g in grads]
    for g in grads:
        if g.ndim == 0 or len(g) != rows:
            raise ValueError(f"{what} returned shape {g.shape}, expected {rows} stacked rows")
    return [[g[b] for g in grads] for b in range(rows)]


def _reverse(ctx: _Ctx, pr: _Probes, args: list[np.ndarray], dtype: Any, alternative: bool
             ) -> dict[tuple[int, int], list[list[np.ndarray]]]:
    """(output i, probe p) -> VJP per diff input; raises per output on adapter errors.

    All probes of one output share one call (:meth:`Backend.vjp_batch`, not vectorized: one
    forward pass, then the backward path under test once per probe).
    """
    out: dict[tuple[int, int], Any] = {}
    want = [args[k] for k in ctx.diff]
    for i in ctx.float_outs:
        P = len(pr.v[i])
        cts = _batched_cotangents(ctx, i, pr.v[i], dtype)
        try:
            if alternative:
                alts = ctx.backend.alternative_vjps_batch(ctx.fn, args, ctx.diff, cts,
                                                          ctx.device)
                rows = {n: _unstack(g, P, n) for n, g in alts.items()}
                for p in range(P):
                    out[(i, p)] = {n: _checked_grads(ctx, r[p], want, n, dtype)
                                   for n, r in rows.items()}
            else:
                g = _unstack(ctx.backend.vjp_batch(ctx.fn, args, ctx.diff, cts, ctx.device),
                             P, "the VJP")
                for p in range(P):
                    out[(i, p)] = _checked_grads(ctx, g[p], want, "the VJP", dtype)
        except Exception as exc:
            for p in range(P):
                out[(i, p)] = exc
    return out


def _forward(ctx: _Ctx, pr: _Probes) -> dict[tuple[int, int], Any]:
    """(input j, probe p) -> JVP per output (or the exception); one batched call per input."""
    out: dict[tuple[int, int], Any] = {}
    want = [np.asarray(o) for o in ctx.outs64]
    for j in ctx.diff:
        P = len(pr.u[j])
        tans = [_stacked(pr.u[j]) if k == j else np.zeros((P,) + ctx.args64[k].shape)
                for k in ctx.diff]
        try:
            t = ctx.backend.jvp_batch(ctx.fn, ctx.args64, ctx.diff, tans, ctx.device)
            if len(t) != len(want):
                raise ValueError(f"the JVP returned {len(t)} outputs, expected {len(want)}")
            rows = _unstack([t[i] for i in ctx.float_outs], P, "the JVP")
            for p in range(P):
                out[(j, p)] = {i: _checked_grads(ctx, [r], [want[i]], "the JVP", np.float64)[0]
                               for i, r in zip(ctx.float_outs, rows[p], strict=True)}
        except Exception as exc:
            for p in range(P):
                out[(j, p)] = exc
    return out


def _first_order(ctx: _Ctx) -> None:
    pr = _probes(ctx)
    slices = _out_slices(ctx)
    fds: dict[int, Any] = {}
    for j in ctx.diff:
        try:
            fds[j] = fd.directional_derivatives_split(
                _batch_fn(ctx, j), ctx.args64[j].ravel(),
                np.stack([u.ravel() for u in pr.u[j]]), f0=_f0(ctx))
        except Exception as exc:
            fds[j] = exc
        else:  # the oracle rounds the directions so that x + h u is exact: project AD on those
            pr.u[j] = [d.reshape(ctx.args64[j].shape) for d in fds[j].directions]
    modes = ctx.cfg.modes
    rev = _reverse(ctx, pr, ctx.args64, np.float64, False) if "rev" in modes else {}
    fwd: dict[tuple[int, int], Any] = {}
    if "fwd" in modes:
        if ctx.backend.supports_jvp:
            fwd = _forward(ctx, pr)
        else:
            _no_forward_mode(ctx)
    alt = _reverse(ctx, pr, ctx.args64, np.float64, True) if "rev" in modes else {}
    low = None
    if ctx.dtype != "float64" and "rev" in modes:
        low = _rounding_samples(ctx, pr)
    for i in ctx.float_outs:
        for j in ctx.diff:
            _compare_pair(ctx, pr, i, j, slices[i], fds[j], rev, fwd, alt, low)


def _no_forward_mode(ctx: _Ctx) -> None:
    """One ``skipped`` JVP result per input: forward mode was asked for, the backend has none."""
    for j in ctx.diff:
        ctx.result(CheckKind.JVP.value, Status.SKIPPED, input_index=j,
                   message=f"backend {ctx.backend.name!r} declares no forward mode")


def _rounding_samples(ctx: _Ctx, pr: _Probes) -> dict[int, Any]:
    """Output index -> the low-precision and float64 VJPs of probe 0 at the point and at a few
    perturbed points (:mod:`gradcheck.checks.rounding`), or the exception."""
    out: dict[int, Any] = {}
    for i in ctx.float_outs:
        v = pr.v[i][0]

        def vjp_at(args: list[np.ndarray], dtype: Any, i: int = i, v: np.ndarray = v
                   ) -> list[np.ndarray]:
            g = ctx.backend.vjp(ctx.fn, args, ctx.diff, _cotangents(ctx, i, v, dtype), ctx.device)
            what = "the VJP" if dtype is np.float64 else f"the {ctx.dtype} VJP"
            return _checked_grads(ctx, g, [args[k] for k in ctx.diff], what, dtype)

        try:
            out[i] = rounding.samples(vjp_at, ctx.args_d, ctx.diff, _np_dtype(ctx.dtype),
                                      tolerance.eps(ctx.dtype), ctx.cfg.seed)
        except Exception as exc:
            out[i] = exc
    return out


def _fd_scalars(fde: fd.FDEstimate, pr: _Probes, i: int, j: int, sl: slice):
    vs = [v.ravel() for v in pr.v[i]]
    s = np.array([vs[p] @ fde.value[p, sl] for p in range(len(vs))])
    e = np.array([np.abs(vs[p]) @ fde.error[p, sl] for p in range(len(vs))])
    mag = np.array([np.abs(vs[p]) @ np.abs(fde.value[p, sl]) for p in range(len(vs))])
    return s, e, mag


def _compare_pair(ctx, pr, i, j, sl, fde, rev, fwd, alt, low) -> None:
    kinds = []
    if "rev" in ctx.cfg.modes:
        kinds.append(CheckKind.VJP)
    if "fwd" in ctx.cfg.modes and ctx.backend.supports_jvp:
        kinds.append(CheckKind.JVP)
    where = {"output_index": i, "input_index": j}
    if isinstance(fde, Exception):
        for k in kinds:
            ctx.result(k.value, Status.ERROR, **where,
                       message=f"evaluating the function for finite differences raised: "
                               f"{_describe_exc(fde)}")
        return
    got: dict[CheckKind, tuple[np.ndarray, np.ndarray]] = {}
    for kind, source in ((CheckKind.VJP, rev), (CheckKind.JVP, fwd)):
        if kind not in kinds:
            continue
        vals = _ad_scalars(kind, source, pr, i, j)
        if isinstance(vals, NotImplementedError):
            ctx.result(kind.value, Status.SKIPPED, **where, message=str(vals))
        elif isinstance(vals, Exception):
            ctx.result(kind.value, Status.ERROR, **where,
                       message=f"the backend's {kind.value.upper()} raised: {_describe_exc(vals)}")
        else:
            got[kind] = vals
    ad = {kind: vals[0] for kind, vals in got.items()}
    # before abstaining or blaming the backend, the oracle estimates again with smaller steps
    from . import _second_estimate  # imports this module

    first = fde
    fde, side, note = _second_estimate.revisit(ctx, pr, i, j, sl, fde, got)
    if fde is None:  # a kink or no finite estimate at every step size tried, or estimates
        # at two step ranges that contradict each other
        for k in got:
            ctx.result(k.value, Status.INCONCLUSIVE, **where,
                       message=note or _kink_message(first, sl))
        return
    s_fd, e_fd, mag_fd, terms = side
    conv = [_convergence(fde, p, pr.v[i][p].ravel(), sl) for p in range(len(pr.v[i]))]
    for kind, s_ad in ad.items():
        _emit(ctx, kind, where, s_ad, s_fd, e_fd, terms, ctx.rule_dtype, conv, pr, fde,
              conditioning=_rule_conditioning(ctx, pr, where, fde, sl), oracle_note=note)
    if CheckKind.VJP in ad and CheckKind.JVP in ad:
        _emit(ctx, CheckKind.FWD_REV, where, ad[CheckKind.JVP], ad[CheckKind.VJP],
              np.zeros_like(s_fd), terms, ctx.rule_dtype, (), pr, None)
    if CheckKind.VJP in ad:
        _compare_alternatives(ctx, where, alt, pr, i, j, ad[CheckKind.VJP], mag_fd)
        if low is not None and ctx.rule_dtype == "float64":
            _compare_low(ctx, where, low[i], pr, fde, sl)


def _fd_side(fde, pr, i, j, sl, got):
    """The oracle's scalars and the absolute terms of the comparison (:func:`_terms`)."""
    s_fd, e_fd, mag_fd = _fd_scalars(fde, pr, i, j, sl)
    return s_fd, e_fd, mag_fd, _terms(mag_fd, got)


def _terms(mag_fd: np.ndarray, got: dict) -> np.ndarray:
    """The absolute terms of ``<v, J u>`` per probe, from the FD side's ``sum |v| |J u|`` and
    the AD magnitudes in ``got`` (kind -> (scalars, magnitudes)).

    Rounding of <v, J u> scales with its absolute terms sum_ij |v_i| |J_ij| |u_j|, which
    neither side shows alone: sum_i |v_i| |(J u)_i| misses cancellation inside J u (a dot
    product of two inputs), sum_j |(J^T v)_j| |u_j| misses it inside J^T v.  Both sides
    count, whichever mode is checked (measured: with the forward side alone, a 14-term
    bilinear JVP reached 0.92 of its rounding allowance)."""
    fwd_side = np.maximum(mag_fd, got[CheckKind.JVP][1]) if CheckKind.JVP in got else mag_fd
    rev_side = got[CheckKind.VJP][1] if CheckKind.VJP in got else fwd_side
    return fwd_side + rev_side


def _probe_ratios(ctx: _Ctx, actual, expected, fd_err, magnitude, round_dtype, *,
                  conditioning=None, measured=None) -> tuple[list[float], list[Any]]:
    """Per probe: the ratio of ``|actual - expected|`` to the allowance, and the allowance
    (:func:`gradcheck.tolerance.allowance`, or the explicit atol/rtol)."""
    ratios, allows = [], []
    for p in range(len(actual)):
        a = tolerance.allowance(
            float(expected[p]), float(fd_err[p]), float(magnitude[p]), round_dtype,
            conditioning=0.0 if conditioning is None else float(conditioning[p]),
            measured=0.0 if measured is None else float(measured[p]),
            atol=ctx.cfg.atol, rtol=ctx.cfg.rtol)
        allows.append(a)
        ratios.append(tolerance.ratio(abs(float(actual[p]) - float(expected[p])), a.allowed))
    return ratios, allows


def _abs_rows(rows: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``|r|`` flattened for each row, computed once per distinct array (the screen's probes
    share one tangent: the same array in every row)."""
    seen: dict[int, np.ndarray] = {}
    return [seen.setdefault(id(r), np.abs(r).ravel()) for r in rows]


def _abs_dot(a: np.ndarray, b_abs: np.ndarray, work: list[np.ndarray]) -> float:
    """``|a| . b_abs``, ``|a|`` written into a work array reused across calls of one shape."""
    a = a.ravel()
    if not work or work[0].shape != a.shape or work[0].dtype != a.dtype:
        work[:] = [np.empty_like(a)]
    return np.abs(a, out=work[0]) @ b_abs


def _ad_scalars(kind, source, pr, i, j):
    s, mag = [], []
    work: list[np.ndarray] = []
    if kind is CheckKind.VJP:
        au = _abs_rows(pr.u[j])
    else:  # the screen's probes share one JVP: |J u| once
        rows = [source[(j, p)] for p in range(len(pr.v[i]))]
        at = _abs_rows([t[i] for t in rows if not isinstance(t, Exception)])
    for p in range(len(pr.v[i])):
        if kind is CheckKind.VJP:
            g = source[(i, p)]
            if isinstance(g, Exception):
                return g
            gj = g[list(pr.u).index(j)].ravel()
            u = pr.u[j][p].ravel()
            s.append(gj @ u)
            mag.append(_abs_dot(gj, au[p], work))
        else:
            t = source[(j, p)]
            if isinstance(t, Exception):
                return t
            ti = t[i].ravel()
            v = pr.v[i][p].ravel()
            s.append(v @ ti)
            mag.append(_abs_dot(v, at[p], work))
    return np.array(s), np.array(mag)


def _rule_conditioning(ctx, pr, where, fde, sl) -> np.ndarray | None:
    """Conditioning term of the rule check for engines whose widest dtype is below float64."""
    if ctx.rule_dtype == "float64":
        return None
    i = where["output_index"]
    y = np.asarray(ctx.outs64[i], dtype=np.float64).ravel()
    return np.array([tolerance.conditioning_term(pr.v[i][p].ravel(), y, fde.curvature[p, sl],
                                                 fde.value[p, sl])
                     for p in range(len(pr.v[i]))])


def _compare_alternatives(ctx, where, alt, pr, i, j, s_rev, mag_fd) -> None:
    names: list[str] = []
    for p in range(len(pr.v[i])):
        a = alt.get((i, p))
        if isinstance(a, NotImplementedError):
            ctx.result(CheckKind.EAGER_FUNC.value, Status.SKIPPED, **where, message=str(a))
            return
        if isinstance(a, Exception):
            ctx.result(CheckKind.EAGER_FUNC.value, Status.ERROR, **where,
                       message=f"alternative reverse path raised: {_describe_exc(a)}")
            return
        names = list(a or {})
    au = _abs_rows(pr.u[j])
    work: list[np.ndarray] = []
    for name in names:
        s, mag = [], []
        for p in range(len(pr.v[i])):
            gj = alt[(i, p)][name][list(pr.u).index(j)].ravel()
            u = pr.u[j][p].ravel()
            s.append(gj @ u)
            mag.append(_abs_dot(gj, au[p], work))
        terms = np.array(mag) + mag_fd
        _emit(ctx, CheckKind.EAGER_FUNC, where, np.array(s), s_rev, np.zeros_like(s_rev),
              terms, ctx.rule_dtype, (), pr, None, label=name,
              measured=_path_noise_if_needed(ctx, name, pr, i, j, np.array(s), s_rev, terms,
                                             np.array(mag)))


def _path_noise_if_needed(ctx, name, pr, i, j, s, s_rev, terms, share_terms):
    """The two reverse paths' measured rounding noise (:mod:`._path_noise`), only where the
    final-terms bound is exceeded and the error model (not an explicit tolerance) judges."""
    if ctx.cfg.atol is not None or ctx.cfg.rtol is not None or ctx.rule_dtype != "float64":
        return None
    bound = tolerance.ROUNDING_GAMMA * tolerance.eps("float64") * terms
    if np.all(np.abs(s - s_rev) <= bound) or not np.all(np.isfinite(s)):
        return None
    P = len(pr.v[i])
    cts = [_cotangents(ctx, i, pr.v[i][p], np.float64) for p in range(P)]
    shares = tolerance.ROUNDING_GAMMA * tolerance.eps("float64") * share_terms
    return _path_noise.measured_extra(ctx.backend, ctx.fn, name, ctx.args64, ctx.diff,
                                      list(ctx.diff).index(j), cts,
                                      [pr.u[j][p] for p in range(P)], list(shares), ctx.device,
                                      ctx.cfg.seed)


def _compare_low(ctx, where, smp, pr, fde, sl) -> None:
    """The low-precision rounding check for one (output, input) pair, norm-wise."""
    i, j = where["output_index"], where["input_index"]
    if isinstance(smp, Exception):
        ctx.result(CheckKind.ROUNDING.value, Status.ERROR, **where,
                   message=f"the backend's {ctx.dtype} VJP raised: {_describe_exc(smp)}")
        return
    y = np.asarray(ctx.outs64[i], dtype=np.float64).ravel()
    y_d = np.asarray(ctx.outs_d[i], dtype=np.float64).ravel()
    # sizes of the first and second directional derivatives per output element, as root mean
    # squares over the probes: one probe can make (J u)_i vanish by cancellation, all rarely do
    with np.errstate(all="ignore"):
        ju = np.sqrt(np.mean(np.square(fde.value[:, sl]), axis=0))
        curv = np.sqrt(np.mean(np.square(fde.curvature[:, sl]), axis=0))
        noise64 = np.max(fde.noise[:, sl], axis=0)
    n_fwd = tolerance.forward_error(y, y_d, noise64, ctx.dtype)
    cond = tolerance.conditioning_norm(pr.v[i][0].ravel(), n_fwd, curv, ju)
    cmp = rounding.compare(smp, ctx.diff.index(j), ctx.args64[j].shape, ctx.dtype, cond,
                           ctx.cfg.atol, ctx.cfg.rtol)
    ratio = tolerance.ratio(cmp.discrepancy, cmp.allowance.allowed)
    ok = ratio <= 1.0 and np.isfinite(cmp.actual)
    rel = cmp.discrepancy / cmp.expected if cmp.expected else (0.0 if not cmp.discrepancy
                                                               else float("inf"))
    r = ctx.result(
        CheckKind.ROUNDING.value, Status.PASSED if ok else Status.FAILED, **where,
        expected=cmp.expected, actual=cmp.actual, discrepancy=cmp.discrepancy,
        relative_discrepancy=float(rel), allowed=cmp.allowance.allowed,
        allowed_source=cmp.allowance.source, discrepancy_ratio=float(ratio),
        worst=() if ok else cmp.worst,
        details={"compared": f"L2 norm of the whole VJP, {ctx.dtype} vs float64",
                 "measured_noise": cmp.noise, "conditioning": cond,
                 "max_abs_discrepancy": max((abs(w.actual - w.expected) for w in cmp.worst),
                                            default=0.0),
                 "max_rel_discrepancy": float(rel)},
    )
    verdict = "agrees" if ok else "DISAGREES"
    v = shown(r)
    assert v is not None
    ctx.results[-1] = replace(r, message=(
        f"{r.subject} {verdict}: ||VJP|| {v.actual} in {ctx.dtype} vs {v.expected} "
        f"in float64; ||difference|| {v.difference} (relative {v.relative}), allowed "
        f"{v.allowed} [{cmp.allowance.source}], ratio {v.ratio}"))


def _emit(ctx, kind, where, actual, expected, fd_err, magnitude, round_dtype, conv, pr, fde,
          *, label: str = "", conditioning=None, measured=None, oracle_note: str = "") -> None:
    """Turn per-probe scalars into one result (worst probe) and localize on failure."""
    ratios, allows = _probe_ratios(ctx, actual, expected, fd_err, magnitude, round_dtype,
                                   conditioning=conditioning, measured=measured)
    p = int(np.argmax(ratios))
    ok = ratios[p] <= 1.0 and np.isfinite(actual[p])
    # resolution before verdict: a pass needs an allowance small against the compared terms
    # on every probe (tolerance.resolved; the model's allowance, also under atol/rtol)
    model = [tolerance.model_allowance(
        float(fd_err[q]), float(magnitude[q]), round_dtype,
        conditioning=0.0 if conditioning is None else float(conditioning[q]),
        measured=0.0 if measured is None else float(measured[q])).allowed
        for q in range(len(actual))]
    with np.errstate(all="ignore"):
        resolution = [m / float(t) if t > 0 else 0.0 for m, t in zip(model, magnitude,
                                                                          strict=True)]
    floors = _rounding_floors(ctx, where, pr, fde, len(actual))
    unresolved = [q for q in range(len(actual))
                  if not tolerance.resolved(model[q], float(magnitude[q]),
                                            fd_error=float(fd_err[q]), rounding_floor=floors[q])]
    if ok and unresolved:
        p = max(unresolved, key=lambda q: resolution[q])
    disc = abs(float(actual[p]) - float(expected[p]))
    rel = disc / abs(float(expected[p])) if expected[p] != 0 else (0.0 if disc == 0 else np.inf)
    status = (Status.FAILED if not ok else Status.INCONCLUSIVE if unresolved
              else Status.PASSED)
    worst: tuple[WorstElement, ...] = ()
    details: dict[str, Any] = {"probe": p, "probes": len(actual),
                               "resolution": float(max(resolution))}
    if label:
        details["path"] = label
    if oracle_note:
        details["oracle"] = oracle_note
    if round_dtype != ctx.dtype:
        details["computed_in"] = round_dtype
    if not ok:
        level = _rounding_level(ctx, where, pr, p, disc, float(magnitude[p]), round_dtype)
        if level is not None:
            details["rounding_level"] = level
    if not ok and kind in (CheckKind.VJP, CheckKind.JVP) and ctx.cfg.localize:
        worst, loc = _localize(ctx, kind, where["output_index"], where["input_index"])
        details.update(loc)
    r = ctx.result(
        kind.value, status, **where, expected=float(expected[p]), actual=float(actual[p]),
        discrepancy=disc, relative_discrepancy=float(rel), allowed=allows[p].allowed,
        allowed_source=allows[p].source, discrepancy_ratio=float(ratios[p]), worst=worst,
        convergence=conv[p] if conv else (), details=details,
    )
    message = _message(r, label)
    if "rounding_level" in details:
        message = (f"{message}; at the rounding level (|diff| within "
                   f"{number(details['rounding_level'])}, {tolerance.ROUNDING_LEVEL:g} eps of "
                   "the comparison's scale): a rounding inconsistency, not a wrong rule")
    if status is Status.INCONCLUSIVE:
        message = _unresolved_message(r, label, model[p], float(magnitude[p]), fd_err is not None
                                      and float(fd_err[p]) > 0)
    ctx.results[-1] = replace(r, message=message)


def _rounding_level(ctx: _Ctx, where: dict, pr: _Probes, p: int, disc: float, terms: float,
                    dtype: str) -> float | None:
    """:func:`gradcheck.tolerance.rounding_level` of probe ``p``'s comparison."""
    v = pr.v[where["output_index"]][p]
    u = pr.u[where["input_index"]][p]
    return tolerance.rounding_level(disc, terms, float(np.linalg.norm(v) * np.linalg.norm(u)),
                                    dtype)


def _rounding_floors(ctx: _Ctx, where: dict, pr: _Probes, fde: fd.FDEstimate | None,
                     P: int) -> list[float]:
    """Per probe, :func:`gradcheck.tolerance.fd_rounding_floor` of the estimate ``fde`` (0
    without one: comparisons of two AD values have no oracle error to excuse), at the first
    attempt's smallest step."""
    if fde is None:
        return [0.0] * P
    i = where["output_index"]
    sl = _out_slices(ctx)[i]
    f = np.asarray(ctx.outs64[i], dtype=np.float64).ravel()
    steps = fde.steps[:, : fd.DEFAULT_LEVELS]
    return [tolerance.fd_rounding_floor(pr.v[i][q].ravel(), f, fde.value[q, sl],
                                        fde.curvature[q, sl], float(np.max(steps[q])),
                                        float(np.min(steps[q]))) for q in range(P)]


def _unresolved_message(r: CheckResult, label: str, model: float, terms: float,
                        fd: bool) -> str:
    what = r.subject + (f" ({label})" if label else "")
    v = shown(r)
    assert v is not None
    times = f"{model / terms:.3g}x" if terms > 0 else "infinitely many times"
    cause = ("the finite-difference estimate cannot resolve this derivative (f is noisy, "
             "nondeterministic or not smooth on the scale of the steps)" if fd else
             "the rounding bound of this comparison is as large as what it compares")
    return (f"{what} not resolved: allowed error {number(model)} is {times} the compared "
            f"terms {number(terms)} (at most {tolerance.RESOLUTION:g}x can pass): {cause}, not "
            f"passed; actual {v.actual} vs expected {v.expected}, |diff| {v.difference} "
            f"[{r.allowed_source}]")


def _message(r: CheckResult, label: str) -> str:
    what = r.subject + (f" ({label})" if label else "")
    verdict = "agrees" if r.status is Status.PASSED else "DISAGREES"
    v = shown(r)
    assert v is not None  # every caller compared two values
    return (f"{what} {verdict}: actual {v.actual} vs expected {v.expected}; "
            f"|diff| {v.difference} (relative {v.relative}), "
            f"allowed {v.allowed} [{r.allowed_source}], ratio {v.ratio}")


def _kink_message(fde: fd.FDEstimate, sl: slice) -> str:
    kink = fde.kink[:, sl]
    if np.any(kink):
        p, e = np.argwhere(kink)[0]
        return (f"not differentiable at this point: along probe {p}, output element {e} has "
                f"left derivative {fde.left[p, sl][e]:.6g} and right derivative "
                f"{fde.right[p, sl][e]:.6g}")
    return "the oracle could not produce a finite estimate (the function is non-finite near " \
           "the point along every step)"


def _convergence(fde: fd.FDEstimate, p: int, v: np.ndarray, sl: slice
                 ) -> tuple[tuple[float, float], ...]:
    """(step, projected central difference) along probe ``p``: the reported probe's table."""
    return tuple((float(h), float(v @ fde.table[p, k, sl]))
                 for k, h in enumerate(fde.steps[p]) if np.isfinite(h))  # NaN: no such step


# -- localization ------------------------------------------------------------------------------


def _localize(ctx: _Ctx, kind: CheckKind, i: int, j: int):
    """Full Jacobian block ``J_ij`` from AD and from FD (column-compressed where the AD
    pattern is sparse: :mod:`gradcheck.checks._sparse_jacobian`); the worst elements."""
    n = ctx.args64[j].size
    m = int(np.size(ctx.outs64[i]))
    if m * n > _LOCALIZE_MAX_ELEMENTS or n > _LOCALIZE_MAX_COLUMNS:
        return (), {"localized": f"skipped: block {m}x{n} too large to localize"}
    try:
        J_ad = _ad_jacobian(ctx, kind, i, j, m, n)
        # FD compressed by the colouring of the AD pattern where it is sparse; a wrong pattern
        # cannot hide an error (random weights, verified attribution: _sparse_jacobian)
        est = _sparse_jacobian.fd_jacobian(_batch_fn(ctx, j), ctx.args64[j].ravel(), J_ad,
                                           _out_slices(ctx)[i], f0=_f0(ctx), seed=ctx.cfg.seed)
        J_fd, E_fd = est.value, est.error
    except Exception as exc:
        return (), {"localized": f"failed: {_describe_exc(exc)}"}
    # only elements nonzero on either side can differ (NaN counts as nonzero): a sparse block
    # is compared on its support, a dense one on every element
    rows, cols = np.nonzero((J_ad != 0) | (J_fd != 0))
    ad, fd_, err = J_ad[rows, cols], J_fd[rows, cols], E_fd[rows, cols]
    allowed = tolerance.FD_SAFETY * err + tolerance.ROUNDING_GAMMA * tolerance.eps(
        ctx.rule_dtype) * (np.abs(ad) + np.abs(fd_))
    diff = np.abs(ad - fd_)
    with np.errstate(all="ignore"):
        r = diff / np.maximum(allowed, 1e-300)
    key = np.where(np.isnan(r), np.inf, -r)  # largest ratio first, NaN last
    top = np.argpartition(key, _WORST)[:_WORST] if key.size > _WORST else np.arange(key.size)
    out_shape, in_shape = np.shape(ctx.outs64[i]), ctx.args64[j].shape
    worst = []
    for e in top[np.argsort(key[top], kind="stable")]:
        if r[e] <= 1.0:
            break
        a, b = rows[e], cols[e]
        idx = tuple(int(t) for t in np.unravel_index(a, out_shape) + np.unravel_index(b, in_shape))
        worst.append(WorstElement(idx, float(ad[e]), float(fd_[e]), float(allowed[e])))
    scale = float(np.max(np.abs(fd_))) if fd_.size else 0.0
    biggest = float(np.max(diff)) if diff.size else 0.0
    return tuple(worst), {
        "localized": f"full Jacobian {m}x{n}",
        "fd_jacobian": est.how,
        "fd_evaluations": est.evaluations,
        "max_abs_discrepancy": biggest,
        "max_rel_discrepancy": biggest / scale if scale else 0.0,
        "elements_over": int(np.count_nonzero(r > 1.0)),
    }


def _ad_jacobian(ctx: _Ctx, kind: CheckKind, i: int, j: int, m: int, n: int) -> np.ndarray:
    """The AD block ``J_ij``: rows from batched VJPs with unit cotangents, or columns from
    batched JVPs with unit tangents, ``_LOCALIZE_ROWS`` per call, vectorized (the engine's
    vmap) where it can be: localization is a diagnosis, its cost scales with the block."""
    J = np.empty((m, n))
    pos = ctx.diff.index(j)
    out_shape, in_shape = np.shape(ctx.outs64[i]), ctx.args64[j].shape
    size = m if kind is CheckKind.VJP else n
    for start in range(0, size, _LOCALIZE_ROWS):
        stop = min(start + _LOCALIZE_ROWS, size)
        unit = np.zeros((stop - start, size))
        unit[np.arange(stop - start), np.arange(start, stop)] = 1.0
        if kind is CheckKind.VJP:
            cts = [unit.reshape((-1,) + out_shape) if k == i else
                   np.zeros((stop - start,) + np.shape(o)) for k, o in enumerate(ctx.outs64)]
            g = ctx.backend.vjp_batch(ctx.fn, ctx.args64, ctx.diff, cts, ctx.device,
                                      vectorize=True)[pos]
            J[start:stop] = np.asarray(g, dtype=np.float64).reshape(stop - start, n)
        else:
            tans = [unit.reshape((-1,) + in_shape) if k == j else
                    np.zeros((stop - start,) + ctx.args64[k].shape) for k in ctx.diff]
            t = ctx.backend.jvp_batch(ctx.fn, ctx.args64, ctx.diff, tans, ctx.device,
                                      vectorize=True)[i]
            J[:, start:stop] = np.asarray(t, dtype=np.float64).reshape(stop - start, m).T
    return J


# -- second order ------------------------------------------------------------------------------

_ORDER2 = {
    ("vjp", CheckKind.VJP): CheckKind.VJP_OF_VJP,
    ("vjp", CheckKind.JVP): CheckKind.JVP_OF_VJP,
    ("jvp", CheckKind.JVP): CheckKind.JVP_OF_JVP,
}


def _second_order(ctx: _Ctx) -> None:
    if not ctx.backend.supports_order2:
        ctx.result(CheckKind.VJP_OF_VJP.value, Status.SKIPPED,
                   message=f"backend {ctx.backend.name!r} declares no order-2 support")
        return
    rng = np.random.default_rng(ctx.cfg.seed + 1)
    n_args = len(ctx.args64)
    for first in ("vjp", "jvp"):
        if first == "jvp" and not ctx.backend.supports_jvp:
            continue
        modes = tuple(m for m in ctx.cfg.modes if (first, _mode_kind(m)) in _ORDER2)
        if not modes:
            continue
        try:
            if first == "vjp":
                g = ctx.backend.vjp_function(ctx.fn, ctx.diff, n_args)
                extra = [rng.standard_normal(np.shape(o)) for o in ctx.outs64]
            else:
                g = ctx.backend.jvp_function(ctx.fn, ctx.diff, n_args)
                extra = [rng.standard_normal(ctx.args64[k].shape) for k in ctx.diff]
        except NotImplementedError as exc:  # this function has no composable derivative
            kind = CheckKind.VJP_OF_VJP if first == "vjp" else CheckKind.JVP_OF_JVP
            ctx.result(kind.value, Status.SKIPPED, message=str(exc),
                       details={"order": 2, "first": first})
            continue
        sub_cfg = replace(ctx.cfg, order=1, modes=modes, only_inputs=tuple(ctx.diff), order_level=1,
                          name=f"{ctx.cfg.name} [{first.upper()} as a function]")
        sub = run_numeric_checks(ctx.backend, g, list(ctx.args64) + extra, device=ctx.device,
                                 dtype="float64", config=sub_cfg)
        for r in sub:
            kind = _ORDER2.get((first, _kind_of(r.kind)))
            if kind is None and r.kind not in (CheckKind.CALL.value, CheckKind.FWD_REV.value):
                continue
            new = replace(r, kind=kind.value if kind else r.kind, dtype=ctx.dtype,
                          name=ctx.cfg.name, details={**r.details, "order": 2, "first": first})
            ctx.results.append(replace(new, message=r.message.replace(r.subject, new.subject, 1)))


def _mode_kind(mode: str) -> CheckKind:
    return CheckKind.VJP if mode == "rev" else CheckKind.JVP


def _kind_of(kind: str) -> CheckKind | None:
    try:
        return CheckKind(kind)
    except ValueError:
        return None
