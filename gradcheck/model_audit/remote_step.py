"""The training-step checks of a model checked over the model protocol (``model.step``).

Three experiments, each on a fresh build at ``theta0`` (``docs/protocol-model.md``):

* ``run`` at the knobs' defaults, ``steps`` calls: ``grad_norm``, ``step.applied[<name>]``
  (every call vs the fresh gradient at that call) and ``step.effective[<name>]``;
* ``run`` with the clip's knob moved so that the other branch of the clip runs (``||g|| / 4``
  when the default does not clip, ``4 ||g||`` when it does): ``step.clip`` (and ``grad_norm``
  again: pre- and post-clip norms differ only where the clip acts);
* ``repeat``: ``step.repeatable``.

The verdicts are :mod:`gradcheck.model_audit.step_judge`'s; this module asks, and emits.  A
peer that answers ``unsupported`` makes every step check a skip with its message, an
``engine_error`` an error; a broken stream (``ProtocolError``) propagates: the model could
not be answered.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from gradcheck.backends.wire import RemoteError, RemoteUnsupported
from gradcheck.core.results import CheckKind, Status
from gradcheck.model_audit.optimizers import describe_declaration, from_declaration
from gradcheck.model_audit.step_answers import StepRecord, parse_steps
from gradcheck.model_audit.step_judge import (
    Verdict,
    clip_scale,
    judge_applied,
    judge_effective,
    judge_norm,
    judge_repeat,
    norm_reference,
)
from gradcheck.semantics.context import BugClass, ProbeContext

_KIND = CheckKind.SEMANTIC
# the factor between the gradient's norm and the max_norm of the clip experiment: the clip
# scale is 1/4 (or 1 when the default clips), far from both 1 and any rounding
_CLIP_FACTOR = 4.0


class ModelPeer(Protocol):
    """The answering side of the model protocol: ``request`` returns the ``result`` object, or
    raises :class:`~gradcheck.backends.wire.RemoteError` (``RemoteUnsupported`` for
    ``unsupported``) / :class:`~gradcheck.backends.wire.ProtocolError`."""

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]: ...


class _Step:
    """One ``check_step`` run: the request parameters and what every check needs."""

    def __init__(self, ctx: ProbeContext, peer: ModelPeer, describe: Mapping[str, Any],
                 dtype: str, grads: Mapping[str, Any], sample: int) -> None:
        self.ctx, self.peer, self.dtype, self.sample = ctx, peer, dtype, sample
        self.registry = [(str(t["name"]), tuple(int(d) for d in t["shape"]))
                         for t in describe.get("tensors") or ()]
        self.names = [n for n, _ in self.registry]
        self.n = sum(math.prod(s) for _, s in self.registry)
        self.knobs = dict(describe.get("knobs") or {})
        clip = describe.get("clip")
        self.clip = clip if isinstance(clip, Mapping) else None
        self.decl = describe.get("optimizer")
        self.grads = grads
        self._loss: float | None = None

    def ask(self, experiment: str, steps: int, knobs: Mapping[str, float]) -> list[StepRecord]:
        ans = self.peer.request("model.step", {"dtype": self.dtype, "knobs": dict(knobs),
                                               "steps": steps, "experiment": experiment,
                                               "sample": self.sample})
        return parse_steps(ans, self.registry, steps)

    def loss(self) -> float | None:
        """The loss at ``theta0`` (from the grads answer, else ``model.loss``)."""
        if self._loss is None:
            v = self.grads.get("loss") if isinstance(self.grads.get("loss"), (int, float)) \
                else None
            if v is None:
                try:
                    v = self.peer.request("model.loss", {"dtype": self.dtype}).get("loss")
                except RemoteError:
                    return None
            self._loss = None if v is None else float(v)
        return self._loss

    def emit(self, name: str, status: Status, message: str, **kw: Any) -> None:
        self.ctx.emit(name, status, message, kind=_KIND, dtype=self.dtype, **kw)

    def record(self, name: str, v: Verdict, what: str, **details: Any) -> None:
        self.ctx.record(name, v.assessment, what=what + (v.hint if not v.ok else ""),
                        bug=v.bug, dtype=self.dtype, kind=_KIND,
                        details={**v.details, **details})

    def all_names(self) -> list[str]:
        return (["grad_norm"] + [f"step.applied[{k}]" for k in self.names] + ["step.clip"]
                + [f"step.effective[{k}]" for k in self.names] + ["step.repeatable"])

    def pass_through(self, first: StepRecord) -> dict[str, float]:
        """Knobs under which the clip does not act (a clip normalises a gradient's size and
        would hide a stale one's factor in the repeat experiment); none where it cannot be
        moved or does not act at the default."""
        m, knob = self.max_norm, (self.clip or {}).get("knob")
        if m is None or not knob or knob not in self.knobs or first.grad_norm <= m:
            return {}
        return {knob: first.grad_norm * _CLIP_FACTOR}

    @property
    def max_norm(self) -> float | None:
        """The clip's max_norm at the knobs' defaults (None: no global-norm clip declared)."""
        if self.clip is None or self.clip.get("kind") != "global_norm":
            return None
        knob = self.clip.get("knob")
        v = self.knobs.get(knob, self.clip.get("max_norm")) if knob else \
            self.clip.get("max_norm")
        return None if v is None else float(v)


def check_step(ctx: ProbeContext, peer: ModelPeer, describe: Mapping[str, Any], dtype: str,
               grads: Mapping[str, Mapping[str, Any]], *, steps: int = 1,
               sample: int = 64) -> float | None:
    """Run the step experiments and emit ``grad_norm`` and ``step.*`` results; returns the
    gradient norm the user's step logged (None when it logs none)."""
    st = _Step(ctx, peer, describe, dtype, grads, sample)
    if not describe.get("step"):
        for name in st.all_names():
            st.emit(name, Status.SKIPPED, "the model has no training step (describe.step is "
                    "false): give the builder a step closure to check it")
        return None
    try:
        run = st.ask("run", max(1, int(steps)), {})
        clip_run, clip_note = _clip_experiment(st, run[0])
        repeat_knobs = st.pass_through(run[0])
        repeat = st.ask("repeat", 2, repeat_knobs)
    except RemoteUnsupported as exc:
        for name in st.all_names():
            st.emit(name, Status.SKIPPED, f"model.step is unsupported in {dtype}: "
                    f"{exc.remote_message}")
        return None
    except RemoteError as exc:
        for name in st.all_names():
            st.emit(name, Status.ERROR, f"the user's step raised in model.step ({dtype}): "
                    f"{exc.remote_message}")
        return None
    _grad_norm(st, run[0], clip_run)
    observed = st.decl is not None or any(t.applied_present for r in run
                                          for t in r.tensors.values())
    _applied(st, run, observed)
    _clip(st, run[0], clip_run, clip_note, observed)
    _effective(st, run)
    _repeatable(st, repeat, observed, repeat_knobs)
    return run[0].logged


# -- experiments ---------------------------------------------------------------------------

def _clip_experiment(st: _Step, first: StepRecord
                     ) -> tuple[tuple[float, list[StepRecord]] | None, str]:
    """Run the clip's other branch; (its max_norm and records, or None and why not)."""
    m = st.max_norm
    if st.clip is None:
        return None, "no clip declared (describe.clip is null): the clip is not checked"
    if m is None:
        return None, (f"the declared clip {dict(st.clip)} is not a global-norm clip with a "
                      "max_norm: only kind global_norm is modelled")
    G = first.grad_norm
    if G <= 0:
        return None, "the gradient is zero at theta0: the clip has nothing to act on"
    knob = st.clip.get("knob")
    clips = G > m
    if not knob or knob not in st.knobs:
        ran = "clipping" if clips else "pass-through"
        never = "pass-through" if clips else "clipping"
        return None, (f"only the {ran} branch ran (max_norm {m:g}, ||g|| {G:.6g}); the "
                      f"{never} branch never ran: the model declares no knob for max_norm "
                      "(gc::knob / gc.Knob), so the harness cannot move it")
    alt = G * _CLIP_FACTOR if clips else G / _CLIP_FACTOR
    return (alt, st.ask("run", 1, {knob: alt})), ""


# -- checks --------------------------------------------------------------------------------

def _grad_norm(st: _Step, first: StepRecord,
               clip_run: tuple[float, list[StepRecord]] | None) -> None:
    if first.logged is None:
        st.emit("grad_norm", Status.SKIPPED, "the step logs no gradient norm (Logged.grad_norm "
                f"is null); the global L2 norm of the gradient is {first.grad_norm:.6g}",
                details={"grad_norm": first.grad_norm})
        return
    cases = [(first, st.max_norm, "at the default knobs")]
    if clip_run is not None and clip_run[1][0].logged is not None:
        cases.append((clip_run[1][0], clip_run[0], f"at max_norm {clip_run[0]:.6g}"))
    judged = [(rec, where, judge_norm(rec, max_norm=m, n_elements=st.n, dtype=st.dtype,
                                      model=st.ctx.error_model, loss=st.loss))
              for rec, m, where in cases]
    i = next((j for j, c in enumerate(judged) if not c[2].ok), 0)
    rec, where, v = judged[i]
    also = "" if len(judged) == 1 or not v.ok else f" (and {judged[1][1]}: agrees too)"
    ref, _, desc = norm_reference(rec, cases[i][1])
    st.record("grad_norm", v, f"the step's logged grad_norm {where}{also} ({rec.logged:.6g}, "
              f"{rec.which}) vs {desc}, recomputed in float64 from the per-tensor sums "
              f"({ref:.6g})")


def _s_text(max_norm: float | None, rec: StepRecord) -> str:
    if max_norm is None:
        return "no clip declared: s = 1"
    return (f"s = min(1, max_norm {max_norm:g} / ||g|| {rec.grad_norm:.6g}) = "
            f"{clip_scale(max_norm, rec.grad_norm):.6g}")


def _unobserved(run: Sequence[StepRecord]) -> bool:
    """The parameters moved but the observer recorded nothing under any registry name: the
    optimizer's input is unknown (not the library's observed optimizer)."""
    return all(not t.applied_present for r in run for t in r.tensors.values()) and \
        any(t.delta_sumsq > 0 for r in run for t in r.tensors.values())


_UNOBSERVED = ("the parameters moved but the observer recorded no gradient under any registry "
               "name: is the optimizer the library's observed one (gc::observe / gc.Observe)?")


def _applied(st: _Step, run: Sequence[StepRecord], observed: bool) -> None:
    if not observed:
        for k in st.names:
            st.emit(f"step.applied[{k}]", Status.SKIPPED, "the optimizer is not observed "
                    "(describe.optimizer is null and nothing was recorded): wrap it with "
                    "gc::observe / gc.Observe to check what it receives")
        return
    if _unobserved(run):
        for k in st.names:
            st.emit(f"step.applied[{k}]", Status.SKIPPED, _UNOBSERVED)
        return
    nobody = all(not t.applied_present for t in run[0].tensors.values())
    for k in st.names:
        _applied_one(st, run, k, nobody)


def _applied_one(st: _Step, run: Sequence[StepRecord], k: str, nobody: bool) -> None:
    name = f"step.applied[{k}]"
    passed = None
    for i, rec in enumerate(run):
        t = rec.tensors[k]
        where = f"step {i + 1} of {len(run)}"
        if not t.applied_present:
            if t.grad_sumsq <= 0:
                continue
            gn = math.sqrt(t.grad_sumsq)
            why = ("no registry name received anything and no parameter moved: the step never "
                   "called the observed optimizer, or handed it every gradient under other "
                   "names" if nobody else
                   "gradients extracted under names other than the registry's (generic names, "
                   "a map keyed by position) never reach the optimizer")
            st.emit(name, Status.FAILED, f"{where}: the optimizer received nothing under {k!r} "
                    f"although its fresh gradient has norm {gn:.6g} (compared: the names the "
                    f"optimizer's input holds vs the registry; allowed: none missing): {why}",
                    bug=BugClass.WRONG_NAME, expected=gn, actual=0.0, details={"step": i + 1})
            return
        v = judge_applied([t], rec, run[i - 1] if i else None, max_norm=st.max_norm,
                          n_elements=st.n, dtype=st.dtype, model=st.ctx.error_model)
        what = (f"{where}: what the optimizer received under {k!r} vs s x the fresh gradient g "
                f"at that step ({_s_text(st.max_norm, rec)})")
        if not v.ok:
            st.record(name, v, what, step=i + 1)
            return
        passed = (v, what, i)
    if passed is None:
        st.emit(name, Status.PASSED, f"{k!r} has no gradient and the optimizer received "
                "nothing under it, at every step (compared: presence by name)")
    else:
        v, what, i = passed
        st.record(name, v, what + (f" (steps 1-{len(run)} agree)" if len(run) > 1 else ""),
                  step=i + 1)


def _clip(st: _Step, first: StepRecord, clip_run: tuple[float, list[StepRecord]] | None,
          note: str, observed: bool) -> None:
    if clip_run is None:
        st.emit("step.clip", Status.SKIPPED, note)
        return
    if not observed:
        st.emit("step.clip", Status.SKIPPED, "the optimizer is not observed: what it receives "
                "at either clip branch is unknown")
        return
    alt, (rec,) = clip_run
    m = st.max_norm
    assert m is not None
    present = [t for t in rec.tensors.values() if t.applied_present]
    absent = len(rec.tensors) - len(present)
    s_def, s_alt = clip_scale(m, first.grad_norm), clip_scale(alt, rec.grad_norm)

    def branch(s: float) -> str:
        return f"clipping, s = {s:.4g}" if s < 1 else "pass-through, s = 1"

    if not present:
        st.emit("step.clip", Status.SKIPPED, _UNOBSERVED if _unobserved([rec]) else
                f"at max_norm {alt:.6g} the optimizer received no gradient under any registry "
                "name (step.applied names the cause)")
        return
    v = judge_applied(present, rec, None, max_norm=alt, n_elements=st.n, dtype=st.dtype,
                      model=st.ctx.error_model)
    skipped = f" ({absent} tensors received nothing: see step.applied)" if absent else ""
    st.record("step.clip", v, f"both clip branches ran: at the default max_norm {m:g} "
              f"({branch(s_def)}; judged by step.applied[*]) and at max_norm {alt:.6g} "
              f"({branch(s_alt)}): what the optimizer received there vs s x g over every "
              f"tensor{skipped}", default_max_norm=m, experiment_max_norm=alt)


def _effective(st: _Step, run: Sequence[StepRecord]) -> None:
    if st.decl is None:
        for k in st.names:
            st.emit(f"step.effective[{k}]", Status.SKIPPED, "no optimizer declared or observed "
                    "(describe.optimizer is null): the update cannot be predicted")
        return
    if _unobserved(run):
        for k in st.names:
            st.emit(f"step.effective[{k}]", Status.SKIPPED, _UNOBSERVED + " The update is "
                    "predicted from what the optimizer received, which is unknown.")
        return
    try:
        h = from_declaration(st.decl)
    except (NotImplementedError, ValueError) as exc:
        for k in st.names:
            st.emit(f"step.effective[{k}]", Status.SKIPPED, str(exc))
        return
    rate = ""
    if h["kind"] == "vanilla" and h["batch"] > 1:
        rate = (f"; the solver divides the received gradient by batch = {h['batch']:g}: "
                f"effective rate lr / batch = {h['lr'] / h['batch']:.6g} (a mean cost's "
                "gradient is divided by the batch a second time)")
    for k in st.names:
        v, i = judge_effective(run, k, h, st.dtype, st.ctx.error_model)
        st.record(f"step.effective[{k}]", v, f"step {i + 1} of {len(run)}: the change of {k!r} "
                  f"vs {describe_declaration(h)} applied to what the optimizer received (from "
                  f"a fresh optimizer, on the sampled coordinates){rate if v.ok else ''}",
                  step=i + 1)


def _repeatable(st: _Step, repeat: Sequence[StepRecord], observed: bool,
                knobs: Mapping[str, float]) -> None:
    stateless = st.decl is not None and st.decl.get("kind") in ("sgd", "vanilla")
    first, second = repeat
    seen = any(t.applied_present for r in repeat for t in r.tensors.values())
    if not (observed and seen) and not stateless:
        st.emit("step.repeatable", Status.SKIPPED, "neither what the optimizer receives nor a "
                "stateless optimizer is known: the two calls cannot be compared")
        return
    v = judge_repeat(first, second, stateless=stateless, dtype=st.dtype,
                     model=st.ctx.error_model)
    at = "".join(f" at {k} {v:.6g} (the clip does not act there)" for k, v in knobs.items())
    st.record("step.repeatable", v, f"the step called twice from theta0{at} (the second call "
              "with the state the first left): the second call's received gradient" +
              (" and parameter change" if stateless else "") + " vs the first call's")


__all__ = ["ModelPeer", "check_step"]
