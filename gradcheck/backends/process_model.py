"""The engine-independent half of the named-model flow checks of the process engines.

A process child (Candle's ``candle.varmap_model``, Gorgonia's ``gorgonia.model``) builds a small
two-layer model in the engine and answers one request in three forms:

* ``{x, y, roundtrip, ...}``: the learnables' ``values`` (their shapes);
* ``{..., values}``: ``registered`` (the learnables' names), ``grads`` (name -> array or null
  when the engine holds none), ``loss``, ``grad_norm`` (computed by the child from the engine's
  gradient store) and ``cuts`` (each ``{stage, how, host, upstream[, engine]}``: where the child
  cut the flow and which learnables are upstream of that stage);
* ``{..., order, points}``: ``losses``, the loss at each row of ``points`` (the values laid out
  as the names in ``order``), for the central finite differences.

:func:`check_named_model` compares the extracted gradients with FD by name, checks the reported
global norm and turns the cut log into flow findings that name the stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .wire import decode_array, decode_scalar, encode_array


@dataclass(frozen=True)
class ModelSpec:
    """How one engine's child names things (used in the result names and messages)."""

    method: str                 # the child request
    names: tuple[str, ...]      # the learnables the model is built with
    stages: tuple[str, ...]     # where a cut can be put
    prefix: str                 # result names: "<prefix>.names", "<prefix>.grad.<name>"
    by: str                     # how gradients are extracted, e.g. "VarMap name"
    store: str                  # where the engine keeps them, e.g. "the GradStore"


def validate_declared(spec: ModelSpec, declared: Sequence[str]) -> None:
    for s in declared:
        if s not in spec.stages:
            raise ValueError(f"declared stage {s!r}: one of {spec.stages}")


def _cut_text(c: dict) -> str:
    text = (f"{'host round trip' if c.get('host') else 'detach'} at stage {c['stage']!r} "
            f"({c['how']})")
    return text + (f" [{c['engine']}]" if c.get("engine") else "")


def check_named_model(be: Any, spec: ModelSpec, cut: dict, *, seed: int, own: bool,
                      declared: Sequence[str], reproducer: str) -> Any:
    """Run the three requests of ``spec.method`` on ``be`` (closing it when ``own``) with the
    cut parameters ``cut`` and return the report (names, per-name FD, flow, global norm)."""
    from .. import fd, stream
    from ..checks._audit_steps import _diagnose
    from ..checks._probing import BugClass, ProbeContext, assess, global_norm
    from ..checks.audit import FlowStatus
    from ..results import CheckKind, Report, Status

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
        J, E = fd.jacobian(losses, flat)
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
        noise = 10.0 * float(np.max(fd_e)) + 1e-300
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
        ctx.emit(f"flow.{name}", verdict, msg, bug=bug, kind=CheckKind.FLOW.value,
                 details={"flow": status.value, "cut_points": [c["stage"] for c in mine],
                          "in_gradstore": raw[name] is not None})
        if status is FlowStatus.FLOWS or ad_norm > 0:
            ctx.compare(f"{spec.prefix}.grad.{name}", g, fd_g, np.abs(g) + np.abs(fd_g),
                        fd_error=fd_e.reshape(g.shape), bug=BugClass.WRONG_GRADIENT,
                        what=f"gradient of {name!r} extracted from {spec.store} by {spec.by} "
                             "vs central FD of the loss")
    reported = decode_scalar(res["grad_norm"])
    norm = global_norm(grads)
    a = assess(reported, norm, norm + abs(reported), "float64")
    bug, hint = BugClass.NORM_NOT_GLOBAL_L2, ""
    if not a.ok:
        bug, hint = _diagnose(reported, norm, grads, loss, "float64")
    ctx.record("grad_norm", a, bug=bug,
               what=f"global norm from {spec.store} ({reported:.6g}) vs sqrt(sum of squares) "
                    f"of the returned gradients in float64 ({norm:.6g}){hint}",
               details={"grad_norm": norm, "reported": reported, "loss": loss})
    return Report(stream.record_many(ctx.results))
