"""Declared optimizers: what one step of SGD (momentum, Nesterov, weight decay) or Adam/AdamW
should do from a given state, in float64, written from the published update rules.

The audit's training-step check predicts each step from the parameters and the true (clipped)
gradient at that step and the optimizer state it keeps itself, then compares with what the
user's step did.  A declaration is engine-neutral (``SGD(lr=0.1, momentum=0.9)``, ``Adam(...)``;
``lr`` may be a schedule ``step -> lr``); a ``torch.optim`` optimizer found in (or given with) the
user's step is read instead: its class, each parameter group's hyper-parameters *as they are
before each step* (so an LR scheduler's warm-up is followed) and its state at the start (momentum
buffers, Adam moments and step counts).

Update rules (``g`` the gradient after clipping, ``t`` the 1-based step count):

* SGD: ``g += wd p``; with momentum ``b = g`` (first step) else ``b = mu b + (1 - dampening) g``;
  ``d = g + mu b`` (Nesterov) or ``b``; ``p -= lr d``.
* Adam: ``g += wd p`` (AdamW: ``p *= 1 - lr wd``); ``m = b1 m + (1 - b1) g``,
  ``v = b2 v + (1 - b2) g^2``; ``p -= lr / (1 - b1^t) x m / (sqrt(v) / sqrt(1 - b2^t) + eps)``;
  with ``amsgrad`` the denominator uses ``v_max = max(v_max, v)`` (kept in the state) for ``v``.
* ``maximize`` (either): ``g = -g`` first.
* Gorgonia's ``VanillaSolver`` (``kind: "vanilla"``), in the order of gorgonia v0.9.18's
  ``solvers.go``: ``g += l1 sign(p) + l2 p``; ``g /= batch`` (when ``batch > 1``); ``g`` clamped
  to ``[-clip, clip]`` elementwise (when a ``clip`` is set); ``p -= lr g``.

:func:`from_declaration` reads the model protocol's ``optimizer`` object
(``docs/protocol-model.md``) as the ``hyper`` dict :func:`update` takes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SGD", "Adam", "AdamW", "OptimizerModel", "from_torch", "from_declaration"]

Schedule = float | Callable[[int], float]


def _lr(lr: Schedule, t: int) -> float:
    return float(lr(t)) if callable(lr) else float(lr)


@dataclass(frozen=True)
class SGD:
    """Declared SGD: ``lr`` (a number or a schedule ``step index -> lr``), ``momentum``,
    ``dampening``, ``nesterov``, ``weight_decay`` (as ``torch.optim.SGD`` defines them)."""

    lr: Schedule
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    maximize: bool = False

    def hyper(self, name: str, t: int) -> dict[str, Any]:
        return {"kind": "sgd", "lr": _lr(self.lr, t), "momentum": self.momentum,
                "dampening": self.dampening, "nesterov": self.nesterov,
                "weight_decay": self.weight_decay, "maximize": self.maximize}

    def describe(self) -> str:
        lr = "schedule" if callable(self.lr) else f"{self.lr:g}"
        extra = "".join(f", {k}={v:g}" for k, v in (("momentum", self.momentum),
                                                      ("weight_decay", self.weight_decay)) if v)
        flags = "".join(f", {f}" for f in ("nesterov", "maximize") if getattr(self, f))
        return f"SGD(lr={lr}{extra}{flags})"

    def initial_state(self, names: tuple[str, ...]) -> dict[str, dict]:
        return {k: {} for k in names}


@dataclass(frozen=True)
class Adam:
    """Declared Adam (``decoupled=True``: AdamW) with ``torch.optim.Adam``'s definitions
    (``amsgrad``, ``maximize`` as there)."""

    lr: Schedule = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    decoupled: bool = False
    amsgrad: bool = False
    maximize: bool = False

    def hyper(self, name: str, t: int) -> dict[str, Any]:
        return {"kind": "adam", "lr": _lr(self.lr, t), "betas": self.betas, "eps": self.eps,
                "weight_decay": self.weight_decay, "decoupled": self.decoupled,
                "amsgrad": self.amsgrad, "maximize": self.maximize}

    def describe(self) -> str:
        lr = "schedule" if callable(self.lr) else f"{self.lr:g}"
        flags = "".join(f", {f}=True" for f in ("amsgrad", "maximize") if getattr(self, f))
        return (f"{'AdamW' if self.decoupled else 'Adam'}(lr={lr}, betas={self.betas}, "
                f"eps={self.eps:g}, weight_decay={self.weight_decay:g}{flags})")

    def initial_state(self, names: tuple[str, ...]) -> dict[str, dict]:
        return {k: {} for k in names}


def AdamW(lr: Schedule = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
          weight_decay: float = 1e-2, amsgrad: bool = False, maximize: bool = False) -> Adam:
    """Declared AdamW (decoupled weight decay)."""
    return Adam(lr, betas, eps, weight_decay, decoupled=True, amsgrad=amsgrad,
                maximize=maximize)


OptimizerModel = Any  # SGD | Adam | _TorchOptimizer: hyper(name, t), describe(), initial_state


def update(h: Mapping[str, Any], p: np.ndarray, g: np.ndarray, st: dict
           ) -> tuple[np.ndarray, dict, np.ndarray]:
    """One step of the rule ``h`` on one parameter: (new value, new state, magnitude of the
    terms, for the error model)."""
    if h["kind"] == "vanilla":
        new = _vanilla(h, p, g)
        return new, st, np.abs(p) + np.abs(new) + 2.0 * h["lr"] * (
            np.abs(g) + h["l1"] + h["l2"] * np.abs(p))
    lr, wd = h["lr"], h["weight_decay"]
    if h.get("maximize"):
        g = -g
    if h["kind"] == "sgd":
        d = g + wd * p if wd else g
        mu = h["momentum"]
        if mu:
            b = d.copy() if "momentum_buffer" not in st else (
                mu * st["momentum_buffer"] + (1.0 - h["dampening"]) * d)
            st = {"momentum_buffer": b}
            d = d + mu * b if h["nesterov"] else b
        new = p - lr * d
        return new, st, np.abs(p) + np.abs(new) + lr * (np.abs(d) + np.abs(g))
    b1, b2 = h["betas"]
    t = st.get("step", 0) + 1
    m, v = st.get("exp_avg", np.zeros_like(p)), st.get("exp_avg_sq", np.zeros_like(p))
    base = p * (1.0 - lr * wd) if (wd and h["decoupled"]) else p
    d = g + wd * p if (wd and not h["decoupled"]) else g
    m = b1 * m + (1.0 - b1) * d
    v = b2 * v + (1.0 - b2) * d * d
    out = {"step": t, "exp_avg": m, "exp_avg_sq": v}
    if h.get("amsgrad"):
        v = np.maximum(st.get("max_exp_avg_sq", np.zeros_like(p)), v)
        out["max_exp_avg_sq"] = v
    denom = np.sqrt(v) / np.sqrt(1.0 - b2 ** t) + h["eps"]
    delta = lr / (1.0 - b1 ** t) * m / denom
    new = base - delta
    return new, out, np.abs(p) + np.abs(new) + 4.0 * np.abs(delta)


def _vanilla(h: Mapping[str, Any], p: np.ndarray, g: np.ndarray) -> np.ndarray:
    d = g + h["l1"] * np.sign(p) + h["l2"] * p
    if h["batch"] > 1:
        d = d / h["batch"]
    if h["clip"] is not None and h["clip"] > 0:
        d = np.clip(d, -h["clip"], h["clip"])
    return p - h["lr"] * d


def from_declaration(decl: Mapping[str, Any]) -> dict[str, Any]:
    """The ``hyper`` dict of a model-protocol optimizer declaration (``sgd``, ``adam``,
    ``adamw``, ``vanilla``); raises ``NotImplementedError`` for another kind, ``ValueError``
    for a declaration that lacks a field."""
    kind = decl.get("kind")
    try:
        if kind == "sgd":
            return {"kind": "sgd", "lr": float(decl["lr"]), "momentum": 0.0, "dampening": 0.0,
                    "nesterov": False, "weight_decay": 0.0, "maximize": False}
        if kind in ("adam", "adamw"):
            return {"kind": "adam", "lr": float(decl["lr"]),
                    "betas": (float(decl["beta1"]), float(decl["beta2"])),
                    "eps": float(decl["eps"]), "weight_decay": float(decl.get("weight_decay")
                                                                     or 0.0),
                    "decoupled": kind == "adamw", "amsgrad": False, "maximize": False}
        if kind == "vanilla":
            clip = decl.get("clip")
            return {"kind": "vanilla", "lr": float(decl["lr"]),
                    "batch": float(decl.get("batch") or 1.0),
                    "clip": None if clip is None else float(clip),
                    "l1": float(decl.get("l1") or 0.0), "l2": float(decl.get("l2") or 0.0)}
    except (KeyError, TypeError) as exc:
        raise ValueError(f"the {kind} declaration {dict(decl)} lacks a field: {exc}") from exc
    raise NotImplementedError(f"optimizer kind {kind!r} is not modelled (sgd, adam, adamw, "
                              "vanilla are)")


def describe_declaration(h: Mapping[str, Any]) -> str:
    """``"AdamW(lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.01)"`` for a hyper
    dict of :func:`from_declaration`."""
    if h["kind"] == "sgd":
        return f"SGD(lr={h['lr']:g})"
    if h["kind"] == "vanilla":
        extra = "".join(f", {k}={h[k]:g}" for k in ("clip", "l1", "l2") if h[k])
        return f"VanillaSolver(lr={h['lr']:g}, batch={h['batch']:g}{extra})"
    return (f"{'AdamW' if h['decoupled'] else 'Adam'}(lr={h['lr']:g}, betas={h['betas']}, "
            f"eps={h['eps']:g}, weight_decay={h['weight_decay']:g})")


class _TorchOptimizer:
    """A ``torch.optim`` optimizer read as a declaration (hyper-parameters live, state once)."""

    _KINDS = {"SGD": "sgd", "Adam": "adam", "AdamW": "adam"}

    def __init__(self, opt: Any, params: Mapping[str, Any]) -> None:
        kind = type(opt).__name__
        if kind not in self._KINDS:
            raise NotImplementedError(f"optimizer {kind} is not modelled (SGD, Adam, AdamW are)")
        self.opt, self.kind = opt, kind
        self._params = dict(params)
        by_id = {id(p): k for k, p in params.items()}
        self.group: dict[str, dict] = {}
        for grp in opt.param_groups:
            for p in grp["params"]:
                if id(p) in by_id:
                    self.group[by_id[id(p)]] = grp
        self.names = tuple(self.group)

    def hyper(self, name: str, t: int) -> dict[str, Any] | None:
        grp = self.group.get(name)
        if grp is None:
            return None  # not in the optimizer: the step must leave it alone
        if self.kind == "SGD":
            return {"kind": "sgd", "lr": float(grp["lr"]), "momentum": grp["momentum"],
                    "dampening": grp["dampening"], "nesterov": grp["nesterov"],
                    "weight_decay": grp["weight_decay"], "maximize": bool(grp.get("maximize"))}
        return {"kind": "adam", "lr": float(grp["lr"]), "betas": tuple(grp["betas"]),
                "eps": grp["eps"], "weight_decay": grp["weight_decay"],
                "decoupled": self.kind == "AdamW", "amsgrad": bool(grp.get("amsgrad")),
                "maximize": bool(grp.get("maximize"))}

    def describe(self) -> str:
        g = self.opt.param_groups[0]
        keys = ("lr", "momentum", "betas", "weight_decay", "nesterov", "amsgrad", "maximize")
        shown = ", ".join(f"{k}={g[k]}" for k in keys if k in g and g[k])
        return f"torch.optim.{self.kind}({shown})"

    def initial_state(self, names: tuple[str, ...]) -> dict[str, dict]:
        out: dict[str, dict] = {k: {} for k in names}
        for k in names:
            st = self.opt.state.get(self._params[k]) if k in self._params else None
            if st:
                # a copy: .double() of a float64 tensor is the tensor, and its .numpy() the
                # optimizer's live buffer, which the user's step updates in place
                out[k] = {n: (int(v) if n == "step" else
                              np.array(v.detach().cpu().double().numpy(), copy=True))
                          for n, v in st.items() if v is not None}
        return out


def from_torch(opt: Any, params: Mapping[str, Any]) -> _TorchOptimizer:
    """The model of a ``torch.optim`` optimizer over the named ``params``."""
    return _TorchOptimizer(opt, params)
