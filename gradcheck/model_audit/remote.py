"""The audit of a user's own model in another language, over the model protocol.

:func:`audit_process` starts the user's program (a Candle model in Rust, a Gorgonia graph in Go,
linking ``gradcheck-candle`` / ``gorgoniacheck``), asks it about its model
(``docs/protocol-model.md``) and returns the :class:`~gradcheck.AuditReport` of
:func:`gradcheck.audit`, with these results (``docs/engines/model-check.md``):

* ``rng.determinism``: ``model.loss`` twice, bitwise;
* ``names``: the registry against the gradient store (an ``unregistered`` variable the loss
  reaches fails it);
* ``flow[<name>]``: finite differences along a seeded direction confined to the tensor
  (dependence) against the engine's gradient (present? non-zero?), as audit's ``FlowStatus``;
* ``grad[<name>]`` / ``grad.global[i]``: the engine's projection ``u . g`` against the FD
  derivative along per-tensor / all-tensor directions;
* ``rounding[float32][<name>]``: the float32 build's projection against the float64 build's;
* ``protocol.directions``: on models up to :data:`ARRAYS_UP_TO` parameters, every
  ``model.line`` projection against ``u . g`` recomputed from ``model.grads`` arrays and
  :mod:`gradcheck.model_audit.directions` (a library bug, which FD cannot see);
* then the step checks (:mod:`gradcheck.model_audit.remote_step`), and ``model.done``.

Only seeds and step sizes cross the pipe: the FD oracle (:func:`gradcheck.oracle.fd.
directional_derivatives`) differentiates ``phi(t) = L(theta0 + t u)``, every ``t`` of one oracle
pass in one ``model.line`` request; the program regenerates ``u``
(:mod:`gradcheck.model_audit.directions`) and answers the losses, ``u . g`` and
``sum |u_j g_j|``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck import stream
from gradcheck.backends.model_peer import ModelPeer
from gradcheck.backends.wire import (
    ProtocolError,
    RemoteError,
    RemoteUnsupported,
    decode_array,
    decode_scalar,
)
from gradcheck.core import arguments
from gradcheck.core.errors import InvalidArgument
from gradcheck.core.results import CheckKind, FlowStatus, ParameterFlow, Status
from gradcheck.model_audit import remote_step
from gradcheck.model_audit.directions import Direction, Scope
from gradcheck.model_audit.remote_report import ProcessAuditReport, localize
from gradcheck.oracle import fd
from gradcheck.oracle.error_model import ErrorModel, eps, validated_model
from gradcheck.semantics.context import Assessment, BugClass, ProbeContext

__all__ = ["ProcessAuditReport", "audit_peer", "audit_process"]

DTYPES = ("float64", "float32")
_SEED_SPACE = 2**53
#: models up to this many parameters (the whole registry) are asked ``model.grads`` with
#: arrays, once per dtype, and every ``model.line`` projection is recomputed from them
#: (``protocol.directions``: the library's direction generator and gradient extraction)
ARRAYS_UP_TO = 20_000
#: failing tensors bisected per run, and halvings per tensor (2 directions per halving)
BISECT_TENSORS, BISECT_LEVELS = 3, 8
#: the command text of a peer that started gradcheck (``--peer-stdio``)
STDIO_TEXT = "(the program that started gradcheck)"

#: what cuts a gradient in each engine, named in a blocked tensor's message
KNOWN_CAUSES = {
    "candle": "in Candle: a detach(), a host round trip (to_vec*/to_scalar then Tensor::new), "
              "or an op without a backward upstream of it (candle_nn's fused RmsNorm::forward / "
              "ops::rms_norm on a contiguous input: use RmsNorm::forward_diff)",
    "gorgonia": "in Gorgonia: a value copied between graphs (a node's Value() read into a new "
                "node), a learnable left out of the nodes given to Grad, or a solver fed "
                "another graph's dual values",
}
_GENERIC_CAUSE = "a detach, a host round trip, or an op without a backward upstream of it"


@dataclass
class _Tensor:
    name: str
    shape: tuple[int, ...]
    size: int
    rms: float
    scale: float
    stopped: bool = False
    present: bool = False
    sumsq: float = 0.0


def _pow2_near(x: float) -> float:
    """The power of two nearest ``x`` (1 for 0 or a non-finite ``x``)."""
    if not (x > 0 and math.isfinite(x)):
        return 1.0
    return float(2.0 ** round(math.log2(x)))


def _derive(seed: int, salt: int) -> int:
    return (seed * 0x9E3779B1 + salt * 0x85EBCA77 + 1) % _SEED_SPACE


def audit_process(
    command: str | Sequence[str],
    *,
    dtypes: Sequence[str] = DTYPES,
    params: Sequence[str] = (),
    exclude: Sequence[str] = (),
    stop_gradient: Sequence[str] = (),
    directions: int = 4,
    per_tensor: int = 1,
    step: bool = True,
    steps: int = 1,
    sample: int = 64,
    seed: int = 0,
    request_timeout: float = 60.0,
    error_model: ErrorModel | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> ProcessAuditReport:
    """Audit the user's own model in the program ``command`` (module doc): a string runs
    through ``sh -c``, a sequence is the argv.  ``params`` / ``exclude``: registry-name globs
    of the tensors checked (the others are held fixed); ``stop_gradient``: globs of the
    tensors cut on purpose (a gradient there is a leak); ``directions``: seeded directions over
    every selected tensor (``grad.global[i]``); ``per_tensor``: directions per tensor
    (``flow`` and ``grad``); ``step``/``steps``/``sample``: the training-step experiments.
    Never raises for a misbehaving program: a crash, a hang past ``request_timeout`` seconds or
    a malformed answer is an ``error`` result, and the results before it are kept."""
    _validate(dtypes, directions, per_tensor, steps, sample)
    argv_text = command if isinstance(command, str) else " ".join(shlex.quote(a) for a in command)
    peer = ModelPeer(command, env=env, cwd=cwd, request_timeout=request_timeout)
    try:
        return audit_peer(peer, dtypes=dtypes, params=params, exclude=exclude,
                          stop_gradient=stop_gradient, directions=directions,
                          per_tensor=per_tensor, step=step, steps=steps, sample=sample,
                          seed=seed, error_model=error_model, command_text=argv_text)
    finally:
        peer.close()


def _validate(dtypes: Sequence[str], directions: int, per_tensor: int, steps: int,
              sample: int) -> None:
    if isinstance(dtypes, str):
        raise InvalidArgument(f"dtypes={dtypes!r}: give a sequence of dtype names")
    for d in dtypes:
        if d not in DTYPES:
            raise InvalidArgument.choice("dtypes", d, DTYPES)
    if not dtypes:
        raise InvalidArgument("dtypes is empty")
    for name, v, low in (("directions", directions, 0), ("per_tensor", per_tensor, 1),
                         ("steps", steps, 1), ("sample", sample, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise InvalidArgument(f"{name}={v!r}: must be a whole number >= {low}")


def audit_peer(peer: ModelPeer, *, dtypes: Sequence[str] = DTYPES, params: Sequence[str] = (),
               exclude: Sequence[str] = (), stop_gradient: Sequence[str] = (),
               directions: int = 4, per_tensor: int = 1, step: bool = True, steps: int = 1,
               sample: int = 64, seed: int = 0, error_model: ErrorModel | None = None,
               command_text: str | None = None, reproduce: str | None = None
               ) -> ProcessAuditReport:
    """:func:`audit_process` over a peer already made (``--peer-stdio`` makes one on this
    process's pipes); the caller closes it."""
    _validate(dtypes, directions, per_tensor, steps, sample)
    seed = arguments.seed(seed)
    model = validated_model(error_model)
    text = command_text if command_text is not None else peer.display
    repro = reproduce or _reproducer(text, dtypes, params, exclude, stop_gradient, directions,
                                     per_tensor, step, steps, seed)
    ctx = ProbeContext(peer, "cpu", dtypes[0], seed, reproducer=repro, error_model=model)
    report = ProcessAuditReport(command=text, reproduce=repro)
    run = _Run(ctx, peer, report, dict(
        dtypes=tuple(dtypes), params=tuple(params), exclude=tuple(exclude),
        stop=tuple(stop_gradient), directions=directions, per_tensor=per_tensor, step=step,
        steps=steps, sample=sample))
    try:
        run.run()
    except (ProtocolError, RemoteError) as exc:  # past every step's own guard
        ctx.emit("model", Status.ERROR, f"the audit stopped: {exc}; the checks not reported "
                 "above did not run", kind=CheckKind.FLOW)
    finally:
        run.done()
        report.traffic = peer.traffic
        report.forwards = run.forwards
        engine = str(report.hello.get("engine", "model")) or "model"
        report.backend = engine
        report.results = stream.record_many(
            [dataclasses.replace(r, backend=engine) for r in ctx.results])
    return report


def _reproducer(text: str, dtypes: Sequence[str], params: Sequence[str],
                exclude: Sequence[str], stop: Sequence[str], directions: int, per_tensor: int,
                step: bool, steps: int, seed: int) -> str:
    parts = []
    if tuple(dtypes) != DTYPES:
        parts += ["--dtype", dtypes[0] if len(dtypes) == 1 else "both"]
    parts += [f"--param {g}" for g in params]
    parts += [f"--exclude {g}" for g in exclude]
    parts += [f"--stop {g}" for g in stop]
    if directions != 4:
        parts.append(f"--directions {directions}")
    if per_tensor != 1:
        parts.append(f"--per-tensor {per_tensor}")
    if not step:
        parts.append("--no-step")
    if steps != 1:
        parts.append(f"--steps {steps}")
    parts.append(f"--seed {seed}")
    if text == STDIO_TEXT:  # the user's program starts gradcheck with GRADCHECK_ARGS appended
        return (f"GRADCHECK_ARGS={shlex.quote(' '.join(parts))} and run the same program (it "
                "starts gradcheck model --peer-stdio)")
    return " ".join(["gradcheck model --command", shlex.quote(text),
                     *(shlex.quote(p) if " " not in p else p for p in parts)])


class _Run:
    """One audit's state: the peer, the builds, the records."""

    def __init__(self, ctx: ProbeContext, peer: ModelPeer, report: ProcessAuditReport,
                 opts: dict[str, Any]) -> None:
        self.ctx, self.peer, self.report, self.o = ctx, peer, report, opts
        self.forwards = 0
        self.noisy = 0.0
        self.describe: dict[str, dict[str, Any]] = {}
        self.grads: dict[str, dict[str, Any]] = {}
        self.tensors: list[_Tensor] = []
        self.fd_dtype = ""
        self.loss0 = 0.0
        self.per_tensor_dirs: dict[str, list[Direction]] = {}
        self.answers64: dict[tuple[int, str], dict[str, Any]] = {}  # FD-dtype line answers
        self.bisections_left = BISECT_TENSORS
        self.arrays: dict[str, dict[str, np.ndarray]] = {}  # model.grads arrays per dtype
        self.lines: list[tuple[str, Direction, dict[str, Any]]] = []  # every line answer
        self.array_problems: dict[str, list[str]] = {}
        self.sizes: dict[str, int] = {}  # every registered tensor's element count

    # -- the conversation ---------------------------------------------------------------------
    def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.peer.request(method, params)

    def run(self) -> None:
        ctx = self.ctx
        try:
            self.report.hello = self.peer.hello()
        except ProtocolError as exc:
            ctx.emit("model", Status.ERROR, f"the model program could not be started or did "
                     f"not shake hands: {exc}", kind=CheckKind.FLOW)
            return
        offered = [str(d) for d in self.report.hello.get("dtypes", [])]
        for d in self.o["dtypes"]:
            if offered and d not in offered:
                self.report.refused[d] = f"the program's hello lists dtypes {offered}"
                continue
            try:
                self.describe[d] = self.ask("model.describe", {"dtype": d})
            except RemoteUnsupported as exc:
                self.report.refused[d] = exc.remote_message
        for d, why in self.report.refused.items():
            ctx.emit(f"build[{d}]", Status.SKIPPED, f"the builder refused {d} ({why}): no "
                     f"check runs in {d}", kind=CheckKind.FLOW, dtype=d)
        self.report.dtypes = tuple(self.describe)
        if not self.describe:
            ctx.emit("model", Status.ERROR, "the builder refused every dtype asked for "
                     f"({', '.join(self.o['dtypes'])}): nothing can be checked",
                     kind=CheckKind.FLOW)
            return
        self.fd_dtype = "float64" if "float64" in self.describe else "float32"
        self.report.fd_dtype = self.fd_dtype
        ctx.dtype = self.fd_dtype
        if self.fd_dtype == "float32":
            self.report.notes += (
                "FD runs in float32 (no float64 build: refused or not asked for): its "
                "resolution is the float32 "
                "rounding level, about 2e-4 of each projection's sum of |terms|; no float32 "
                "rounding check (it needs a float64 reference)",)
        if not self._select():
            return
        self._determinism()
        for d in self.describe:
            self._grads(d)
        self._names()
        self._flow()
        self._global()
        if "float64" in self.describe and "float32" in self.describe:
            self._rounding()
        for d in self.describe:
            self._cross_check(d)
        if self.o["step"] and any(self.describe[d].get("step") for d in self.describe):
            for d in self.describe:
                if d in self.grads:
                    self.report.grad_norm = _guard(ctx, "step", d, self._step)
        elif self.o["step"]:
            ctx.emit("step", Status.SKIPPED, "the program declares no training step (describe: "
                     "step false): the step checks need one", kind=CheckKind.SEMANTIC)

    def _step(self, d: str) -> float | None:
        return remote_step.check_step(self.ctx, self.peer, self.describe[d], d,
                                      self.grads[d].get("grads") or {}, steps=self.o["steps"],
                                      sample=self.o["sample"])

    def done(self) -> None:
        """``model.done`` with the verdicts (never raises: the pipe may be gone)."""
        if self.report.hello == {}:
            return
        seen: dict[str, int] = {}
        for r in self.ctx.results:
            seen[r.name] = seen.get(r.name, 0) + 1
        checks = [{"name": r.name if seen[r.name] == 1 else f"{r.name} ({r.dtype})",
                   "status": r.status.value, "message": r.message} for r in self.ctx.results]
        passed = all(r.ok for r in self.ctx.results) and any(
            r.status is Status.PASSED for r in self.ctx.results)
        try:
            self.ask("model.done", {"passed": passed, "checks": checks})
        except (ProtocolError, RemoteError):
            pass

    # -- selection --------------------------------------------------------------------------
    def _select(self) -> bool:
        desc = self.describe[self.fd_dtype]
        listed = desc.get("tensors") or []
        names = [str(t["name"]) for t in listed]
        pats = self.o["params"] or ("*",)
        for g in (*self.o["params"], *self.o["exclude"], *self.o["stop"]):
            if not any(fnmatch.fnmatchcase(n, g) for n in names):
                raise InvalidArgument(f"the glob {g!r} names no tensor of the model; its "
                                      f"tensors: {', '.join(names)}")
        stop_globs = (*self.o["stop"], *[str(s) for s in desc.get("stopped") or []])
        for t in listed:
            n = str(t["name"])
            if not any(fnmatch.fnmatchcase(n, g) for g in pats):
                continue
            if any(fnmatch.fnmatchcase(n, g) for g in self.o["exclude"]):
                continue
            shape = tuple(int(s) for s in t.get("shape", []))
            rms = float(t.get("rms") or 0.0)
            self.tensors.append(_Tensor(n, shape, int(np.prod(shape)) if shape else 1, rms,
                                        _pow2_near(rms), any(fnmatch.fnmatchcase(n, g)
                                                             for g in stop_globs)))
        self.report.declarations = tuple(stop_globs)
        self.sizes = {str(t["name"]): int(np.prod([int(x) for x in t.get("shape", [])]))
                      for t in listed}
        if not self.tensors:
            self.ctx.emit("model", Status.ERROR, "no tensor selected: the registry is empty or "
                          "every tensor is excluded", kind=CheckKind.FLOW)
            return False
        for t in self.tensors:
            self.per_tensor_dirs[t.name] = [
                Direction(_derive(self.ctx.seed, 1000 + r), (Scope(t.name, t.scale),))
                for r in range(self.o["per_tensor"])]
        return True

    # -- determinism and gradients ------------------------------------------------------------
    def _determinism(self) -> None:
        ctx, d = self.ctx, self.fd_dtype
        try:
            t0 = time.perf_counter()
            a = decode_scalar(self.ask("model.loss", {"dtype": d}).get("loss"), "loss")
            t1 = time.perf_counter()
            b = decode_scalar(self.ask("model.loss", {"dtype": d}).get("loss"), "loss")
            t2 = time.perf_counter()
        except (ProtocolError, RemoteError) as exc:
            ctx.emit("rng.determinism", Status.ERROR, f"model.loss failed: {exc}",
                     kind=CheckKind.FLOW, dtype=d)
            raise
        self.forwards += 2
        # the slower of the two (pipe round trip included): later requests' timeouts scale by it
        self.peer.forward_s = self.report.forward_s = max(t1 - t0, t2 - t1)
        self.loss0 = a
        self.report.loss = a
        if not (np.isfinite(a) and np.isfinite(b)):
            ctx.emit("rng.determinism", Status.ERROR, f"the loss at theta0 is not finite "
                     f"({a!r}, {b!r}): nothing can be differentiated", kind=CheckKind.FLOW,
                     dtype=d)
            raise ProtocolError("the loss at theta0 is not finite")
        if a != b:
            self.noisy = abs(a - b)
            self.report.stochastic = True
            ctx.emit("rng.determinism", Status.FAILED, f"model.loss asked twice at theta0 "
                     f"({d} build) gives {a!r} then {b!r} (|diff| {abs(a - b):.3g}; bitwise "
                     "equality expected): the forward draws randomness (dropout on, an "
                     "unseeded generator: in Candle use forward_t(x, false), in Gorgonia a "
                     "fixed seed); finite differences would measure noise, so the FD verdicts "
                     "below are inconclusive", bug=BugClass.NONDETERMINISTIC,
                     kind=CheckKind.FLOW, dtype=d)
        else:
            ctx.emit("rng.determinism", Status.PASSED, f"model.loss asked twice at theta0 "
                     f"({d} build) agrees bitwise ({a!r})", kind=CheckKind.FLOW, dtype=d)

    def _grads(self, d: str) -> None:
        try:
            self.grads[d] = self.ask("model.grads", {"dtype": d, "arrays": self._small()})
        except (ProtocolError, RemoteError) as exc:
            self.ctx.emit(f"grads[{d}]", Status.ERROR, f"model.grads failed in the {d} build: "
                          f"{exc}", kind=CheckKind.FLOW, dtype=d)
            if d == self.fd_dtype:
                raise
            return
        self.forwards += 1
        if self._small():
            self._keep_arrays(d)
        if d == self.fd_dtype:
            store = self.grads[d].get("grads") or {}
            for t in self.tensors:
                e = store.get(t.name) or {}
                t.present = bool(e.get("present", False))
                t.sumsq = float(e.get("sumsq", 0.0)) if t.present else 0.0

    def _small(self) -> bool:
        return sum(self.sizes.values()) <= ARRAYS_UP_TO

    def _keep_arrays(self, d: str) -> None:
        """The ``model.grads`` arrays of the ``d`` build, flat float64 (absent: none), for
        :meth:`_cross_check`; what is missing or malformed is kept as a problem."""
        store = self.grads[d].get("grads") or {}
        arrays: dict[str, np.ndarray] = {}
        problems = []
        for name, size in self.sizes.items():
            e = store.get(name) or {}
            if not e.get("present", False):
                continue
            if "array" not in e:
                problems.append(f"{name!r} is present but carries no array")
                continue
            try:
                a = np.asarray(decode_array(e["array"], f"grads[{name}].array"),
                               dtype=np.float64).ravel()
            except ProtocolError as exc:
                problems.append(str(exc))
                continue
            if a.size != size:
                problems.append(f"{name!r}'s array has {a.size} elements, its shape {size}")
                continue
            arrays[name] = a
        self.arrays[d] = arrays
        if problems:
            self.array_problems[d] = problems

    def _cross_check(self, d: str) -> None:
        """``protocol.directions``: every ``model.line`` projection of the ``d`` build against
        ``u . g`` recomputed here from the ``model.grads`` arrays and gradcheck's own seeded
        directions, under the float64 summation bound of both sides (``2 (n + 1) eps(float64)
        x sum |u_j g_j|`` beyond the error model's rounding term).  A library whose generator
        (seed, scope, scale, sign rule) or gradient extraction is off moves the parameters and
        projects the gradient along the same wrong direction, so FD agrees with it: only this
        check sees it."""
        ctx, name = self.ctx, "protocol.directions"
        total = sum(self.sizes.values())
        if not self._small():
            ctx.emit(name, Status.SKIPPED, f"not run: the model has {total:,} parameters, more "
                     f"than {ARRAYS_UP_TO:,} (model.grads arrays are asked for on smaller "
                     "models only); the library's direction generator is covered by its own "
                     "test vectors", kind=CheckKind.FLOW, dtype=d,
                     details={"model_parameters": total, "ran": False})
            return
        if d not in self.arrays:
            return  # model.grads failed: its error is reported
        lines = [(u, ans) for dd, u, ans in self.lines if dd == d]
        if self.noisy:
            ctx.emit(name, Status.INCONCLUSIVE, "the loss is nondeterministic: the gradient of "
                     "model.grads and the one behind each model.line projection are taken at "
                     "different random draws", kind=CheckKind.FLOW, dtype=d)
            return
        problems = self.array_problems.get(d)
        if problems:
            ctx.emit(name, Status.FAILED, "[library protocol error] model.grads with arrays: "
                     f"true ({d} build) answered {'; '.join(problems)}", kind=CheckKind.FLOW,
                     dtype=d)
            return
        if not lines:
            return
        g = self.arrays[d]
        proj, terms, exp, mag, extra = [], [], [], [], []
        for u, ans in lines:
            prod = [v * g[n] for n, v in u.arrays(self.sizes).items() if n in g]
            flat = np.concatenate(prod) if prod else np.zeros(0)
            m = float(np.sum(np.abs(flat)))
            proj.append(decode_scalar(ans.get("projection", 0.0), "projection"))
            terms.append(decode_scalar(ans.get("abs_terms", 0.0), "abs_terms"))
            exp.append(float(np.sum(flat)))
            mag.append(m)
            extra.append(2.0 * (u.size(self.sizes) + 1) * eps("float64") * m)
        label = ("float64 summation of the scope's n terms on both sides, 2 (n + 1) "
                 "eps(float64) x sum |terms|")
        # the projection, and abs_terms (it sizes every grad check's allowance)
        got = {"projection": proj, "abs_terms": terms}
        want = {"projection": exp, "abs_terms": mag}
        checked = {k: ctx.assess(np.array(got[k]), np.array(want[k]), np.array(mag), "float64",
                                 measured=np.array(extra), measured_label=label)
                   for k in got}
        which = next((k for k, v in checked.items() if not v.ok), "projection")
        a = checked[which]
        ok = all(v.ok for v in checked.values())
        what = (f"the library's model.line {which if not ok else 'projection (and abs_terms)'} "
                f"({d} build, {len(lines)} line(s)) vs "
                f"{'u . g' if which == 'projection' else 'sum |u_j g_j|'} recomputed in NumPy "
                "from model.grads arrays and gradcheck's own seeded directions")
        try:  # the assessment's worst element ("[i]") is the worst line
            worst = int(a.label.strip("[]"))
        except ValueError:
            worst = int(np.argmax(np.abs(np.array(got[which]) - np.array(want[which]))))
        u = lines[worst][0]
        details: dict[str, Any] = {"ran": True, "lines": len(lines), "model_parameters": total,
                                   "worst_direction": u.wire(),
                                   "compared": which if not ok else "projection, abs_terms"}
        message = a.message(what)
        if not a.ok:
            message = (f"[library protocol error] {message}; worst line: seed {u.seed}, scope "
                       f"{[s.wire() for s in u.scope]}, the library's {which} "
                       f"{got[which][worst]!r} vs NumPy's {want[which][worst]!r}: the "
                       "library's direction "
                       "generator (seed, scope start/stop, scale, sign rule)"
                       + (", its sum |u_j g_j| (every grad check's allowance is sized by it)"
                          if which == "abs_terms" else "")
                       + " or its gradient extraction differs from the protocol's, so the FD "
                       "verdicts above were taken along its directions and prove nothing until "
                       "it is fixed")
        ctx.emit(name, Status.PASSED if a.ok else Status.FAILED, message, kind=CheckKind.FLOW,
                 dtype=d, expected=a.expected, actual=a.actual, discrepancy=a.discrepancy,
                 relative_discrepancy=a.relative, allowed=a.allowed, allowed_source=a.source,
                 discrepancy_ratio=a.ratio, details={**details, **a.details()},
                 elements_over=a.elements_over)

    def _names(self) -> None:
        ctx, d = self.ctx, self.fd_dtype
        desc = self.describe[d]
        store = self.grads[d].get("grads") or {}
        registered = [str(t["name"]) for t in desc.get("tensors") or []]
        absent = [n for n in registered if not (store.get(n) or {}).get("present", False)]
        extra = [n for n in store if n not in registered]
        unreg = desc.get("unregistered") or []
        problems = []
        if unreg:
            shown = "; ".join(f"shape {u.get('shape')}: {u.get('what', '')}".rstrip(": ")
                              for u in unreg)
            problems.append(f"{len(unreg)} variable(s) the loss reaches are not in the registry "
                            f"({shown}): the optimizer never updates them and no check sees "
                            "their gradient; register them (VarMap / the learnables given to "
                            "Grad) or make them constants")
        if extra:
            problems.append(f"the gradient store answers names the registry does not hold: "
                            f"{', '.join(extra)}")
        where = (f"; absent from the gradient store: {', '.join(absent)} (judged by their "
                 "flow check)" if absent else "")
        if problems:
            ctx.emit("names", Status.FAILED, "; ".join(problems) + where,
                     bug=BugClass.WRONG_NAME, kind=CheckKind.FLOW, dtype=d,
                     details={"unregistered": unreg, "absent": absent, "extra": extra})
        else:
            ctx.emit("names", Status.PASSED, f"{len(registered)} registered tensors, no "
                     f"variable outside the registry{where}", kind=CheckKind.FLOW, dtype=d,
                     details={"absent": absent})

    # -- finite differences along seeded directions -----------------------------------------
    def _fd(self, dirs: list[Direction]) -> tuple[fd.FDEstimate, list[dict[str, Any]]]:
        """The FD oracle along ``dirs`` in the FD build: ``x = 0`` in ``R^P`` and direction
        ``e_p`` for the ``p``-th seeded direction, so every point the oracle evaluates is
        ``t e_p``; each oracle call's ``t`` values of one direction go in one ``model.line``
        request.  Returns the estimate and each direction's first answer (projection, terms)."""
        P = len(dirs)
        first: list[dict[str, Any] | None] = [None] * P
        d = self.fd_dtype

        def f_batch(X: np.ndarray) -> np.ndarray:
            out = np.full((len(X), 1), np.nan)
            which = np.argmax(X != 0, axis=1)
            for p in range(P):
                rows = np.nonzero(which == p)[0]
                if rows.size == 0:
                    continue
                ts = [float(X[r, p]) for r in rows]
                ans = self.ask("model.line", {"dtype": d, "direction": dirs[p].wire(), "t": ts})
                losses = ans.get("losses")
                if not isinstance(losses, list) or len(losses) != len(ts):
                    raise ProtocolError(f"malformed answer to 'model.line': {len(ts)} values of "
                                        f"t, losses {str(losses)[:80]}")
                self.forwards += len(ts)
                self.lines.append((d, dirs[p], ans))
                out[rows, 0] = [decode_scalar(v, "loss") for v in losses]
                if first[p] is None:
                    first[p] = ans
            return out

        h0 = float(self.ctx.error_model.fd_h0_factor)
        est = fd.directional_derivatives(f_batch, np.zeros(P), np.eye(P), h0=h0,
                                         f0=np.array([self.loss0]))
        answers = [a if a is not None else {} for a in first]
        return est, answers

    def _flow(self) -> None:
        ctx = self.ctx
        dirs = [u for t in self.tensors for u in self.per_tensor_dirs[t.name]]
        try:
            est, answers = self._fd(dirs)
        except (ProtocolError, RemoteError) as exc:
            for t in self.tensors:
                ctx.emit(f"flow[{t.name}]", Status.ERROR, f"the FD measurement along "
                         f"{t.name!r} failed: {exc}", kind=CheckKind.FLOW)
            raise
        k = self.o["per_tensor"]
        records = []
        for i, t in enumerate(self.tensors):
            sl = slice(i * k, (i + 1) * k)
            recs = answers[sl]
            for r, a in zip(self.per_tensor_dirs[t.name], recs, strict=True):
                self.answers64[(r.seed, t.name)] = a
            records.append(self._parameter(t, est, sl, recs))
        # the gradient checks first, so each flow record carries its tensor's FD verdict
        for i, t in enumerate(self.tensors):
            if records[i].status is FlowStatus.FLOWS:
                sl = slice(i * k, (i + 1) * k)
                self._grad_check(f"grad[{t.name}]", est, sl, answers[sl],
                                 f"<dL/d{t.name}, u>", bug_cuts=False, tensor=t)
                records[i] = dataclasses.replace(records[i],
                                                 gradient_check=self.ctx.results[-1].status)
        self.report.parameters = tuple(records)
        self.report.localization = localize(records)
        for rec in records:
            self._emit_flow(rec)

    def _parameter(self, t: _Tensor, est: fd.FDEstimate, sl: slice,
                   answers: list[dict[str, Any]]) -> ParameterFlow:
        em = self.ctx.error_model
        s_fd, e_fd = est.value[sl, 0], est.error[sl, 0]
        noise = float(np.max(em.fd_bound(e_fd))) if e_fd.size else 0.0
        dependence = float(np.max(np.abs(s_fd))) if s_fd.size else 0.0
        dependent = bool(np.any(np.abs(s_fd) > em.fd_bound(e_fd)))
        kink = (bool(np.any(est.kink[sl])) or not bool(np.all(est.finite[sl]))
                or self.noisy > 0)
        proj = [float(decode_scalar(a.get("projection", 0.0), "projection")) for a in answers]
        ad_proj = max((abs(p) for p in proj), default=0.0)
        ad = t.present and t.sumsq > 0
        if t.stopped:
            status = FlowStatus.LEAK if ad else FlowStatus.BLOCKED_AS_INTENDED
        elif ad:
            status = FlowStatus.FLOWS
        elif kink:
            status = FlowStatus.INCONCLUSIVE
        else:
            status = FlowStatus.BLOCKED_UNINTENTIONALLY if dependent else FlowStatus.UNUSED
        ad_norm = math.sqrt(t.sumsq)
        fd_txt = (f"FD dependence max|d/dt L(theta0 + t u)| {dependence:.3g} along "
                  f"{len(s_fd)} seeded direction(s) confined to it (noise {noise:.3g})")
        engine = str(self.report.hello.get("engine", ""))
        causes = KNOWN_CAUSES.get(engine, _GENERIC_CAUSE)
        stored = ("absent from the gradient store" if not t.present else
                  "present in the gradient store but zero")
        msg = {
            FlowStatus.FLOWS: f"{t.name!r}: gradient flows (|grad| {ad_norm:.3g}; AD "
                              f"max|<grad,u>| {ad_proj:.3g} vs {fd_txt})",
            FlowStatus.BLOCKED_AS_INTENDED: f"{t.name!r}: blocked as declared ({stored}; "
                                            f"{fd_txt})",
            FlowStatus.BLOCKED_UNINTENTIONALLY: f"{t.name!r}: the loss depends on it ({fd_txt})"
                                                f" but its gradient is {stored}: the gradient "
                                                f"path is cut; known causes {causes}",
            FlowStatus.LEAK: f"{t.name!r}: declared stopped, yet a gradient of norm "
                             f"{ad_norm:.3g} reaches it ({fd_txt})",
            FlowStatus.UNUSED: f"{t.name!r}: no gradient ({stored}) and no effect on the loss "
                               f"({fd_txt}); declare it with --stop / stop_gradient if that is "
                               "intended",
            FlowStatus.INCONCLUSIVE: f"{t.name!r}: no gradient ({stored}) and FD cannot decide "
                                     "(the loss is nondeterministic, kinked or non-finite "
                                     f"along the direction; {fd_txt})",
        }[status]
        return ParameterFlow(t.name, t.shape, status, t.stopped, True, ad_norm, dependence,
                             noise, Status.SKIPPED, (), msg, ad_proj)

    def _emit_flow(self, rec: ParameterFlow) -> None:
        bug = None
        status = rec.status
        if status is FlowStatus.LEAK:
            bug = BugClass.STOP_GRADIENT_LEAKS
        elif status is FlowStatus.UNUSED:
            bug = BugClass.UNUSED_PARAMETER
        elif status is FlowStatus.BLOCKED_UNINTENTIONALLY:
            bug = (BugClass.HOST_ROUND_TRIP if "absent" in rec.message
                   else BugClass.DETACH_IN_INPUT_PATH)
        verdict = (Status.PASSED if status in (FlowStatus.FLOWS, FlowStatus.BLOCKED_AS_INTENDED)
                   else Status.INCONCLUSIVE if status is FlowStatus.INCONCLUSIVE
                   else Status.FAILED)
        message = rec.message
        if status is FlowStatus.BLOCKED_UNINTENTIONALLY and self.report.localization:
            message += f"; {self.report.localization}"
        self.ctx.emit(f"flow[{rec.name}]", verdict, message, bug=bug, kind=CheckKind.FLOW,
                      flow=rec, dtype=self.fd_dtype)

    def _allowance_extra(self, terms: np.ndarray) -> tuple[np.ndarray, str]:
        """Beyond the error model's ``rounding_gamma x eps x terms``: in a float32 build the
        gradient comes out of a whole float32 forward and backward, bounded by the rounding
        level (``rounding_level_factor x eps(float32) x terms``, docs/error-model.md 5b)."""
        if self.fd_dtype != "float32":
            return np.zeros_like(terms), ""
        em = self.ctx.error_model
        return (em.rounding_level_factor * eps("float32") * terms,
                "float32 rounding level of a whole forward and backward")

    def _grad_check(self, name: str, est: fd.FDEstimate, sl: slice,
                    answers: list[dict[str, Any]], what: str, bug_cuts: bool,
                    tensor: _Tensor | None = None) -> None:
        ctx = self.ctx
        if self._undecidable(est, sl):
            why = (f"the loss is nondeterministic (|diff| {self.noisy:.3g} between two "
                   "evaluations at theta0)" if self.noisy else
                   "the loss is not differentiable along the direction (kink or non-finite)")
            ctx.emit(name, Status.INCONCLUSIVE, f"{what}: {why}", kind=CheckKind.VJP,
                     dtype=self.fd_dtype)
            return
        a, proj, inexact = self._assess(est, sl, answers)
        hint = ""
        details: dict[str, Any] = {"inexact": inexact,
                                   "seeds": [int(s) for s in self._seeds_of(name)]}
        cut: tuple[int, int] | None = None
        if not a.ok:
            f = a.factor
            where = ""
            if tensor is not None and self.bisections_left > 0:
                self.bisections_left -= 1
                where, span, cut = self._bisect(tensor)
                if span is not None:
                    details["bisected"] = list(span)
            if cut is not None and tensor is not None:
                details["cut"] = list(cut)
                hint = (f"; AD is exactly zero on flat elements [{cut[0]}, {cut[1]}) of "
                        f"{tensor.name!r} (model.line's sum |u_j g_j| is 0 there) while FD "
                        "is not: a partial cut (part of the tensor through a host round trip, "
                        "a detached branch, a mask or clamp bounded with to_scalar)")
            elif f is not None:
                hint = (f"; the engine's projection is {f:.3g} x FD's (a wrong rule, a factor, "
                        "a sign or a gradient under another tensor's name"
                        + ("; no element range with an exactly-zero gradient was found, so "
                           "not a partial cut)" if tensor is not None and where else ")"))
            if where:
                hint += f"; {where}"
        if bug_cuts and not a.ok:
            blocked = [p.name for p in self.report.parameters
                       if p.status is FlowStatus.BLOCKED_UNINTENTIONALLY]
            if blocked:
                hint += f"; the blocked tensors ({', '.join(blocked)}) are in its scope"
        bug = BugClass.UNDECLARED_PARTIAL_STOP if cut is not None else BugClass.WRONG_GRADIENT
        full = (f"projection {what} from the engine's backward ({self.fd_dtype} build) vs FD "
                f"of L(theta0 + t u) along {len(proj)} seeded direction(s)"
                + (hint if not a.ok else ""))
        ctx.record(name, a, what=full, bug=bug, kind=CheckKind.VJP, dtype=self.fd_dtype,
                   details=details)

    def _undecidable(self, est: fd.FDEstimate, sl: slice) -> bool:
        return (self.noisy > 0 or bool(np.any(est.kink[sl]))
                or not bool(np.all(est.finite[sl])))

    def _assess(self, est: fd.FDEstimate, sl: slice, answers: list[dict[str, Any]]
                ) -> tuple[Assessment, np.ndarray, int]:
        """The engine's projections against FD on rows ``sl`` of ``est``, under the error
        model (the float32 rounding level added where FD runs in float32)."""
        s_fd, e_fd = est.value[sl, 0], est.error[sl, 0]
        proj = np.array([decode_scalar(a.get("projection", 0.0), "projection") for a in answers])
        terms = np.array([decode_scalar(a.get("abs_terms", 0.0), "abs_terms") for a in answers])
        inexact = sum(int(a.get("inexact", 0) or 0) for a in answers)
        mag = terms + np.abs(s_fd)
        extra, label = self._allowance_extra(mag)
        return (self.ctx.assess(proj, s_fd, mag, self.fd_dtype, e_fd, measured=extra,
                                measured_label=label), proj, inexact)

    def _bisect(self, t: _Tensor
                ) -> tuple[str, tuple[int, int] | None, tuple[int, int] | None]:
        """Halve the failing tensor's flat index range while exactly one half fails (two
        directions per level, one oracle pass), at most ``BISECT_LEVELS`` levels.  Returns
        the text, the localized range, and the widest failing half on which the engine's
        gradient is exactly zero (``abs_terms`` 0: the evidence of a partial cut), if any."""
        a, b = 0, t.size
        levels = 0
        cut: tuple[int, int] | None = None
        for level in range(BISECT_LEVELS):
            if b - a < 2:
                break
            m = (a + b) // 2
            seed = _derive(self.ctx.seed, 5000 + level)
            dirs = [Direction(seed, (Scope(t.name, t.scale, a, m),)),
                    Direction(seed, (Scope(t.name, t.scale, m, b),))]
            est, answers = self._fd(dirs)
            if self._undecidable(est, slice(0, 2)):
                break
            ok = [self._assess(est, slice(i, i + 1), answers[i:i + 1])[0].ok for i in (0, 1)]
            for i, (lo, hi) in enumerate(((a, m), (m, b))):
                if cut is None and not ok[i] and _exactly_zero(answers[i]):
                    cut = (lo, hi)
            if ok == [False, True]:
                b = m
            elif ok == [True, False]:
                a = m
            elif not any(ok):
                part = f"elements [{a}, {b})" if levels else "it"
                return (f"both halves of {part} fail: the error is spread (dense), not in one "
                        "element", (a, b) if levels else None, cut)
            else:
                break
            levels += 1
        if not levels:
            return ("bisection could not localize it (neither half fails on its own)", None,
                    cut)
        rows = ""
        if len(t.shape) >= 2:
            width = int(np.prod(t.shape[1:]))
            rows = f", rows {a // width}..{(b - 1) // width}"
        return (f"bisection ({levels} levels) localizes it to flat elements [{a}, {b}) of "
                f"{t.name!r}{rows}"), (a, b), cut

    def _projection(self, dtype: str, u: Direction) -> dict[str, Any]:
        """``u . g`` of the ``dtype`` build without a forward (``model.line`` with no ``t``);
        a library that refuses an empty ``t`` is asked with ``t = [0]`` (one forward)."""
        try:
            ans = self.ask("model.line", {"dtype": dtype, "direction": u.wire(), "t": []})
        except RemoteUnsupported:
            raise
        except RemoteError:
            ans = self.ask("model.line", {"dtype": dtype, "direction": u.wire(), "t": [0.0]})
            self.forwards += 1
        self.lines.append((dtype, u, ans))
        return ans

    def _seeds_of(self, name: str) -> list[int]:
        if name.startswith("grad[") and name.endswith("]"):
            return [u.seed for u in self.per_tensor_dirs.get(name[5:-1], [])]
        return []

    def _global(self) -> None:
        n = self.o["directions"]
        scope = tuple(Scope(t.name, t.scale) for t in self.tensors if not t.stopped)
        if n == 0 or not scope:
            return
        dirs = [Direction(_derive(self.ctx.seed, 1 + i), scope) for i in range(n)]
        try:
            est, answers = self._fd(dirs)
        except (ProtocolError, RemoteError) as exc:
            for i in range(n):
                self.ctx.emit(f"grad.global[{i}]", Status.ERROR, f"the FD measurement along "
                              f"global direction {i} failed: {exc}", kind=CheckKind.VJP)
            raise
        names = ", ".join(s.name for s in scope)
        for i in range(n):
            self._grad_check(f"grad.global[{i}]", est, slice(i, i + 1), answers[i:i + 1],
                             f"<dL/dtheta, u> over every selected tensor not declared stopped "
                             f"({names}; seed {dirs[i].seed})", bug_cuts=True)

    # -- float32 against float64 -----------------------------------------------------------------
    def _rounding(self) -> None:
        ctx, em = self.ctx, self.ctx.error_model
        store32 = (self.grads.get("float32") or {}).get("grads") or {}
        if "float32" not in self.grads:
            return
        level = em.rounding_level_factor * eps("float32")
        self.report.notes += (
            f"float32 rounding check: float32 projection vs float64 on the same seeded "
            f"directions, allowed {em.rounding_level_factor:g} x eps(float32) = {level:.2g} of "
            "the summed |terms| (the rounding level of a whole float32 forward and backward); "
            "it resolves factors, signs, missing terms and float32-only cuts, not a few ulps",)
        for t in self.tensors:
            name = f"rounding[float32][{t.name}]"
            if self.noisy:
                ctx.emit(name, Status.INCONCLUSIVE, f"{t.name!r}: the loss is nondeterministic "
                         f"(|diff| {self.noisy:.3g} between two evaluations at theta0), so the "
                         "two builds' gradients are taken at different random draws",
                         kind=CheckKind.ROUNDING, dtype="float32")
                continue
            present32 = bool((store32.get(t.name) or {}).get("present", False))
            if present32 != t.present:
                ctx.emit(name, Status.FAILED, f"{t.name!r}: the gradient is "
                         f"{'present' if present32 else 'absent'} in the float32 build and "
                         f"{'present' if t.present else 'absent'} in the float64 build: the "
                         "gradient path differs between dtypes", bug=BugClass.WRONG_GRADIENT,
                         kind=CheckKind.ROUNDING, dtype="float32")
                continue
            p32, p64, m32, m64 = [], [], [], []
            try:
                for u in self.per_tensor_dirs[t.name]:
                    a32 = self._projection("float32", u)
                    a64 = self.answers64.get((u.seed, t.name)) or {}
                    p32.append(decode_scalar(a32.get("projection", 0.0), "projection"))
                    m32.append(decode_scalar(a32.get("abs_terms", 0.0), "abs_terms"))
                    p64.append(decode_scalar(a64.get("projection", 0.0), "projection"))
                    m64.append(decode_scalar(a64.get("abs_terms", 0.0), "abs_terms"))
            except (ProtocolError, RemoteError) as exc:
                ctx.emit(name, Status.ERROR, f"model.line in the float32 build failed: {exc}",
                         kind=CheckKind.ROUNDING, dtype="float32")
                if isinstance(exc, ProtocolError):
                    raise
                continue
            terms = np.maximum(np.array(m32), np.array(m64))
            a = ctx.assess(np.array(p32), np.array(p64), np.array(m64), "float64",
                           measured=level * terms,
                           measured_label="float32 rounding level of the forward and backward")
            ctx.record(name, a, what=f"projection <dL/d{t.name}, u>: float32 build vs float64 "
                       f"build along {len(p32)} seeded direction(s)",
                       bug=BugClass.WRONG_GRADIENT, kind=CheckKind.ROUNDING, dtype="float32")


def _exactly_zero(answer: Mapping[str, Any]) -> bool:
    """The engine's gradient is exactly zero over the line's scope (every ``u_j g_j`` 0)."""
    return (decode_scalar(answer.get("abs_terms", 1.0), "abs_terms") == 0.0
            and decode_scalar(answer.get("projection", 1.0), "projection") == 0.0)


def _guard(ctx: ProbeContext, name: str, dtype: str, fn: Callable[[str], Any]) -> Any:
    try:
        return fn(dtype)
    except (ProtocolError, RemoteError) as exc:
        ctx.emit(name, Status.ERROR, f"the step experiments failed in the {dtype} build: {exc}",
                 kind=CheckKind.SEMANTIC, dtype=dtype)
        if isinstance(exc, ProtocolError):
            raise
        return None
