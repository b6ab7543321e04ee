"""The adapter boundary of the checks: every call into an adapter returns a value or a typed
:class:`AdapterFailure`, and never raises an ``Exception``.

:class:`GuardedBackend` wraps a :class:`~gradcheck.backends.base.Backend`.  Each of its methods
calls the adapter once and gives back either what the adapter returned (as NumPy arrays) or an
:class:`AdapterFailure` saying which call failed and how:

* ``unsupported``: the adapter raised ``NotImplementedError`` (a capability it declares
  missing: the checks report ``skipped``);
* ``raised``: any other exception of the adapter or of the function it ran (``error``);
* ``timeout``: the adapter's own time limit (a process engine that did not answer: its
  exception is a ``TimeoutError``);
* ``bad-shape`` / ``bad-dtype``: the adapter returned arrays of the wrong number, shape or
  dtype.  Every method validates what it can know here, once: :meth:`GuardedBackend.vjp` and
  ``vjp_batch`` one floating array per input of ``diff`` with its shape (stacked rows for the
  batch), ``evaluate_batch`` and ``jvp_batch`` the batch axis, :meth:`GuardedBackend.devices`
  a non-empty list of names; the ``*_rows`` and ``checked_*`` methods also the number and
  shapes of the outputs and the dtype under test (float64 included), and hand back float64
  arrays.

``BaseException``\\ s that are not ``Exception``\\ s pass through on purpose: the check's
deadline (:class:`gradcheck.backends.limits.Timeout`), ``KeyboardInterrupt`` and ``SystemExit``
end the check as a whole (one ``error`` result, :func:`gradcheck.backends.limits.contained`),
not one comparison.  Entry points without such a check-wide containment (a probe family, the
audit) call :func:`attempt_whole`, for which a ``SystemExit`` is the failure of that call.

:class:`AdapterFailed` carries a failure through code that can only raise: the batched
function the finite-difference engine evaluates (:mod:`gradcheck.oracle.fd` counts a row that raises
as outside the domain).

:func:`attempt` is the boundary for code the harness runs but does not own and that is not a
:class:`~gradcheck.backends.base.Backend` method: an adapter's training hooks, a user's model,
loss, clip, monitor or training step, a probe family run as a whole.  It and
:func:`attempt_whole` share the one broad ``except`` of the boundary (:meth:`GuardedBackend.call`
is it, for a backend's methods).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from gradcheck.backends import limits
from gradcheck.backends.base import Backend
from gradcheck.core.results import shorten

T = TypeVar("T")


class FailureKind(str, enum.Enum):
    """How a call into an adapter failed."""

    RAISED = "raised"
    UNSUPPORTED = "unsupported"  # NotImplementedError: a declared missing capability
    BAD_SHAPE = "bad-shape"
    BAD_DTYPE = "bad-dtype"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class AdapterFailure:
    """One failed call into an adapter.

    ``text`` is how an ``error`` result quotes it (``"RuntimeError: first line"``; a
    validation problem as the ``ValueError`` the checks report it as); ``reason`` how a
    ``skipped`` result does (the ``NotImplementedError``'s own message)."""

    kind: FailureKind
    call: str
    text: str
    reason: str
    exception: BaseException | None = field(default=None, compare=False, repr=False)

    @property
    def unsupported(self) -> bool:
        return self.kind is FailureKind.UNSUPPORTED

    @classmethod
    def of(cls, call: str, exc: BaseException) -> AdapterFailure:
        """The failure an exception of the adapter (or of the function it ran) stands for."""
        kind = (FailureKind.UNSUPPORTED if isinstance(exc, NotImplementedError)
                else FailureKind.TIMEOUT if isinstance(exc, TimeoutError)
                else FailureKind.RAISED)
        return cls(kind, call, describe(exc), str(exc), exc)

    @classmethod
    def invalid(cls, call: str, problem: str, kind: FailureKind = FailureKind.BAD_SHAPE
                ) -> AdapterFailure:
        """A value of the wrong number, shape or dtype (``problem`` says which)."""
        return cls(kind, call, f"ValueError: {problem}", problem)

    def quoted(self, limit: int) -> str:
        """:attr:`text` described in at most ``limit`` characters (what a result of a check that
        quotes exceptions more briefly shows)."""
        if self.exception is None:
            return shorten(self.text, limit)
        return describe(self.exception, limit)


class AdapterFailed(Exception):
    """An :class:`AdapterFailure` raised through code that only raises (the FD engine's
    batched function); callers catch exactly this, never ``Exception``."""

    def __init__(self, failure: AdapterFailure) -> None:
        super().__init__(failure.text)
        self.failure = failure


def describe(exc: BaseException, limit: int = 500) -> str:
    """``"Type: first line of the message"``, at most ``limit`` characters (cut at a word
    boundary, :func:`gradcheck.core.results.shorten`)."""
    text = str(exc).strip().splitlines()
    return shorten(f"{type(exc).__name__}: {text[0] if text else ''}", limit)


def attempt(call: str, f: Callable[..., T], *args: Any, **kwargs: Any) -> T | AdapterFailure:
    """``f(*args, **kwargs)``, or the failure its exception stands for (``call`` names what was
    called).  Broad on purpose, and the only place that is: ``f`` is code the harness does not
    own (an adapter, its training hooks, a user's function), which may raise any ``Exception``;
    each is reported as a result, never lost and never fatal to the run.  Control flow
    (``BaseException``: the check's deadline, ``KeyboardInterrupt``) passes through."""
    return _guarded(call, f, args, kwargs, whole=False)


def attempt_whole(call: str, f: Callable[..., T], *args: Any, **kwargs: Any
                  ) -> T | AdapterFailure:
    """:func:`attempt` for a run as a whole (a probe family, the audit's steps): besides any
    ``Exception``, a ``SystemExit`` of the code it runs (every ``BaseException``
    :func:`gradcheck.backends.limits.contained` admits, but the check's deadline) is the
    failure of ``call``, so that user code cannot end an entry point that has no check-wide
    containment of its own (:mod:`gradcheck.numeric.run` is the numeric checks').
    ``KeyboardInterrupt`` still passes through: Ctrl-C stops the run."""
    return _guarded(call, f, args, kwargs, whole=True)


def _guarded(call: str, f: Callable[..., T], args: tuple, kwargs: dict[str, Any], *,
             whole: bool) -> T | AdapterFailure:
    """The one broad ``except`` of the boundary (:func:`attempt`, :func:`attempt_whole`)."""
    try:
        return f(*args, **kwargs)
    except BaseException as exc:
        if not isinstance(exc, Exception) and (
                not whole or isinstance(exc, (limits.Timeout, GeneratorExit))
                or not limits.contained(exc)):
            raise
        return AdapterFailure.of(call, exc)


def has_dtype(g: np.ndarray, dtype: np.dtype) -> bool:
    """``g`` has ``dtype``; NumPy has no bfloat16 of its own, so adapters hand bfloat16 results
    over as float32: accepted when every value is a bfloat16 value."""
    if g.dtype == dtype:
        return True
    if dtype.name == "bfloat16" and g.dtype == np.float32:
        return bool(np.array_equal(g, g.astype(dtype).astype(np.float32), equal_nan=True))
    return False


def checked(call: str, values: Sequence[Any], want: Sequence[np.ndarray], what: str,
            dtype: Any) -> list[np.ndarray] | AdapterFailure:
    """``values`` as float64 arrays (no copy in float64) if there is one per array of ``want``
    with its shape and the dtype ``dtype``; else the failure naming the first problem."""
    if len(values) != len(want):
        return AdapterFailure.invalid(call, f"{what} returned {len(values)} arrays, expected "
                                            f"{len(want)}")
    out = []
    for g, a in zip(values, want, strict=True):
        g = np.asarray(g)
        if g.shape != a.shape:
            return AdapterFailure.invalid(call, f"{what} returned shape {g.shape}, expected "
                                                f"{a.shape}")
        if not has_dtype(g, np.dtype(dtype)):
            return AdapterFailure.invalid(call, f"{what} returned dtype {g.dtype}, expected "
                                                f"{np.dtype(dtype)}", FailureKind.BAD_DTYPE)
        out.append(np.asarray(g, dtype=np.float64))
    return out


def _numeric(g: np.ndarray) -> bool:
    """A floating or complex array (what a derivative or an output of a check can be)."""
    return g.dtype.kind in "fc" or g.dtype.name == "bfloat16"


def matching(call: str, values: Any, want: Sequence[tuple[int, ...]], what: str,
             rows: int | None = None) -> list[Any] | AdapterFailure:
    """``values`` as a list if it holds one floating array per shape of ``want`` (each with
    that shape, after a leading batch axis of ``rows`` where given); else the failure naming
    the first problem: what was expected and what came back.  The dtype under test is checked
    where it is known (:func:`checked`)."""
    if isinstance(values, (str, bytes, dict)) or not isinstance(values, Sequence):
        return AdapterFailure.invalid(call, f"{what} returned {type(values).__name__}, expected "
                                            f"a list of {len(want)} arrays")
    if len(values) != len(want):
        return AdapterFailure.invalid(call, f"{what} returned {len(values)} arrays, expected "
                                            f"{len(want)}")
    for k, (g, shape) in enumerate(zip(values, want, strict=True)):
        a = attempt(call, np.asarray, g)
        if isinstance(a, AdapterFailure):
            return a
        if rows is not None and (a.ndim == 0 or len(a) != rows):
            return AdapterFailure.invalid(call, f"{what} returned shape {a.shape}, expected "
                                                f"{rows} stacked rows of shape {tuple(shape)}")
        got = a.shape[1:] if rows is not None else a.shape  # a row's, as the adapter wrote it
        if got != tuple(shape):
            return AdapterFailure.invalid(call, f"{what} returned shape {got}, expected "
                                                f"{tuple(shape)}")
        if not _numeric(a):
            return AdapterFailure.invalid(call, f"{what} returned dtype {a.dtype} for array {k}"
                                                ", expected a floating dtype",
                                          FailureKind.BAD_DTYPE)
    return list(values)


def unstacked(call: str, values: Sequence[Any], rows: int, what: str
              ) -> list[list[np.ndarray]] | AdapterFailure:
    """``values[k]`` with a leading batch axis of ``rows`` -> per row, the list over ``k``."""
    arrays = [np.asarray(g) for g in values]
    for g in arrays:
        if g.ndim == 0 or len(g) != rows:
            return AdapterFailure.invalid(call, f"{what} returned shape {g.shape}, expected "
                                                f"{rows} stacked rows")
    return [[g[b] for g in arrays] for b in range(rows)]


def _listed(values: Any) -> list[Any]:
    return list(values)


class GuardedBackend:
    """A backend seen through the boundary: values or :class:`AdapterFailure`, no raise."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def supports_jvp(self) -> bool:
        return bool(self.backend.supports_jvp)

    @property
    def supports_order2(self) -> bool:
        return bool(self.backend.supports_order2)

    @property
    def vjp_gives_primal(self) -> bool:
        return bool(getattr(self.backend, "vjp_gives_primal", False))

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(self.backend.dtypes)

    def call(self, call: str, f: Callable[..., T], *args: Any, **kwargs: Any
             ) -> T | AdapterFailure:
        """``f(*args, **kwargs)``, or the failure of its exception (:func:`attempt`)."""
        return attempt(call, f, *args, **kwargs)

    def _arrays(self, call: str, f: Callable[..., Sequence[Any]], *args: Any, **kwargs: Any
                ) -> list[Any] | AdapterFailure:
        """A call whose answer is a sequence of arrays (a non-sequence is a failure)."""
        def run() -> list[Any]:
            return list(f(*args, **kwargs))

        return self.call(call, run)

    # -- plain calls ---------------------------------------------------------------------
    def oracle_forward(self, fn: Callable) -> Callable | None | AdapterFailure:
        return self.call("oracle_forward", self.backend.oracle_forward, fn)

    def evaluate(self, fn: Callable, args: Sequence[np.ndarray], device: str
                 ) -> list[Any] | AdapterFailure:
        """The outputs (the adapter's list, :class:`~gradcheck.backends.base.Outputs` with
        its paths included: returned as is), or the failure where it is not a list."""
        outs = self.call("evaluate", self.backend.evaluate, fn, args, device)
        if not isinstance(outs, AdapterFailure) and (
                isinstance(outs, (str, bytes, dict)) or not isinstance(outs, Sequence)):
            return AdapterFailure.invalid("evaluate", f"evaluate returned {type(outs).__name__}"
                                                      ", expected a list of arrays")
        return outs

    def evaluate_batch(self, fn: Callable, args: Sequence[np.ndarray], batched: Sequence[bool],
                       device: str) -> list[Any] | AdapterFailure:
        """The outputs, each with the leading batch axis of the batched arguments."""
        outs = self._arrays("evaluate_batch", self.backend.evaluate_batch, fn, args, batched,
                            device)
        rows = next((len(a) for a, b in zip(args, batched, strict=False) if b), None)
        if isinstance(outs, AdapterFailure) or rows is None:
            return outs
        return _stacked("evaluate_batch", outs, rows, "evaluate_batch", floating=False)

    def vjp(self, fn: Callable, args: Sequence[np.ndarray], diff: Sequence[int],
            cotangents: Sequence[np.ndarray], device: str) -> list[Any] | AdapterFailure:
        """The adapter's VJP: one floating array per input of ``diff``, with its shape (the
        dtype under test: :meth:`checked_vjp`)."""
        g = self._arrays("vjp", self.backend.vjp, fn, args, diff, cotangents, device)
        if isinstance(g, AdapterFailure):
            return g
        return matching("vjp", g, [np.shape(args[k]) for k in diff], "the VJP")

    def vjp_function(self, fn: Callable, diff: Sequence[int], n_args: int
                     ) -> Callable | AdapterFailure:
        return self.call("vjp_function", self.backend.vjp_function, fn, diff, n_args)

    def jvp_function(self, fn: Callable, diff: Sequence[int], n_args: int
                     ) -> Callable | AdapterFailure:
        return self.call("jvp_function", self.backend.jvp_function, fn, diff, n_args)

    def vjp_batch(self, fn: Callable, args: Sequence[np.ndarray], diff: Sequence[int],
                  cotangents: Sequence[np.ndarray], device: str, vectorize: bool = False
                  ) -> list[Any] | AdapterFailure:
        """One floating array per input of ``diff``: the rows' gradients stacked, shaped
        ``(B,) + the input's shape``."""
        g = self._arrays("vjp_batch", self.backend.vjp_batch, fn, args, diff, cotangents,
                         device, vectorize=vectorize)
        if isinstance(g, AdapterFailure):
            return g
        rows = len(cotangents[0]) if len(cotangents) else 0
        return matching("vjp_batch", g, [np.shape(args[k]) for k in diff], "the VJP", rows)

    def jvp_batch(self, fn: Callable, args: Sequence[np.ndarray], diff: Sequence[int],
                  tangents: Sequence[np.ndarray], device: str, vectorize: bool = False,
                  floating: Sequence[int] | None = None) -> list[Any] | AdapterFailure:
        """One array per output, each with the tangents' leading batch axis (the outputs'
        number and shapes: :meth:`jvp_rows`), floating for the outputs ``floating`` (default
        every output; an integer or boolean output's tangent is whatever the engine gives,
        e.g. JAX's ``float0``, and is not read)."""
        t = self._arrays("jvp_batch", self.backend.jvp_batch, fn, args, diff, tangents,
                         device, vectorize=vectorize)
        if isinstance(t, AdapterFailure) or not len(tangents):
            return t
        picked = range(len(t)) if floating is None else floating
        checked_t = _stacked("jvp_batch", [t[i] for i in picked if i < len(t)],
                             len(tangents[0]), "the JVP", floating=True)
        return checked_t if isinstance(checked_t, AdapterFailure) else t

    def devices(self) -> list[str] | AdapterFailure:
        """The adapter's devices: a non-empty list of non-empty names."""
        found = self.call("devices", self.backend.devices)
        if isinstance(found, AdapterFailure):
            return found
        if (not isinstance(found, (list, tuple)) or not found
                or not all(isinstance(d, str) and d for d in found)):
            return AdapterFailure.invalid("devices", f"devices() returned "
                                                     f"{shorten(repr(found), 200)}, expected a "
                                                     "non-empty list of device names (str)")
        return list(found)

    # -- validated derivatives -------------------------------------------------------------
    def checked_vjp(self, fn: Callable, args: Sequence[np.ndarray], diff: Sequence[int],
                    cotangents: Sequence[np.ndarray], device: str, *, what: str, dtype: Any
                    ) -> list[np.ndarray] | AdapterFailure:
        """``J^T v`` per input of ``diff``, validated against ``args`` (float64 arrays)."""
        g = self.vjp(fn, args, diff, cotangents, device)
        if isinstance(g, AdapterFailure):
            return g
        return checked("vjp", g, [args[k] for k in diff], what, dtype)

    def vjp_rows(self, fn: Callable, args: Sequence[np.ndarray], diff: Sequence[int],
                 cotangents: Sequence[np.ndarray], device: str, *, rows: int, dtype: Any
                 ) -> list[list[np.ndarray]] | AdapterFailure:
        """:meth:`Backend.vjp_batch` (not vectorized) as ``rows`` validated rows."""
        return self.vjp_rows_primal(fn, args, diff, cotangents, device, rows=rows,
                                    dtype=dtype)[0]

    def vjp_rows_primal(self, fn: Callable, args: Sequence[np.ndarray], diff: Sequence[int],
                        cotangents: Sequence[np.ndarray], device: str, *, rows: int,
                        dtype: Any) -> tuple[list[list[np.ndarray]] | AdapterFailure,
                                             list[Any] | None]:
        """:meth:`vjp_rows`, and the outputs of the forward pass the adapter differentiated
        where it gives them (:class:`~gradcheck.backends.base.Gradients`; else None)."""
        raw = self.call("vjp_batch", self.backend.vjp_batch, fn, args, diff, cotangents,
                        device, vectorize=False)
        primal = getattr(raw, "primal", None)
        if not isinstance(primal, (list, tuple)):
            primal = None
        g: list[Any] | AdapterFailure = raw if isinstance(raw, AdapterFailure) else \
            self.call("vjp_batch", _listed, raw)
        del raw
        if not isinstance(g, AdapterFailure):  # as vjp_batch validates it
            g = matching("vjp_batch", g, [np.shape(args[k]) for k in diff], "the VJP",
                         len(cotangents[0]) if len(cotangents) else 0)
        if isinstance(g, AdapterFailure):
            return g, None
        per_row = unstacked("vjp_batch", g, rows, "the VJP")
        if isinstance(per_row, AdapterFailure):
            return per_row, None
        return (_all_checked("vjp_batch", per_row, [args[k] for k in diff], "the VJP", dtype),
                None if primal is None else list(primal))

    def alternative_rows(self, fn: Callable, args: Sequence[np.ndarray], diff: Sequence[int],
                         cotangents: Sequence[np.ndarray], device: str, *, rows: int,
                         dtype: Any) -> dict[str, list[list[np.ndarray]]] | AdapterFailure:
        """:meth:`Backend.alternative_vjps_batch` as validated rows per path name."""
        call = "alternative_vjps_batch"
        alts = self.call(call, self.backend.alternative_vjps_batch, fn, args, diff, cotangents,
                         device)
        if isinstance(alts, AdapterFailure):
            return alts
        if not isinstance(alts, dict):
            return AdapterFailure.invalid(call, f"alternative_vjps_batch returned "
                                                f"{type(alts).__name__}, expected a dict")
        split: dict[str, list[list[np.ndarray]]] = {}
        for name, g in alts.items():
            per_row = unstacked(call, g, rows, name)
            if isinstance(per_row, AdapterFailure):
                return per_row
            split[name] = per_row
        want = [args[k] for k in diff]
        out: dict[str, list[list[np.ndarray]]] = {name: [] for name in split}
        for p in range(rows):  # row by row, as the paths' problems are reported
            for name, per_row in split.items():
                g64 = checked(call, per_row[p], want, name, dtype)
                if isinstance(g64, AdapterFailure):
                    return g64
                out[name].append(g64)
        return out

    def jvp_rows(self, fn: Callable, args: Sequence[np.ndarray], diff: Sequence[int],
                 tangents: Sequence[np.ndarray], device: str, *, rows: int,
                 outputs: Sequence[np.ndarray], picked: Sequence[int]
                 ) -> list[dict[int, np.ndarray]] | AdapterFailure:
        """:meth:`Backend.jvp_batch` (not vectorized) as ``rows`` validated rows: per row,
        output index (of ``picked``) -> ``J u`` as float64, shaped like ``outputs``."""
        t = self.jvp_batch(fn, args, diff, tangents, device, floating=picked)
        if isinstance(t, AdapterFailure):
            return t
        if len(t) != len(outputs):
            return AdapterFailure.invalid("jvp_batch", f"the JVP returned {len(t)} outputs, "
                                                       f"expected {len(outputs)}")
        per_row = unstacked("jvp_batch", [t[i] for i in picked], rows, "the JVP")
        if isinstance(per_row, AdapterFailure):
            return per_row
        out = []
        for row in per_row:
            entry = {}
            for i, r in zip(picked, row, strict=True):
                g = checked("jvp_batch", [r], [np.asarray(outputs[i])], "the JVP", np.float64)
                if isinstance(g, AdapterFailure):
                    return g
                entry[i] = g[0]
            out.append(entry)
        return out


def _stacked(call: str, values: list[Any], rows: int, what: str, *, floating: bool
             ) -> list[Any] | AdapterFailure:
    """``values``, each an array with a leading axis of ``rows`` (and floating where
    ``floating``), else the failure naming the first that is not."""
    for k, g in enumerate(values):
        a = attempt(call, np.asarray, g)
        if isinstance(a, AdapterFailure):
            return a
        if a.ndim == 0 or len(a) != rows:
            return AdapterFailure.invalid(call, f"{what} returned shape {a.shape} for array {k}"
                                                f", expected {rows} stacked rows")
        if floating and not _numeric(a):
            return AdapterFailure.invalid(call, f"{what} returned dtype {a.dtype} for array {k}"
                                                ", expected a floating dtype",
                                          FailureKind.BAD_DTYPE)
    return values


def _all_checked(call: str, per_row: list[list[np.ndarray]], want: Sequence[np.ndarray],
                 what: str, dtype: Any) -> list[list[np.ndarray]] | AdapterFailure:
    out = []
    for row in per_row:
        g = checked(call, row, want, what, dtype)
        if isinstance(g, AdapterFailure):
            return g
        out.append(g)
    return out
