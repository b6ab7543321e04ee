"""Preparation: evaluate at the point and decide whether there is anything to compare.

:func:`prepare` evaluates the function in float64 (purity, determinism, shapes, finiteness,
complex and empty outputs) and in the dtype under test; it returns the frozen
:class:`~.context.Prepared` state of the comparisons, or :class:`~.context.Finished` where the
results it recorded end the run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from gradcheck.backends import trees
from gradcheck.backends.guarded import AdapterFailure, FailureKind, GuardedBackend
from gradcheck.backends.trees import FlatCall
from gradcheck.core.dtypes import is_complex, numpy_dtype, widest_dtype
from gradcheck.core.results import CheckKind, Status
from gradcheck.numeric.context import (
    CheckConfig,
    Finished,
    Prepared,
    Recorder,
    input_name,
    is_float,
    output_name,
    outputs,
)
from gradcheck.oracle import error_model


def prepare(backend: GuardedBackend, fn: Callable, inputs: Sequence[Any], *, device: str,
            dtype: str, config: CheckConfig, recorder: Recorder) -> Prepared | Finished:
    """The state of the comparisons, or :class:`Finished` where the recorded results end the
    run."""
    cfg, rec = config, recorder
    args = [np.asarray(a) for a in inputs]
    diff = [k for k, a in enumerate(args) if is_float(a)]
    if cfg.only_inputs is not None:
        diff = [k for k in diff if k in cfg.only_inputs]
    if not diff:
        rec.record(CheckKind.CALL, Status.ERROR,
                   message="no floating-point input to differentiate (integer inputs pass "
                           "through undifferentiated)")
        return Finished("no input")
    empty = [k for k in diff if args[k].size == 0]
    for k in empty:
        rec.record(CheckKind.VJP, Status.INCONCLUSIVE, input_index=k,
                   message=f"{input_name(cfg.input_paths, k)} is empty (shape "
                           f"{args[k].shape}): nothing to check")
    diff = [k for k in diff if k not in empty]
    if not diff:
        return Finished("empty inputs")
    oracle, rule_dtype = None, "float64"
    if "float64" not in backend.dtypes:
        rule_dtype = widest_dtype(backend.dtypes)
        found = backend.oracle_forward(fn)
        if isinstance(found, AdapterFailure):
            rec.record(CheckKind.CALL, Status.ERROR,
                       message=f"unexpected failure while checking: {found.text}")
            return Finished("oracle_forward failed")
        oracle = found
        if oracle is None:
            rec.record(CheckKind.CALL, Status.SKIPPED,
                       message=f"backend {backend.name!r} cannot compute in float64 and gives no "
                               "float64 forward for the oracle (Backend.oracle_forward): finite "
                               f"differences of a {rule_dtype} function are not a reliable oracle")
            return Finished("no float64 oracle")
    low = numpy_dtype(dtype)
    args_d = [a.astype(low) if k in diff else a for k, a in enumerate(args)]
    # args_d is the check's own copy; in float64 args64 is the same array (no second copy)
    args64 = [a.astype(np.float64, copy=False) if k in diff else a
              for k, a in enumerate(args_d)]
    evaluate = _evaluator(backend, fn, args64, device, oracle)
    before = [np.array(a, copy=True) for a in args64]
    outs64 = evaluate()
    if isinstance(outs64, AdapterFailure):
        if outs64.unsupported:  # a capability the adapter declares missing
            rec.record(CheckKind.CALL, Status.SKIPPED, message=outs64.reason)
        else:
            low_ok = _computes_in(backend, fn, args64, diff, device, dtype)
            rec.record(CheckKind.CALL, Status.ERROR,
                       details={"computes_in": low_ok} if low_ok else {},
                       message=f"the function raised at the sample point (float64): "
                               f"{outs64.text}{_dtype_hint(low_ok)}")
        return Finished("evaluation failed")
    # the determinism check's second evaluation: the forward pass of the screen's reverse
    # path where the screen runs one and the adapter gives its outputs (deterministic()
    # there), else one more evaluation now
    deferred = (dtype == "float64" and oracle is None and "rev" in cfg.modes
                and backend.vjp_gives_primal)
    if not _pure(rec, before, args64) or (
            not deferred and not _deterministic(rec, evaluate, outs64, cfg.error_model)):
        return Finished("impure or nondeterministic")
    paths = getattr(outs64, "paths", None) or getattr(fn, "output_paths", None)
    float_outs = [i for i, o in enumerate(outs64) if is_float(np.asarray(o))]
    complex_outs = [i for i, o in enumerate(outs64) if is_complex(np.asarray(o).dtype)]
    if (complex_outs and backend.backend.complex_convention is not None and oracle is None
            and not isinstance(fn, FlatCall)):  # checked as their real and imaginary parts
        return Finished("complex outputs", retry=trees.realified(fn, backend.backend))
    for i in complex_outs:  # not left out silently
        name = np.asarray(outs64[i]).dtype.name
        rec.record(CheckKind.CALL, Status.SKIPPED, output_index=i, paths=paths,
                   message=f"{output_name(paths, i)} is complex ({name}): complex derivatives "
                           "are not checked; return its .real and .imag as two outputs to "
                           "check them")
    for i in [i for i in range(len(outs64)) if i not in float_outs and i not in complex_outs]:
        if cfg.order_level == 0:  # once: an order-2 sub-run's outputs are derivatives of these
            _integer_output(rec, outs64[i], i, paths, bool(float_outs))
    if not float_outs and complex_outs:
        return Finished("complex outputs")
    if not float_outs:
        rec.record(CheckKind.CALL, Status.ERROR,
                   message="the function returned no floating-point output")
        return Finished("no float output")
    for i in float_outs:
        bad = int(np.size(outs64[i]) - np.count_nonzero(np.isfinite(outs64[i])))
        if bad:
            rec.record(CheckKind.CALL, Status.INCONCLUSIVE, output_index=i, paths=paths,
                       message=f"{output_name(paths, i)} has {bad} non-finite value(s) at the "
                               "sample point: derivatives are not defined there")
            return Finished("non-finite output")
    if all(np.size(outs64[i]) == 0 for i in float_outs):
        _empty_outputs(backend, fn, device, rec, args64, diff, outs64, float_outs, paths)
        return Finished("empty outputs")
    float_outs = [i for i in float_outs if np.size(outs64[i]) > 0]
    prep = Prepared(backend, fn, device, dtype, cfg, rec, tuple(args64), tuple(args_d),
                    tuple(diff), tuple(outs64), tuple(float_outs), oracle=oracle,
                    rule_dtype=rule_dtype, output_paths=paths, determinism_deferred=deferred)
    if dtype == "float64":
        return prep
    outs_d = _low_precision_outputs(prep)
    if outs_d is None:
        return Finished("low precision evaluation failed")
    return replace(prep, outs_d=tuple(outs_d))


def _computes_in(backend: GuardedBackend, fn: Callable, args64: list[np.ndarray],
                 diff: list[int], device: str, dtype: str) -> str | None:
    """The lower floating dtype ``fn`` runs in where it raised in float64 (a float32 module
    or tensor it closes over), or None: one more evaluation, after a failure only."""
    for low in dict.fromkeys((dtype, "float32")):
        if low == "float64" or low not in backend.dtypes:
            continue
        cast = [a.astype(numpy_dtype(low)) if k in diff else a for k, a in enumerate(args64)]
        if not isinstance(backend.evaluate(fn, cast, device), AdapterFailure):
            return low
    return None


def _dtype_hint(low: str | None) -> str:
    """What to do when ``fn`` runs in ``low`` but not in float64."""
    if low is None:
        return ""
    return (f". It runs with {low} inputs: fn computes in {low} (it closes over a {low} "
            f"module or tensor, e.g. an nn.Linear). gradcheck differentiates fn in float64 "
            f"(the oracle and the rule), also with dtype=\"{low}\", which checks the {low} "
            f"rounding on top and does not avoid the float64 evaluation. Convert what fn "
            f"closes over to float64 and check again: module.double() (torch), "
            f"jax.tree.map(lambda p: p.astype(jnp.float64), params) (JAX); then "
            f"dtype=\"{low}\" checks the {low} rounding where fn also runs with {low} inputs")


def _integer_output(rec: Recorder, out: Any, i: int, paths: tuple[str, ...] | None,
                    others: bool) -> None:
    """A skipped result naming an integer or boolean output (an argmax, ``topk``/``sort``/
    ``max`` indices, a mask): it has no derivative, so it is not compared, and never left out
    silently; the floating outputs beside it are checked."""
    name = np.asarray(out).dtype.name
    rest = ("the floating-point outputs are checked" if others
            else "the function has no floating-point output to check")
    rec.record(CheckKind.CALL, Status.SKIPPED, output_index=i, paths=paths,
               details={"not_differentiable_output": name},
               message=f"{output_name(paths, i)} is {name} (integer or boolean values have no "
                       f"derivative): not checked; {rest}")


def _evaluator(backend: GuardedBackend, fn: Callable, args64: list[np.ndarray], device: str,
               oracle: Callable | None) -> Callable[[], list[Any] | AdapterFailure]:
    """The float64 evaluation at the point: the adapter's, or the oracle's NumPy forward."""
    if oracle is None:
        return lambda: backend.evaluate(fn, args64, device)

    def on_oracle() -> list[np.ndarray]:
        return [np.asarray(o, dtype=np.float64) for o in outputs(oracle(*args64))]

    return lambda: backend.call("oracle forward", on_oracle)


def _equal(a: np.ndarray, b: np.ndarray, *, equal_nan: bool) -> bool:
    """``np.array_equal(a, b, equal_nan=...)`` (same shape), one pass where no element
    differs (``array_equal`` with ``equal_nan`` indexes out the NaNs first: several copies)."""
    if bool(np.all(a == b)):
        return True
    return bool(np.array_equal(a, b, equal_nan=equal_nan))


def _pure(rec: Recorder, before: list[np.ndarray], after: list[np.ndarray]) -> bool:
    """Whether the first evaluation left every input as it was (the arrays handed to the
    adapter; an adapter whose native tensors share their memory, as torch's ``as_tensor`` does
    for float64, shows a tensor's in-place change in them); an ``error`` result naming each
    modified input where not."""
    changed = []
    for k, (a, b) in enumerate(zip(before, after, strict=True)):
        if a.shape == b.shape and _equal(a, b, equal_nan=is_float(a)):
            continue
        with np.errstate(all="ignore"):
            size = (float(np.nanmax(np.abs(b.astype(np.float64) - a.astype(np.float64))))
                    if a.shape == b.shape and a.size and np.issubdtype(a.dtype, np.number)
                    else float("nan"))
        changed.append(k)
        rec.record(CheckKind.CALL, Status.ERROR, input_index=k,
                   details={"modified_input": k, "max_change": size},
                   message=f"fn modified {input_name(rec.identity.input_paths, k)} in place "
                           f"(max change {size:.3g}); gradcheck needs a pure function: copy "
                           "the input before changing it (x = x.clone() / x.copy())")
    return not changed


def deterministic(prep: Prepared, again: Sequence[Any] | None) -> bool:
    """Where preparation deferred the determinism check to the screen
    (:attr:`Prepared.determinism_deferred`), whether ``f`` is deterministic; ``again`` is the
    outputs of the forward pass the reverse path differentiated (or None), a second
    evaluation of ``f`` at the point: where they agree with the first evaluation (the one the
    oracle reads, with ``no_grad``) within the bound of :func:`_deterministic`, that decides
    it; where they do not (the taped forward may take other kernels) or are missing, ``f`` is
    evaluated once more as preparation would have, and that decides it (its ``inconclusive``
    result recorded where the two differ)."""
    if not prep.determinism_deferred:
        return True
    model = prep.cfg.error_model
    if again is not None and len(again) == len(prep.outs64) and \
            _difference(prep.outs64, again, model)[1] is None:
        return True
    evaluate = _evaluator(prep.backend, prep.fn, list(prep.args64), prep.device, prep.oracle)
    return _deterministic(prep.recorder, evaluate, prep.outs64, model, prep.output_paths)


def _deterministic(rec: Recorder, evaluate: Callable[[], list[Any] | AdapterFailure],
                   outs64: Sequence[Any], model: error_model.ErrorModel,
                   paths: tuple[str, ...] | None = None) -> bool:
    """Whether a second evaluation at the same point gives the same outputs, within
    ``rounding_gamma`` ulps of each output element (a multithreaded reduction may sum in another
    order); an ``inconclusive`` result with the size of the difference where not: finite
    differences of a function that changes between calls estimate nothing."""
    again = evaluate()
    if isinstance(again, AdapterFailure):  # it evaluated once: not a missing capability
        rec.record(CheckKind.CALL, Status.ERROR,
                   message=f"unexpected failure while checking: {again.text}")
        return False
    paths = paths or getattr(outs64, "paths", None)
    worst, where = _difference(outs64, again, model)
    if where is None:
        return True
    rec.record(CheckKind.CALL, Status.INCONCLUSIVE, output_index=where,
               details={"nondeterministic": worst},
               message=f"fn is nondeterministic: two evaluations at the same point differ by "
                       f"up to {worst:.3g} in {output_name(paths, where)} (more than "
                       f"{model.rounding_gamma:g} ulps of the output); finite differences "
                       "of it estimate nothing, so no derivative was checked (make it "
                       "deterministic: fix its random seed inside fn, or pass the noise as an "
                       "input)")
    return False


def nondeterministic(rec: Recorder) -> bool:
    """Whether the run recorded that ``f`` is nondeterministic (then nothing else runs)."""
    return any(r.kind is CheckKind.CALL and "nondeterministic" in r.details
               for r in rec.results)


def _difference(outs64: Sequence[Any], again: Sequence[Any], model: error_model.ErrorModel
                ) -> tuple[float, int | None]:
    """The largest difference between two evaluations' outputs beyond the rounding bound of
    :func:`_deterministic`, and the output where it is (None: none beyond it)."""
    worst, where = 0.0, None
    for i, (a, b) in enumerate(zip(outs64, again, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        if not is_float(a) or (a.shape == b.shape and _equal(a, b, equal_nan=True)):
            continue  # (the common case: bit-identical, one pass)
        a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a64.shape != b64.shape:
            worst, where = float("inf"), i
            break
        with np.errstate(all="ignore"):
            d = np.abs(a64 - b64)
            bound = model.rounding(np.maximum(np.abs(a64), np.abs(b64)), a.dtype.name)
            over = (d > bound) & ~(np.isnan(a64) & np.isnan(b64))
        if np.any(over):
            size = float(np.nanmax(np.where(over, d, 0.0)))
            if size > worst or where is None:
                worst, where = size, i
    return worst, where


def _empty_outputs(backend: GuardedBackend, fn: Callable, device: str, rec: Recorder,
                   args64: list[np.ndarray], diff: list[int], outs64: Sequence[Any],
                   float_outs: list[int], paths: tuple[str, ...] | None) -> None:
    """Every floating output is empty: the Jacobian has no rows and nothing can be compared
    with finite differences, but the VJP of an empty cotangent must still be exactly zero (an
    engine that returns anything else for an unused parameter is wrong)."""
    shapes = ", ".join(str(np.shape(outs64[i])) for i in float_outs)
    cts = [np.zeros(np.shape(o), dtype=np.float64) for o in outs64]
    grads = backend.vjp(fn, args64, diff, cts, device)
    if isinstance(grads, AdapterFailure):
        if grads.unsupported:
            rec.record(CheckKind.VJP, Status.SKIPPED, message=grads.reason)
        elif grads.kind in (FailureKind.BAD_SHAPE, FailureKind.BAD_DTYPE):  # not a raise
            rec.record(CheckKind.VJP, Status.ERROR,
                       message=f"VJP with the empty output(s) {shapes}: {grads.reason}")
        else:
            rec.record(CheckKind.VJP, Status.ERROR,
                       message=f"VJP with the empty output(s) {shapes} raised: {grads.text}")
        return
    if len(grads) != len(diff):
        rec.record(CheckKind.VJP, Status.ERROR,
                   message=f"VJP with the empty output(s) {shapes} returned {len(grads)} "
                           f"gradients for {len(diff)} differentiable inputs")
        return
    for k, g in zip(diff, grads, strict=True):
        name = input_name(rec.identity.input_paths, k)
        g = np.asarray(g, dtype=np.float64)
        if g.shape != args64[k].shape:
            rec.record(CheckKind.VJP, Status.ERROR, input_index=k,
                       message=f"VJP for {name} has shape {g.shape}, expected "
                               f"{args64[k].shape} (empty output(s) {shapes})")
        elif np.any(g != 0):
            worst = int(np.argmax(np.abs(g)))
            where = tuple(int(i) for i in np.unravel_index(worst, g.shape))
            rec.record(CheckKind.VJP, Status.FAILED, input_index=k,
                       discrepancy=float(np.abs(g).flat[worst]), allowed=0.0,
                       message=f"output(s) {shapes} are empty, so the VJP for {name} must be "
                               f"exactly 0; element {where} is {float(g.flat[worst]):.10g}")
        else:
            rec.record(CheckKind.VJP, Status.PASSED, input_index=k,
                       message=f"output(s) {shapes} are empty: the VJP for {name} is exactly "
                               "0 as it must be (no finite-difference comparison possible)")


def _low_precision_outputs(prep: Prepared) -> list[np.ndarray] | None:
    """The outputs in the dtype under test, or None after an ``error`` result."""
    outs_d = prep.backend.evaluate(prep.fn, prep.args_d, prep.device)
    if isinstance(outs_d, AdapterFailure):
        prep.result(CheckKind.CALL, Status.ERROR,
                    message=f"the function raised in {prep.dtype}: {outs_d.text}")
        return None
    for i in prep.float_outs:
        o, o64 = np.asarray(outs_d[i]), np.asarray(prep.outs64[i])
        if o.shape != o64.shape:
            prep.result(CheckKind.CALL, Status.ERROR, output_index=i,
                        message=f"output {i} has shape {o.shape} in {prep.dtype} but "
                                f"{o64.shape} in float64")
            return None
    return [np.asarray(o) for o in outs_d]
