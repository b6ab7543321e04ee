"""Conformance kit: does an adapter keep the contract of :class:`gradcheck.Backend`?

:func:`run_conformance` calls every part of the contract an adapter declares and records one
:class:`~gradcheck.CheckResult` (``kind="conformance"``) per question, with what was compared:

* **identity**: ``name``, ``version()``, ``devices()`` (non-empty, strings, no duplicates);
* **declarations**: ``dtypes`` are float dtype names, ``semantics`` is a :class:`Semantics`,
  ``supports_jvp`` / ``supports_order2`` are booleans (order 2 per function where an adapter
  overrides ``supports_order2_for``);
* per device listed and dtype declared, for each probe function (by default the adapter's own
  ``op("sin")``, ``op("mul")``, ``op("sum")``, ``op("matmul")``):

  - **evaluate**: the right number of outputs, shapes, the dtype under test, and values that
    match the op's float64 NumPy meaning (:mod:`gradcheck.backends.protocol_ops`) up to
    ``FORWARD_GAMMA x eps(dtype)`` of the output's scale (a check of the op mapping, not of
    rounding quality: a wrong op is off by O(1));
  - **batch**: ``evaluate_batch`` agrees with ``evaluate`` row by row;
  - **vjp** / **jvp** / **order2** / **alternatives**: shapes and dtypes of what they return;
    a declared capability must work, an undeclared one must raise ``NotImplementedError``;
  - **numeric**: the gradient checks themselves (:func:`gradcheck.check`, order 2 where
    declared) on the probe: the adapter's derivatives against the FD oracle;
* **training**: ``training(device, dtype)`` returns hooks or raises ``NotImplementedError``.

Anything an adapter raises becomes an ``error`` result naming the call; the kit never raises
for a broken adapter.  Entry points for adapter authors are in :mod:`gradcheck.testing`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gradcheck.api import check
from gradcheck.backends.base import Accumulation, Backend, Semantics
from gradcheck.backends.guarded import AdapterFailure, GuardedBackend, attempt
from gradcheck.backends.protocol_ops import PROTOCOL_OPS
from gradcheck.backends.registry import get_backend
from gradcheck.core.dtypes import numpy_dtype
from gradcheck.core.results import CheckResult, Report, Status
from gradcheck.core.taxonomy import CheckKind
from gradcheck.oracle import error_model

KIND = CheckKind.CONFORMANCE
DEFAULT_PROBE_OPS = ("sin", "mul", "sum", "matmul")
FORWARD_GAMMA = 64.0
SECTIONS = ("identity", "declarations", "evaluate", "batch", "vjp", "jvp", "order2",
            "alternatives", "numeric", "training")
_FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Probe:
    """A function written for the backend under test, the float64 inputs to call it with and,
    optionally, its float64 NumPy forward (then the forward values are checked too)."""

    name: str
    fn: Callable
    inputs: tuple[np.ndarray, ...]
    forward: Callable[..., Any] | None = None


class _Run:
    """Collects results; ``call`` turns exceptions of the adapter into error results."""

    def __init__(self, backend: Any, name: str | None = None) -> None:
        self.backend = backend
        self.name = name or getattr(backend, "name", type(backend).__name__)
        self.results: list[CheckResult] = []

    def add(self, section: str, status: Status, message: str, *, check: str = "",
            device: str = "-", dtype: str = "-", **details: Any) -> None:
        self.results.append(CheckResult(
            kind=KIND, status=status, backend=str(self.name), device=device, dtype=dtype,
            name=f"{section}: {check}" if check else section, message=message,
            section=section, details={"section": section, **details}))


def _failure(failure: AdapterFailure) -> str:
    """How a result quotes an adapter's failed call (the exception, in 400 characters)."""
    return failure.quoted(400)


@dataclass(frozen=True)
class Skip:
    """A probe section that does not apply, as the adapter declares (``skipped``, not a
    failure): what a section's body returns instead of a problem."""

    reason: str


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (list, tuple)) else [out]


# -- probes ------------------------------------------------------------------------------------


def default_probes(backend: Backend, seed: int = 0) -> list[Probe]:
    """The adapter's own ``op(name)`` for :data:`DEFAULT_PROBE_OPS` it implements."""
    rng = np.random.default_rng(seed)
    out = []
    for name in DEFAULT_PROBE_OPS:
        fn = backend.op(name)
        if fn is not None:
            meaning = PROTOCOL_OPS[name]
            out.append(Probe(name, fn, meaning.sample(rng), meaning.forward))
    return out


# -- sections ----------------------------------------------------------------------------------


def _identity(run: _Run) -> list[str]:
    be = run.backend
    name = getattr(be, "name", None)
    if not isinstance(name, str) or not name or name == "abstract":
        run.add("identity", Status.FAILED, f"name={name!r}: set the class attribute `name` to "
                "the short name users pass as backend=...", check="name")
    else:
        run.add("identity", Status.PASSED, f"name={name!r}", check="name")
    guard = GuardedBackend(be)
    version = guard.call("version", be.version)
    if isinstance(version, AdapterFailure):
        run.add("identity", Status.ERROR, f"version() raised {_failure(version)}",
                check="version")
    else:
        ok = isinstance(version, str) and bool(version.strip())
        run.add("identity", Status.PASSED if ok else Status.FAILED,
                f"version() returned {version!r}" + ("" if ok else ": expected a non-empty str"),
                check="version")
    devices = guard.call("devices", be.devices)
    if isinstance(devices, AdapterFailure):
        run.add("identity", Status.ERROR, f"devices() raised {_failure(devices)}",
                check="devices")
        return []
    good = (isinstance(devices, list) and bool(devices)
            and all(isinstance(d, str) and d for d in devices)
            and len(set(devices)) == len(devices))
    run.add("identity", Status.PASSED if good else Status.FAILED,
            f"devices() returned {devices!r}" + ("" if good else
                                               ": expected a non-empty list of distinct names"),
            check="devices")
    return list(devices) if good else []


def _declarations(run: _Run) -> list[str]:
    be = run.backend
    dtypes = getattr(be, "dtypes", None)
    ok = (isinstance(dtypes, (tuple, list)) and bool(dtypes)
          and all(d in _FLOAT_DTYPES for d in dtypes))
    run.add("declarations", Status.PASSED if ok else Status.FAILED,
            f"dtypes={dtypes!r}" + ("" if ok else f": expected a non-empty tuple drawn from "
                                                  f"{_FLOAT_DTYPES}"), check="dtypes")
    sem = getattr(be, "semantics", None)
    sem_ok = (isinstance(sem, Semantics) and isinstance(sem.accumulation, Accumulation)
              and (sem.stop_gradient is None or isinstance(sem.stop_gradient, str)))
    run.add("declarations", Status.PASSED if sem_ok else Status.FAILED,
            f"semantics={sem!r}" + ("" if sem_ok else ": declare gradcheck.Semantics("
                                    "Accumulation.ACCUMULATE|FUNCTIONAL, stop_gradient=name|None)"),
            check="semantics")
    for cap in ("supports_jvp", "supports_order2"):
        value = getattr(be, cap, None)
        run.add("declarations", Status.PASSED if isinstance(value, bool) else Status.FAILED,
                f"{cap}={value!r}" + ("" if isinstance(value, bool) else ": must be a bool"),
                check=cap)
    return list(dtypes) if ok and isinstance(dtypes, (tuple, list)) else []


def _close(actual: np.ndarray, expected: np.ndarray, dtype: str) -> tuple[bool, float, float]:
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    scale = float(np.max(np.abs(e))) if e.size else 0.0
    allowed = FORWARD_GAMMA * error_model.eps(dtype) * (np.abs(e) + scale)
    diff = np.abs(a - e)
    worst = float(np.max(diff)) if diff.size else 0.0
    return bool(np.all(diff <= allowed)), worst, float(np.max(allowed)) if diff.size else 0.0


def _shape_dtype_problem(what: str, got: Sequence[Any], want: Sequence[np.ndarray],
                         dtype: str) -> str | None:
    if len(got) != len(want):
        return f"{what} returned {len(got)} arrays, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        g = np.asarray(g)
        if g.shape != np.shape(w):
            return f"{what} array {k} has shape {g.shape}, expected {np.shape(w)}"
        if g.dtype != numpy_dtype(dtype):
            return (f"{what} array {k} has dtype {g.dtype}, expected {dtype} (compute in the "
                    "dtype under test and return it)")
    return None


class _KitCase:
    """One case of the kit: one probe at one device and dtype."""

    def __init__(self, run: _Run, probe: Probe, device: str, dtype: str) -> None:
        self.run, self.probe, self.device, self.dtype = run, probe, device, dtype
        self.be = run.backend
        self.args = [np.asarray(a).astype(numpy_dtype(dtype)) for a in probe.inputs]
        self.diff = list(range(len(self.args)))
        self.outs: list[np.ndarray] | None = None

    def add(self, section: str, status: Status, message: str) -> None:
        self.run.add(section, status, message, check=self.probe.name, device=self.device,
                     dtype=self.dtype)

    def guarded(self, section: str, what: str, body: Callable[[], str | Skip | None]) -> None:
        """Run ``body`` through the adapter boundary: it returns a problem, a :class:`Skip`
        or None (as expected); a failed adapter call is an error (``skipped`` where the
        adapter raised ``NotImplementedError``)."""
        problem = GuardedBackend(self.be).call(what, body)
        if isinstance(problem, AdapterFailure):
            if problem.unsupported:
                self.add(section, Status.SKIPPED,
                         f"{what} raised NotImplementedError: {problem.reason}")
            else:
                self.add(section, Status.ERROR, f"{what} raised {_failure(problem)}")
        elif problem is None:
            self.add(section, Status.PASSED, f"{what}: shapes, dtypes and values as expected")
        elif isinstance(problem, Skip):
            self.add(section, Status.SKIPPED, problem.reason)
        else:
            self.add(section, Status.FAILED, f"{what}: {problem}")

    def evaluate(self) -> str | None:
        outs = [np.asarray(o) for o in _as_list(self.be.evaluate(self.probe.fn, self.args,
                                                                 self.device))]
        if self.probe.forward is None:
            want = outs
        else:
            want = [np.asarray(o) for o in _as_list(self.probe.forward(
                *[a.astype(np.float64) for a in self.args]))]
        problem = _shape_dtype_problem("evaluate", outs, want, self.dtype)
        if problem:
            return problem
        self.outs = outs
        for k, (o, w) in enumerate(zip(outs, want, strict=True)):
            ok, worst, allowed = _close(o, w, self.dtype)
            if not ok:
                return (f"output {k} differs from the op's float64 NumPy meaning by {worst:.3g}"
                        f" (allowed {allowed:.3g} = {FORWARD_GAMMA:g} x eps({self.dtype}) x "
                        "scale): is the op mapped to the right engine function?")
        return None

    def batch(self) -> str | None:
        assert self.outs is not None
        rng = np.random.default_rng(1)
        B = 3
        stacked = [np.stack([a] + [(a + 0.1 * rng.standard_normal(a.shape)).astype(a.dtype)
                                   for _ in range(B - 1)]) for a in self.args]
        got = _as_list(self.be.evaluate_batch(self.probe.fn, stacked, [True] * len(stacked),
                                              self.device))
        for b in range(B):
            row = _as_list(self.be.evaluate(self.probe.fn, [s[b] for s in stacked], self.device))
            for k, o in enumerate(row):
                g = np.asarray(got[k])
                if g.shape != (B,) + np.shape(o):
                    return f"output {k} has shape {g.shape}, expected {(B,) + np.shape(o)}"
                ok, worst, allowed = _close(g[b], o, self.dtype)
                if not ok:
                    return (f"row {b} of output {k} differs from evaluate() by {worst:.3g} "
                            f"(allowed {allowed:.3g})")
        return None

    def cotangents(self) -> list[np.ndarray]:
        assert self.outs is not None
        rng = np.random.default_rng(2)
        return [rng.standard_normal(np.shape(o)).astype(numpy_dtype(self.dtype)) for o in self.outs]

    def vjp(self) -> str | None:
        grads = _as_list(self.be.vjp(self.probe.fn, self.args, self.diff, self.cotangents(),
                                     self.device))
        problem = _shape_dtype_problem("vjp", grads, self.args, self.dtype)
        if problem or len(self.args) < 2:
            return problem
        last = _as_list(self.be.vjp(self.probe.fn, self.args, [self.diff[-1]],
                                    self.cotangents(), self.device))
        return _shape_dtype_problem("vjp with diff=[last input]", last, self.args[-1:],
                                    self.dtype)

    def vjp_batch(self) -> str | None:
        """:meth:`Backend.vjp_batch` of two rows: one gradient per input, stacked (validated at
        the adapter boundary, as the checks read it), in the dtype under test."""
        cts = [np.stack([c, c]) for c in self.cotangents()]
        got = GuardedBackend(self.be).vjp_batch(self.probe.fn, self.args, self.diff, cts,
                                                self.device)
        if isinstance(got, AdapterFailure):
            if got.exception is not None:  # raised: an error (or skipped), as any call
                raise got.exception
            return got.reason
        return _shape_dtype_problem("vjp_batch row 0", [np.asarray(g)[0] for g in got],
                                    self.args, self.dtype)

    def jvp(self) -> str | Skip | None:
        assert self.outs is not None
        rng = np.random.default_rng(3)
        tans = [rng.standard_normal(a.shape).astype(a.dtype) for a in self.args]
        if not self.be.supports_jvp:
            try:
                self.be.jvp(self.probe.fn, self.args, self.diff, tans, self.device)
            except NotImplementedError:
                return Skip("supports_jvp=False and jvp() raises NotImplementedError, as declared")
            return ("supports_jvp=False but jvp() returned a value: declare supports_jvp=True so "
                    "the forward-mode checks run, or make jvp() raise NotImplementedError")
        try:
            out = _as_list(self.be.jvp(self.probe.fn, self.args, self.diff, tans, self.device))
        except NotImplementedError as exc:
            return f"supports_jvp=True but jvp() raised NotImplementedError: {exc}"
        return _shape_dtype_problem("jvp", out, self.outs, self.dtype)

    def order2(self) -> str | Skip | None:
        n = len(self.args)
        declared = ("supports_order2=False" if not self.be.supports_order2 else
                    "supports_order2_for(fn) is False" if not self.be.supports_order2_for(
                        self.probe.fn) else "")
        if declared:
            try:
                self.be.vjp_function(self.probe.fn, self.diff, n)
            except NotImplementedError:
                return Skip(f"{declared} and vjp_function() raises NotImplementedError, as "
                            "declared")
            return (f"{declared} but vjp_function() returned a function: declare order-2 "
                    "support (supports_order2, supports_order2_for), or make it raise "
                    "NotImplementedError")
        try:
            g = self.be.vjp_function(self.probe.fn, self.diff, n)
        except NotImplementedError as exc:
            return f"supports_order2=True but vjp_function() raised NotImplementedError: {exc}"
        cts = self.cotangents()
        vals = _as_list(self.be.evaluate(g, self.args + cts, self.device))
        problem = _shape_dtype_problem("evaluate(vjp_function)", vals, self.args, self.dtype)
        if problem:
            return problem
        again = _as_list(self.be.vjp(g, self.args + cts, list(range(n)), [np.ones_like(v) for v
                                                                            in vals], self.device))
        return _shape_dtype_problem("vjp(vjp_function)", again, self.args, self.dtype)

    def alternatives(self) -> str | Skip | None:
        alts = self.be.alternative_vjps(self.probe.fn, self.args, self.diff, self.cotangents(),
                                        self.device)
        if not isinstance(alts, dict):
            return f"alternative_vjps() returned {type(alts).__name__}, expected a dict"
        if not alts:
            return Skip("no alternative reverse-mode paths declared")
        for name, grads in alts.items():
            problem = _shape_dtype_problem(f"alternative path {name!r}", _as_list(grads),
                                           self.args, self.dtype)
            if problem:
                return problem
        return None


def _numeric(ctx: _KitCase) -> None:

    modes = ("rev", "fwd") if ctx.be.supports_jvp else ("rev",)
    order = 2 if ctx.be.supports_order2 and ctx.be.supports_order2_for(ctx.probe.fn) else 1
    report = attempt("check", check, ctx.probe.fn, *ctx.probe.inputs, backend=ctx.be,
                     device=ctx.device, dtype=ctx.dtype, modes=modes, order=order,
                     name=ctx.probe.name)
    if isinstance(report, AdapterFailure):
        ctx.add("numeric", Status.ERROR, f"gradcheck.check raised {_failure(report)}")
        return
    for r in report.results:
        ctx.run.results.append(replace(r, name=f"numeric: {ctx.probe.name}: {r.subject}",
                                       section="numeric",
                                       details={**r.details, "section": "numeric"}))


def _probe_sections(run: _Run, probes: list[Probe], devices: list[str], dtypes: list[str],
                    numeric: bool) -> None:
    for device in devices:
        for dtype in dtypes:
            for probe in probes:
                ctx = _KitCase(run, probe, device, dtype)
                ctx.guarded("evaluate", f"evaluate({probe.name})", ctx.evaluate)
                if ctx.outs is None:
                    continue  # nothing else can be meaningful
                ctx.guarded("batch", f"evaluate_batch({probe.name})", ctx.batch)
                ctx.guarded("vjp", f"vjp({probe.name})", ctx.vjp)
                ctx.guarded("batch", f"vjp_batch({probe.name})", ctx.vjp_batch)
                ctx.guarded("jvp", f"jvp({probe.name})", ctx.jvp)
                ctx.guarded("order2", f"vjp_function({probe.name})", ctx.order2)
                ctx.guarded("alternatives", f"alternative_vjps({probe.name})", ctx.alternatives)
                if numeric:
                    _numeric(ctx)


def _training(run: _Run, devices: list[str], dtypes: list[str]) -> None:
    for device in devices[:1]:
        for dtype in dtypes[:1]:
            hooks = GuardedBackend(run.backend).call("training", run.backend.training, device,
                                                     dtype)
            if isinstance(hooks, AdapterFailure):
                if hooks.unsupported:
                    run.add("training", Status.SKIPPED, f"no training hooks: {hooks.reason}",
                            device=device, dtype=dtype)
                else:
                    run.add("training", Status.ERROR, f"training() raised {_failure(hooks)}",
                            device=device, dtype=dtype)
                continue
            status = Status.FAILED if hooks is None else Status.PASSED
            run.add("training", status, f"training() returned {type(hooks).__name__}; the "
                    "semantic checks measure it against the declared semantics", device=device,
                    dtype=dtype)


def run_conformance(backend: str | Backend, *, probes: Sequence[Probe] | None = None,
                    numeric: bool = True, seed: int = 0) -> Report:
    """Run the conformance kit on ``backend`` (name, ``"module:Attr"`` or instance).

    ``probes`` replaces the default probe functions (the adapter's ``op()`` for sin, mul, sum,
    matmul); ``numeric=False`` leaves out the gradient checks on the probes.  Never raises for
    a broken adapter: every problem is a failed or errored result in the returned report.
    """
    be = attempt("get_backend", get_backend, backend)  # the adapter's own module is loaded
    if isinstance(be, AdapterFailure):
        run = _Run(None, name=str(backend))
        run.add("identity", Status.ERROR, f"the backend cannot be loaded: {_failure(be)}",
                check="load")
        return Report(run.results)
    run = _Run(be)
    devices = _identity(run)
    dtypes = _declarations(run)
    if probes is None:
        found = attempt("op", default_probes, be, seed)
        if isinstance(found, AdapterFailure):
            run.add("evaluate", Status.ERROR, f"op() raised {_failure(found)}", check="probes")
        probes = [] if isinstance(found, AdapterFailure) else found
    if not probes:
        run.add("evaluate", Status.FAILED,
                f"no probe function: op() returned None for each of {DEFAULT_PROBE_OPS} and no "
                "probes=[Probe(...)] were given, so nothing could be called", check="probes")
    _probe_sections(run, list(probes), devices, dtypes, numeric)
    _training(run, devices, dtypes)
    return Report(run.results)


def section_of(result: CheckResult) -> str:
    """The conformance section a result belongs to."""
    return result.section or "numeric"


def iter_sections(report: Report) -> Iterator[tuple[str, list[CheckResult]]]:
    """``(section, results)`` in :data:`SECTIONS` order."""
    for section in SECTIONS:
        yield section, [r for r in report.results if section_of(r) == section]
