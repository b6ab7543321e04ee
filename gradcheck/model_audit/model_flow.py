"""Named-model flow checks of the process engines (Candle's VarMap model, Gorgonia's model).

A process child (Candle's ``candle.varmap_model``, Gorgonia's ``gorgonia.model``) builds a small
two-layer model in the engine and answers one request in three forms (the engine half, the
request names and stages, is :mod:`gradcheck.backends.process_model`; each engine's backend
carries its :class:`~gradcheck.backends.process_model.ModelSpec` as ``model_spec``).
:func:`check_named_model` compares the extracted gradients with FD by name, checks the reported
global norm and turns the cut log into flow findings that name the stage;
:func:`check_varmap_model` (Candle) and :func:`check_model_flow` (Gorgonia) are the entry points.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gradcheck import stream
from gradcheck.backends.base import Backend
from gradcheck.backends.process_model import ModelSpec, model_spec_of, validate_declared
from gradcheck.backends.registry import get_backend
from gradcheck.backends.wire import decode_array, decode_scalar, encode_array
from gradcheck.core.results import CheckKind, Report, Status
from gradcheck.model_audit.flow import FlowStatus, ParameterFlow
from gradcheck.model_audit.steps import _diagnose
from gradcheck.oracle.jacobian import fd_jacobian
from gradcheck.semantics.context import BugClass, ProbeContext, global_norm


def _cut_text(c: dict) -> str:
    text = (f"{'host round trip' if c.get('host') else 'detach'} at stage {c['stage']!r} "
            f"({c['how']})")
    return text + (f" [{c['engine']}]" if c.get("engine") else "")


def check_named_model(be: Any, spec: ModelSpec, cut: dict, *, seed: int, own: bool,
                      declared: Sequence[str], reproducer: str) -> Any:
    """Run the three requests of ``spec.method`` on ``be`` (closing it when ``own``) with the
    cut parameters ``cut`` and return the report (names, per-name FD, flow, global norm)."""
    ctx = ProbeContext(be, "cpu", "float64", seed, reproducer=reproducer)
    rng = np.random.default_rng([seed, 7])
    x, y = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    base = {"x": encode_array(x, "float64"), "y": encode_array(y, "float64"), **cut}
    try:
        shapes = {k: decode_array(v).shape for k, v in
                  be.request(spec.method, dict(base))["values"].items()}
        values = {k: rng.normal(scale=0.7, size=shp) for k, shp in sorted(shapes.items())}
        res = be.request(spec.method, {**base, "values": {k: encode_array(v, "float64")
                                                          for k, v in values.items()}})
        order = list(values)

        def losses(points: np.ndarray) -> np.ndarray:
            out = be.request(spec.method, {**base, "order": order,
                                           "points": encode_array(points, "float64")})
            return np.array([decode_scalar(v) for v in out["losses"]])[:, None]

        flat = np.concatenate([values[k].ravel() for k in order])
        fdj = fd_jacobian(losses, flat)
        J, E = fdj.value, fdj.error
    finally:
        if own:
            be.close()
    registered = list(res["registered"])
    raw = res["grads"]
    loss = decode_scalar(res["loss"])
    cuts = res.get("cuts", [])
    extracted = sorted(raw)
    ok = extracted == sorted(registered) and sorted(registered) == sorted(spec.names)
    ctx.emit(f"{spec.prefix}.names", Status.PASSED if ok else Status.FAILED,
             f"gradients extracted by {spec.by} {extracted} vs registered {sorted(registered)} "
             f"(built as {list(spec.names)}): " + ("one to one" if ok else
             f"missing {sorted(set(registered) - set(extracted))}, "
             f"unregistered {sorted(set(extracted) - set(registered))}"),
             bug=None if ok else BugClass.WRONG_NAME,
             details={"registered": registered, "extracted": extracted})
    grads: dict[str, np.ndarray] = {}
    at = 0
    for name in order:
        k = values[name].size
        fd_g, fd_e = J[0, at:at + k].reshape(values[name].shape), E[0, at:at + k]
        at += k
        if name not in raw:
            ctx.emit(f"{spec.prefix}.grad.{name}", Status.FAILED,
                     f"no gradient extracted under the registered name {name!r}",
                     bug=BugClass.WRONG_NAME)
            continue
        g = (np.zeros(values[name].shape) if raw[name] is None
             else decode_array(raw[name]).astype(np.float64))
        grads[name] = g
        ad_norm, dep = float(np.linalg.norm(g)), float(np.max(np.abs(fd_g)))
        noise = ctx.error_model.fd_bound(float(np.max(fd_e))) + 1e-300
        mine = [c for c in cuts if name in c.get("upstream", [])]
        where = "; ".join(_cut_text(c) for c in mine)
        if ad_norm > 0:
            status = FlowStatus.FLOWS if dep > noise else FlowStatus.UNUSED
        elif dep > noise:
            status = (FlowStatus.BLOCKED_AS_INTENDED
                      if mine and all(c["stage"] in declared for c in mine)
                      else FlowStatus.BLOCKED_UNINTENTIONALLY)
        else:
            status = FlowStatus.UNUSED
        fd_txt = f"FD dependence {dep:.3g} (noise {noise:.3g})"
        bug, verdict = None, Status.PASSED
        if status is FlowStatus.FLOWS:
            msg = f"{name!r}: gradient flows (|grad| {ad_norm:.3g}, {fd_txt})"
        elif status is FlowStatus.BLOCKED_AS_INTENDED:
            msg = f"{name!r}: blocked as declared ({where}; {fd_txt})"
        elif status is FlowStatus.BLOCKED_UNINTENTIONALLY:
            verdict = Status.FAILED
            bug = (BugClass.HOST_ROUND_TRIP if any(c.get("host") for c in mine)
                   else BugClass.DETACH_IN_INPUT_PATH)
            msg = (f"{name!r}: the loss depends on it ({fd_txt}) but {spec.store} holds "
                   f"{'no gradient' if raw[name] is None else 'a zero gradient'}; "
                   + (where or "no cut reported by the child"))
        else:
            verdict, bug = Status.FAILED, BugClass.UNUSED_PARAMETER
            msg = f"{name!r}: gradient {ad_norm:.3g} but no effect on the loss ({fd_txt})"
        checked = None  # the gradient's FD check, recorded after the flow result
        if status is FlowStatus.FLOWS or ad_norm > 0:
            checked = ctx.assess(g, fd_g, np.abs(g) + np.abs(fd_g), ctx.dtype,
                                 fd_e.reshape(g.shape))
        record = ParameterFlow(
            name, tuple(values[name].shape), status, status is FlowStatus.BLOCKED_AS_INTENDED,
            True, ad_norm, dep, noise, Status.SKIPPED if checked is None else
            Status.PASSED if checked.ok or checked.elements == 0 else Status.FAILED,
            tuple(str(c["stage"]) for c in mine), msg)
        ctx.emit(f"flow.{name}", verdict, msg, bug=bug, kind=CheckKind.FLOW,
                 details={"in_gradstore": raw[name] is not None}, flow=record)
        if checked is not None:
            ctx.record(f"{spec.prefix}.grad.{name}", checked, bug=BugClass.WRONG_GRADIENT,
                       dtype=ctx.dtype,
                       what=f"gradient of {name!r} extracted from {spec.store} by {spec.by} "
                            "vs central FD of the loss")
    reported = decode_scalar(res["grad_norm"])
    norm = global_norm(grads)
    a = ctx.assess(reported, norm, norm + abs(reported), "float64")
    bug, hint = BugClass.NORM_NOT_GLOBAL_L2, ""
    if not a.ok:
        bug, hint = _diagnose(reported, norm, grads, loss, "float64", ctx.error_model)
    ctx.record("grad_norm", a, bug=bug,
               what=f"global norm from {spec.store} ({reported:.6g}) vs sqrt(sum of squares) "
                    f"of the returned gradients in float64 ({norm:.6g}){hint}",
               details={"grad_norm": norm, "reported": reported, "loss": loss})
    return Report(stream.record_many(ctx.results))


def _roundtrip(roundtrip: tuple[str, str] | None, stages: Sequence[str],
               vias: Sequence[str]) -> dict[str, str] | None:
    """The child's description of a host round trip ``(stage, via)``, validated."""
    if roundtrip is None:
        return None
    if roundtrip[0] not in stages or roundtrip[1] not in vias:
        raise ValueError(f"roundtrip={roundtrip!r}: (stage in {stages}, via in {vias})")
    return {"stage": roundtrip[0], "via": roundtrip[1]}


def check_varmap_model(backend: Backend | None = None, *, seed: int = 0,
                       roundtrip: tuple[str, str] | None = None, detach: str | None = None,
                       declared: Sequence[str] = ()) -> Any:
    """Measure gradient extraction by ``VarMap`` name, the GradStore's global norm and gradient
    flow on a two-layer ``candle_nn`` model built by the child (``candle.varmap_model``):
    ``fc1 = linear(3, 3)``, ``fc2 = linear(3, 3)`` registered through ``VarBuilder::pp``, loss
    ``mse(fc2(tanh(fc1(x))), y)``.  A generic probe cannot express this (the protocol has no
    model registry), so this is Candle-specific and not run by ``check_semantics("candle")``.

    ``roundtrip=(stage, via)`` puts a host round trip (``via`` in to_vec1/to_vec2/to_scalar, then
    ``Tensor::new``) at ``stage`` ("hidden" after tanh(fc1), "logits" after fc2); ``detach=stage``
    puts ``Tensor::detach`` there; ``declared`` names the stages where a cut is intended.

    Results: ``varmap.names`` (the extracted gradients' names are the VarMap's registered names,
    one to one), ``varmap.grad.<name>`` (each extracted gradient vs the central-FD gradient of
    the loss w.r.t. that variable, the child evaluating the loss at perturbed values), ``flow.
    <name>`` (a gradient arrives where FD says the loss depends; a blocked one says at which
    stage and how it was cut), ``grad_norm`` (the norm the child computes from the GradStore vs
    the float64 norm of the returned gradients, loss-magnitude proxies named).
    """
    own = backend is None
    be = get_backend("candle") if backend is None else backend
    spec = model_spec_of(be)
    validate_declared(spec, declared)
    cut = {"roundtrip": _roundtrip(roundtrip, spec.stages, spec.vias), "detach": detach}
    return check_named_model(be, spec, cut, seed=seed, own=own, declared=declared, reproducer=(
        f"gradcheck.model_audit.model_flow.check_varmap_model(seed={seed}, "
        f"roundtrip={roundtrip!r}, detach={detach!r}, declared={tuple(declared)!r})"))


def check_model_flow(backend: Backend | None = None, *, seed: int = 0,
                     roundtrip: tuple[str, str] | None = None,
                     declared: Sequence[str] = ()) -> Any:
    """Measure gradient extraction by learnable name, the global norm and gradient flow on a
    two-layer model written in Gorgonia by the child (``gorgonia.model``): learnables
    ``fc1.weight`` (3, 3), ``fc1.bias`` (3), ``fc2.weight`` (3, 3), ``fc2.bias`` (3), loss
    ``mean((tanh(x W1 + b1) W2 + b2 - y)^2)``, gradients read from the learnables' dual values
    after ``gorgonia.Grad`` and a ``TapeMachine`` run with ``BindDualValues``.  Not run by
    ``check_semantics("gorgonia")`` (the protocol has no model registry).

    ``roundtrip=(stage, via)`` runs the graph up to ``stage`` ("hidden" after tanh(fc1),
    "logits" after fc2), copies the node's value into a Go slice and feeds it back as a new
    ``via`` node ("constant": ``gorgonia.NewConstant``; "input": a new input node).  Gorgonia's
    ``Grad`` then refuses the learnables upstream (a ``SymDiffError``); the child leaves them
    out, as a user would have to, and they hold no gradient.  ``declared`` names the stages
    where a cut is intended.

    Results, as Candle's ``check_varmap_model``: ``model.names``, ``model.grad.<name>``,
    ``flow.<name>`` (a blocked one names the stage and how it was cut), ``grad_norm``.
    """
    own = backend is None
    be = get_backend("gorgonia") if backend is None else backend
    spec = model_spec_of(be)
    validate_declared(spec, declared)
    cut = {"roundtrip": _roundtrip(roundtrip, spec.stages, spec.vias)}
    return check_named_model(be, spec, cut, seed=seed, own=own, declared=declared, reproducer=(
        f"gradcheck.model_audit.model_flow.check_model_flow(seed={seed}, "
        f"roundtrip={roundtrip!r}, declared={tuple(declared)!r})"))
