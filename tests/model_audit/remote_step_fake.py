"""An in-process model-protocol peer for the step checks: a NumPy MLP with analytic gradients,
answering ``model.describe``, ``model.loss``, ``model.grads`` and ``model.step`` as
``docs/protocol-model.md`` says, with a user "step" that is correct or one of the known bugs.

Written independently of the code under test (its own optimizers, its own sampling), in the
build's dtype throughout, so float32 rounding is the engine's, not the judge's.

Variants (what the user's step does):

* ``correct``: backward, global-norm clip (torch's ``max_norm / (norm + 1e-6)``), step.
* ``double_backward``: two backwards into one accumulating store (applied 2 g, unclipped branch).
* ``two_pass_clip_accumulating``: norm from g, then the backward of ``s x loss`` added to the
  unreset store: applied ``(1 + s) g``.
* ``no_clip``: the clip declared, never applied.  ``clip_twice``: scaled by ``s`` twice.
* ``swapped_names``: ``fc1.weight`` and ``fc2.weight`` handed to the optimizer swapped.
* ``norm_from_loss``: logs ``sqrt(loss)``.
* ``stale_grads``: the store is never zeroed (a second call receives stale + fresh).
* ``sgd_twice``: the optimizer stepped twice with one gradient.
* ``generic_names``: ``fc2.bias``'s gradient handed over under another name (absent).
* ``per_tensor_clip``: each tensor clipped by its own norm.
* ``post_clip_logged_as_pre``: logs the post-clip norm and says ``pre_clip``.
* ``never_steps``: the optimizer is never called.
* ``norm_in_float32``: the logged norm accumulated in float32 whatever the build's dtype.

Optimizer mutants (the step is correct, the optimizer is not what was declared):
``optimizer_state_lost`` (Adam's moments reset every step), ``solver_ignores_batch`` (a
VanillaSolver that does not divide by its batch), ``vanilla_clamp_first`` (the L1/L2 terms
added after the clamp instead of before).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gradcheck.backends.wire import RemoteUnsupported, encode_array
from gradcheck.model_audit import directions

NAMES = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")


def shapes(width: int) -> dict[str, tuple[int, ...]]:
    return {"fc1.weight": (width, width), "fc1.bias": (width,),
            "fc2.weight": (width, width), "fc2.bias": (width,)}


class _Build:
    def __init__(self, fake: FakeModel, dtype: str, knobs: dict[str, float]) -> None:
        self.f, self.dt = fake, np.dtype(dtype)
        self.p = {k: v.astype(self.dt) for k, v in fake.theta0.items()}
        self.x, self.y = fake.x.astype(self.dt), fake.y.astype(self.dt)
        self.max_norm = None if fake.max_norm is None else float(
            knobs.get("max_norm", fake.max_norm))
        self.store = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.m = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.v = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.t = 0
        self.received: dict[str, np.ndarray] = {}

    # the model -------------------------------------------------------------------------
    def loss_and_grad(self) -> tuple[float, dict[str, np.ndarray]]:
        p, x, y, dt = self.p, self.x, self.y, self.dt
        h = np.tanh(x @ p["fc1.weight"].T + p["fc1.bias"])
        r = h @ p["fc2.weight"].T + p["fc2.bias"] - y
        n = dt.type(x.shape[0])
        loss = dt.type(0.5) * np.sum(r * r) / n
        dr = r / n
        dh = (dr @ p["fc2.weight"]) * (dt.type(1) - h * h)
        g = {"fc1.weight": dh.T @ x, "fc1.bias": dh.sum(0),
             "fc2.weight": dr.T @ h, "fc2.bias": dr.sum(0)}
        return float(loss), {k: v.astype(dt) for k, v in g.items()}

    # the optimizer (observed) ----------------------------------------------------------
    def opt_step(self, grads: dict[str, np.ndarray]) -> None:
        self.received = {k: v.copy() for k, v in grads.items()}
        o, dt = self.f.optimizer, self.dt
        if o is None:
            for k, g in grads.items():
                self.p[k] = (self.p[k] - dt.type(0.1) * g).astype(dt)
            return
        var = self.f.variant
        if var == "optimizer_state_lost":  # the optimizer rebuilt every step
            self.m = {k: np.zeros_like(v) for k, v in self.p.items()}
            self.v = {k: np.zeros_like(v) for k, v in self.p.items()}
            self.t = 0
        self.t += 1
        for k, g in grads.items():
            if k not in self.p:
                continue
            p = self.p[k]
            if o["kind"] == "sgd":
                p = p - dt.type(o["lr"]) * g
            elif o["kind"] == "adamw":
                # Candle's constants: 1 - beta and the bias corrections in f64, then cast
                b1, b2 = float(o["beta1"]), float(o["beta2"])
                self.m[k] = dt.type(b1) * self.m[k] + dt.type(1 - b1) * g
                self.v[k] = dt.type(b2) * self.v[k] + dt.type(1 - b2) * g * g
                mh = self.m[k] / dt.type(1 - b1 ** self.t)
                vh = self.v[k] / dt.type(1 - b2 ** self.t)
                p = p * dt.type(1 - o["lr"] * o["weight_decay"])
                p = p - dt.type(o["lr"]) * (mh / (np.sqrt(vh) + dt.type(o["eps"])))
            elif o["kind"] == "vanilla":  # gorgonia v0.9.18 solvers.go order
                d = g.copy()
                if var != "vanilla_clamp_first":
                    d = self._regularised(d, p, o)
                if o["batch"] > 1 and var != "solver_ignores_batch":
                    d = d * (dt.type(1) / dt.type(o["batch"]))
                if o["clip"] is not None:
                    d = np.clip(d, dt.type(-o["clip"]), dt.type(o["clip"]))
                if var == "vanilla_clamp_first":
                    d = self._regularised(d, p, o)
                p = p + dt.type(-o["lr"]) * d
                self.store[k] = np.zeros_like(p)  # Step zeroes the dual value
            self.p[k] = p.astype(dt)

    def norm(self, grads: dict[str, np.ndarray]) -> Any:
        """The user's global norm in the build's dtype: NumPy's pairwise sums, or one
        sequential sum (the worst order; Candle's CPU sums are 32 sequential lanes)."""
        dt = self.dt
        if self.f.sequential_sums:
            flat = np.concatenate([v.ravel() for v in grads.values()])
            return np.sqrt(np.cumsum(flat * flat, dtype=dt)[-1], dtype=dt)
        return np.sqrt(sum(np.sum(v * v, dtype=dt) for v in grads.values()), dtype=dt)

    def _regularised(self, d: np.ndarray, p: np.ndarray, o: dict) -> np.ndarray:
        dt = self.dt
        if o["l1"]:
            d = d + dt.type(o["l1"]) * np.sign(p)
        if o["l2"]:
            d = d + p * dt.type(o["l2"])
        return d

    # the user's step ------------------------------------------------------------------
    def user_step(self) -> float | None:
        var, dt = self.f.variant, self.dt
        loss, g = self.loss_and_grad()
        if var == "stale_grads":
            self.store = {k: self.store[k] + g[k] for k in g}
        elif var == "double_backward":
            self.store = {k: g[k] + self.loss_and_grad()[1][k] for k in g}
        else:
            self.store = {k: g[k].copy() for k in g}
        st = self.store
        norm = self.norm(st)
        s = dt.type(1)
        if self.max_norm is not None:
            s = min(dt.type(1), dt.type(self.max_norm) / (norm + dt.type(1e-6)))
        if var == "two_pass_clip_accumulating":
            applied = {k: st[k] + s * g[k] for k in st}
        elif var == "no_clip":
            applied = {k: v.copy() for k, v in st.items()}
        elif var == "clip_twice":
            applied = {k: s * (s * v) for k, v in st.items()}
        elif var == "per_tensor_clip" and self.max_norm is not None:
            applied = {k: min(dt.type(1), dt.type(self.max_norm) / (
                self.norm({k: v}) + dt.type(1e-6))) * v for k, v in st.items()}
        else:
            applied = {k: s * v for k, v in st.items()}
        if var == "swapped_names":
            applied["fc1.weight"], applied["fc2.weight"] = applied["fc2.weight"], \
                applied["fc1.weight"]
        if var == "generic_names":
            applied["param_3"] = applied.pop("fc2.bias")
        if var != "never_steps":
            self.opt_step(applied)
        if var == "sgd_twice":
            self.opt_step(applied)
        if var != "stale_grads":
            self.store = {k: np.zeros_like(v) for k, v in st.items()}
        if not self.f.logs_norm:
            return None
        if var == "norm_in_float32":
            return float(np.sqrt(sum(np.sum(np.square(v.astype(np.float32)), dtype=np.float32)
                                     for v in st.values()), dtype=np.float32))
        if var == "norm_from_loss":
            return float(np.sqrt(dt.type(loss)))
        if self.f.which == "post_clip" or var == "post_clip_logged_as_pre":
            return float(self.norm(applied))
        return float(norm)


class FakeModel:
    """``request(method, params)`` as a model-protocol peer; counts requests per method."""

    def __init__(self, variant: str = "correct", *, optimizer: dict | None = None,
                 max_norm: float | None = None, knob: bool = True, logs_norm: bool = True,
                 which: str = "pre_clip", seed: int = 0, width: int = 6,
                 sequential_sums: bool = False, observed: bool = True) -> None:
        self.variant, self.optimizer, self.max_norm = variant, optimizer, max_norm
        self.shapes, self.sequential_sums = shapes(width), sequential_sums
        self.observed = observed and optimizer is not None
        self.knob, self.logs_norm, self.which = knob, logs_norm, which
        rng = np.random.default_rng(seed)
        self.theta0 = {k: rng.normal(scale=0.5 / np.sqrt(width / 6), size=self.shapes[k])
                       .astype(np.float32) for k in NAMES}
        self.x = rng.normal(size=(5, width)).astype(np.float32)
        self.y = rng.normal(size=(5, width)).astype(np.float32)
        self.calls: dict[str, int] = {}

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls[method] = self.calls.get(method, 0) + 1
        if params.get("dtype") not in ("float64", "float32"):
            raise RemoteUnsupported(method, "unsupported", f"dtype {params.get('dtype')}")
        return getattr(self, "_" + method.replace(".", "_"))(params)

    def _model_describe(self, p: dict) -> dict:
        knobs = {"max_norm": self.max_norm} if self.max_norm is not None and self.knob else {}
        clip = None if self.max_norm is None else {
            "kind": "global_norm", "max_norm": self.max_norm,
            "knob": "max_norm" if self.knob else None}
        return {"tensors": [{"name": k, "shape": list(self.shapes[k]), "dtype": p["dtype"]}
                            for k in NAMES],
                "unregistered": [], "knobs": knobs, "clip": clip, "optimizer": self.optimizer,
                "stopped": [], "step": True}

    def _model_loss(self, p: dict) -> dict:
        return {"loss": _Build(self, p["dtype"], {}).loss_and_grad()[0]}

    def _model_grads(self, p: dict) -> dict:
        loss, g = _Build(self, p["dtype"], {}).loss_and_grad()
        return {"loss": loss, "grads": {k: {"present": True, "sumsq": _ss(v, v),
                                            "sumabs": float(np.sum(np.abs(v), dtype=np.float64)),
                                            "maxabs": float(np.max(np.abs(v)))}
                                        for k, v in g.items()}}

    def _model_step(self, p: dict) -> dict:
        b = _Build(self, p["dtype"], p.get("knobs") or {})
        theta0 = {k: v.copy() for k, v in b.p.items()}
        calls = int(p["steps"]) if p["experiment"] == "run" else 2
        out = []
        for c in range(calls):
            if p["experiment"] == "repeat" and c == 1:
                b.p = {k: v.copy() for k, v in theta0.items()}
            before = {k: v.copy() for k, v in b.p.items()}
            _, g = b.loss_and_grad()  # the library's own fresh backward
            b.received = {}
            logged = b.user_step()
            out.append({"logged": {"grad_norm": logged, "which": self.which},
                        "tensors": {k: _summary(before[k], g[k], None if not self.observed
                                                else b.received.get(k),
                                                b.p[k], int(p["sample"]), p["dtype"])
                                    for k in NAMES}})
        return {"steps": out}


def _ss(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sum(a.astype(np.float64) * b.astype(np.float64)))


def _summary(theta: np.ndarray, g: np.ndarray, applied: np.ndarray | None, after: np.ndarray,
             k: int, dtype: str) -> dict:
    d = after.astype(np.float64) - theta.astype(np.float64)
    idx = directions.sample_indices(theta.size, k).tolist() if theta.size > k else None

    def pick(a: np.ndarray) -> dict:
        flat = a.astype(np.float64).ravel()
        return encode_array(flat if idx is None else flat[idx], dtype)

    out = {"grad_sumsq": _ss(g, g), "applied_present": applied is not None,
           "delta_sumsq": float(d.ravel() @ d.ravel()), "delta_dot_grad": _ss(d, g),
           "theta": pick(theta), "grad": pick(g), "delta": pick(d)}
    if idx is not None:
        out["index"] = idx
    if applied is not None:
        out.update(applied_sumsq=_ss(applied, applied), applied_dot_grad=_ss(applied, g),
                   delta_dot_applied=_ss(d, applied), applied=pick(applied))
    return out
