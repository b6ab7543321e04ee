"""Hugging Face Candle (Rust, ``candle-core`` + ``candle-nn``, CPU) through the process protocol.

The child is the Rust binary built from ``adapters/candle`` (``bash adapters/candle/install.sh``
runs ``cargo build --release``).  Where to find it: ``GRADCHECK_CANDLE_BIN`` (default:
``adapters/candle/target/release/gradcheck-candle`` of this checkout).  Candle computes in
float64 and float32, so the oracle checks the rule in float64 and the float32 rounding
separately.  Reverse mode is ``Tensor::backward`` (a fresh ``GradStore`` per call); Candle has no
forward mode, and its backward detaches the gradients it builds, so there is no order 2.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .base import Accumulation, Semantics
from .process import ProcessBackend
from .wire import decode_array, decode_scalar, encode_array

_ADAPTER = Path(__file__).resolve().parents[2] / "adapters" / "candle"
_DEFAULT_BIN = _ADAPTER / "target" / "release" / "gradcheck-candle"


def binary_path() -> Path:
    """Path of the adapter binary (``GRADCHECK_CANDLE_BIN`` or the crate's release build)."""
    return Path(os.environ.get("GRADCHECK_CANDLE_BIN", _DEFAULT_BIN))


def unavailable_reason() -> str | None:
    """Why the candle backend cannot run here, or None when it can (starts nothing)."""
    path = binary_path()
    if not path.is_file():
        how = ("build it with bash adapters/candle/install.sh (needs cargo)"
               if "GRADCHECK_CANDLE_BIN" not in os.environ else "check GRADCHECK_CANDLE_BIN")
        return f"the Candle adapter binary {path} is missing: {how}"
    if not os.access(path, os.X_OK):
        return f"the Candle adapter binary {path} is not executable"
    return None


class CandleBackend(ProcessBackend):
    """Candle 0.11 on CPU, float64 and float32, reverse mode only; training through ``Var``,
    ``Tensor::backward`` (fresh ``GradStore``), ``Tensor::detach`` and ``candle_nn::SGD``."""

    name = "candle"
    semantics = Semantics(
        Accumulation.FUNCTIONAL,
        stop_gradient="detach",
        notes="Tensor::backward returns a fresh GradStore each call: a second backward replaces "
              "the gradients, it does not add to them (there is nothing to zero); "
              "Tensor::detach stops the flow",
    )
    supports_jvp = False
    supports_order2 = False
    dtypes = ("float64", "float32")
    declared_devices = ("cpu",)

    def __init__(self, *, request_timeout: float | None = None,
                 env: dict[str, str] | None = None) -> None:
        super().__init__(cwd=str(_ADAPTER), env=env, request_timeout=request_timeout)

    def command(self) -> list[str]:
        reason = unavailable_reason()
        if reason:
            raise NotImplementedError(f"backend 'candle' is not available: {reason}")
        return [str(binary_path())]


# ---- Candle-specific probes: a VarMap model (candle.varmap_model, not part of the protocol) ---
VARMAP_NAMES = ("fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight")
_STAGES = ("hidden", "logits")
_VIAS = ("to_vec1", "to_vec2", "to_scalar")


def check_varmap_model(backend: CandleBackend | None = None, *, seed: int = 0,
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
    from .. import fd, stream
    from ..checks._audit_steps import _diagnose
    from ..checks._probing import BugClass, ProbeContext, assess, global_norm
    from ..checks.audit import FlowStatus
    from ..results import CheckKind, Report, Status

    for s in declared:
        if s not in _STAGES:
            raise ValueError(f"declared stage {s!r}: one of {_STAGES}")
    if roundtrip is not None and (roundtrip[0] not in _STAGES or roundtrip[1] not in _VIAS):
        raise ValueError(f"roundtrip={roundtrip!r}: (stage in {_STAGES}, via in {_VIAS})")
    own = backend is None
    be = CandleBackend() if backend is None else backend
    ctx = ProbeContext(be, "cpu", "float64", seed, reproducer=(
        f"gradcheck.backends.candle_backend.check_varmap_model(seed={seed}, "
        f"roundtrip={roundtrip!r}, detach={detach!r}, declared={tuple(declared)!r})"))
    rng = np.random.default_rng([seed, 7])
    x, y = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    base = {"x": encode_array(x, "float64"), "y": encode_array(y, "float64"),
            "roundtrip": None if roundtrip is None else {"stage": roundtrip[0],
                                                         "via": roundtrip[1]},
            "detach": detach}
    try:
        shapes = {k: decode_array(v).shape for k, v in
                  be.request("candle.varmap_model", dict(base))["values"].items()}
        values = {k: rng.normal(scale=0.7, size=shp) for k, shp in sorted(shapes.items())}
        res = be.request("candle.varmap_model",
                         {**base, "values": {k: encode_array(v, "float64")
                                             for k, v in values.items()}})
        order = list(values)

        def losses(points: np.ndarray) -> np.ndarray:
            out = be.request("candle.varmap_model", {**base, "order": order,
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
    ok = extracted == sorted(registered) and sorted(registered) == sorted(VARMAP_NAMES)
    ctx.emit("varmap.names", Status.PASSED if ok else Status.FAILED,
             f"gradients extracted by VarMap name {extracted} vs registered {sorted(registered)} "
             f"(built as {list(VARMAP_NAMES)}): " + ("one to one" if ok else
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
            ctx.emit(f"varmap.grad.{name}", Status.FAILED,
                     f"no gradient extracted under the registered name {name!r}",
                     bug=BugClass.WRONG_NAME)
            continue
        g = (np.zeros(values[name].shape) if raw[name] is None
             else decode_array(raw[name]).astype(np.float64))
        grads[name] = g
        ad_norm, dep = float(np.linalg.norm(g)), float(np.max(np.abs(fd_g)))
        noise = 10.0 * float(np.max(fd_e)) + 1e-300
        mine = [c for c in cuts if name in c.get("upstream", [])]
        where = "; ".join(f"{'host round trip' if c.get('host') else 'detach'} at stage "
                          f"{c['stage']!r} ({c['how']})" for c in mine)
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
            msg = (f"{name!r}: the loss depends on it ({fd_txt}) but the GradStore holds "
                   f"{'no gradient' if raw[name] is None else 'a zero gradient'}; "
                   + (where or "no cut reported by the child"))
        else:
            verdict, bug = Status.FAILED, BugClass.UNUSED_PARAMETER
            msg = f"{name!r}: gradient {ad_norm:.3g} but no effect on the loss ({fd_txt})"
        ctx.emit(f"flow.{name}", verdict, msg, bug=bug, kind=CheckKind.FLOW.value,
                 details={"flow": status.value, "cut_points": [c["stage"] for c in mine],
                          "in_gradstore": raw[name] is not None})
        if status is FlowStatus.FLOWS or ad_norm > 0:
            ctx.compare(f"varmap.grad.{name}", g, fd_g, np.abs(g) + np.abs(fd_g),
                        fd_error=fd_e.reshape(g.shape), bug=BugClass.WRONG_GRADIENT,
                        what=f"gradient of {name!r} extracted from the GradStore by VarMap "
                             "name vs central FD of the loss")
    reported = decode_scalar(res["grad_norm"])
    norm = global_norm(grads)
    a = assess(reported, norm, norm + abs(reported), "float64")
    bug, hint = BugClass.NORM_NOT_GLOBAL_L2, ""
    if not a.ok:
        bug, hint = _diagnose(reported, norm, grads, loss, "float64")
    ctx.record("grad_norm", a, bug=bug,
               what=f"global norm from the GradStore ({reported:.6g}) vs sqrt(sum of squares) "
                    f"of the returned gradients in float64 ({norm:.6g}){hint}",
               details={"grad_norm": norm, "reported": reported, "loss": loss})
    return Report(stream.record_many(ctx.results))
