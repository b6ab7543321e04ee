"""A protocol child written in plain Python + NumPy (hand-derived rules), for tests.

It is both a second implementation of ``docs/protocol.md`` (the first real one is the
TensorFlow.js adapter) and a fault injector: flags make it crash, hang, print garbage, speak
another protocol version or return a wrong VJP, so the harness's handling of each is tested
without Node.js.

    python numpy_child.py [--protocol N] [--refuse-version] [--crash-on METHOD[:K]]
                          [--hang-on METHOD] [--malformed-on METHOD] [--wrong-vjp SCALE]
                          [--accumulation accumulate|functional] [--declare-dtypes a,b]
                          [--unchecked-clip] [--stop-reading-after METHOD]
                          [--noisy-evaluate SCALE]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time

import numpy as np

_NONFINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def encode_scalar(x: float) -> float | str:
    """Non-finite floats travel as the strings "NaN", "Infinity", "-Infinity"."""
    if np.isfinite(x):
        return float(x)
    return "NaN" if np.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def decode_scalar(v, what: str) -> float:
    if isinstance(v, str) and v in _NONFINITE:
        return _NONFINITE[v]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    raise ValueError(f"{what} must be a number or 'NaN'/'Infinity'/'-Infinity', got {v!r}")

VERSION = 1


def _dec(a):
    raw = base64.b64decode(a["data"])
    return np.frombuffer(raw, dtype="<f8").reshape(a["shape"]).copy()


def _enc(x, dtype="float64"):
    x = np.asarray(x, dtype="<f8")
    return {"dtype": dtype, "shape": list(x.shape),
            "data": base64.b64encode(np.ascontiguousarray(x).tobytes()).decode()}


def _unbroadcast(g, shape):
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for k, n in enumerate(shape):
        if n == 1 and g.shape[k] != 1:
            g = g.sum(axis=k, keepdims=True)
    return g


# op: (forward, vjp(args, y, g) -> grads, jvp(args, y, tangents) -> tangent)
OPS = {
    "sin": (lambda x: np.sin(x), lambda a, y, g: [g * np.cos(a[0])],
            lambda a, y, t: np.cos(a[0]) * t[0]),
    "tanh": (lambda x: np.tanh(x), lambda a, y, g: [g * (1 - y * y)],
             lambda a, y, t: (1 - y * y) * t[0]),
    "exp": (lambda x: np.exp(x), lambda a, y, g: [g * y], lambda a, y, t: y * t[0]),
    "mul": (lambda x, z: x * z,
            lambda a, y, g: [_unbroadcast(g * a[1], a[0].shape),
                             _unbroadcast(g * a[0], a[1].shape)],
            lambda a, y, t: t[0] * a[1] + a[0] * t[1]),
    "add": (lambda x, z: x + z,
            lambda a, y, g: [_unbroadcast(g, a[0].shape), _unbroadcast(g, a[1].shape)],
            lambda a, y, t: t[0] + t[1]),
    "sum": (lambda x: np.asarray(np.sum(x)), lambda a, y, g: [g * np.ones_like(a[0])],
            lambda a, y, t: np.asarray(np.sum(t[0]))),
    "matmul": (lambda x, z: x @ z, lambda a, y, g: [g @ a[1].T, a[0].T @ g],
               lambda a, y, t: t[0] @ a[1] + a[0] @ t[1]),
}


class Child:
    def __init__(self, opts):
        self.o = opts
        self.sessions = {}
        self.counts = {}

    # -- calculus
    def _args(self, p):
        dt = p.get("dtype", "float64")
        return [_dec(a).astype(dt) for a in p["args"]], dt

    def evaluate(self, p):
        args, dt = self._args(p)
        self._no_transforms(p)
        out = OPS[p["fn"]["op"]][0](*args)
        if self.o.noisy_evaluate:  # fault: a nondeterministic forward
            out = out + self.o.noisy_evaluate * np.random.default_rng().standard_normal(
                np.shape(out))
        return {"outputs": [_enc(out, dt)]}

    def vjp(self, p):
        args, dt = self._args(p)
        self._no_transforms(p)
        fwd, rule, _ = OPS[p["fn"]["op"]]
        y = fwd(*args)
        g = _dec(p["cotangents"][0]).astype(dt)
        grads = rule(args, y, g)
        return {"grads": [_enc(self.o.wrong_vjp * grads[k], dt) for k in p["diff"]]}

    def jvp(self, p):
        args, dt = self._args(p)
        self._no_transforms(p)
        fwd, _, rule = OPS[p["fn"]["op"]]
        tans = [np.zeros_like(a) for a in args]
        for k, t in zip(p["diff"], p["tangents"], strict=True):
            tans[k] = _dec(t).astype(dt)
        return {"tangents": [_enc(rule(args, fwd(*args), tans), dt)]}

    def _no_transforms(self, p):
        if p["fn"].get("transforms"):
            raise NotImplementedError("transforms (order 2) are not supported")
        if p["fn"]["op"] not in OPS:
            raise NotImplementedError(f"op {p['fn']['op']!r} is not implemented")

    # -- training
    def train_create(self, p):
        sid = f"s{len(self.sessions) + 1}"
        self.sessions[sid] = {"params": {k: _dec(v) for k, v in p["params"].items()},
                              "grads": {}}
        return {"session": sid}

    def train_backward(self, p):
        s = self.sessions[p["session"]]
        loss = p["loss"]
        args = [s["params"][a["param"]] if "param" in a else _dec(a["array"])
                for a in loss["args"]]
        fwd, rule, _ = OPS[loss["op"]]
        y = fwd(*args)
        w = _dec(loss["weights"]) if "weights" in loss else np.ones_like(y)
        grads = rule(args, y, w)
        fresh = {}
        for a, g in zip(loss["args"], grads, strict=True):
            if "param" in a and not a.get("stop"):
                fresh[a["param"]] = fresh.get(a["param"], 0) + g  # fan-out sums
        if self.o.accumulation == "accumulate":
            for k, g in fresh.items():
                s["grads"][k] = s["grads"].get(k, 0) + g
        else:
            s["grads"] = fresh
        return {"loss": encode_scalar(float(np.sum(w * y)))}

    def train_grads(self, p):
        s = self.sessions[p["session"]]
        return {"grads": {k: (_enc(s["grads"][k]) if k in s["grads"] else None)
                          for k in s["params"]}}

    def train_params(self, p):
        return {"params": {k: _enc(v) for k, v in self.sessions[p["session"]]["params"].items()}}

    def train_zero_grad(self, p):
        self.sessions[p["session"]]["grads"] = {}
        return {}

    def train_clip_grad_norm(self, p):
        s = self.sessions[p["session"]]
        max_norm = decode_scalar(p["max_norm"], "max_norm")
        if not max_norm >= 0 and not self.o.unchecked_clip:
            raise ValueError(f"max_norm must be a non-negative number, got {p['max_norm']!r}")
        total = float(np.sqrt(sum(np.sum(g * g) for g in s["grads"].values())))
        if np.isfinite(total) and total > max_norm:
            s["grads"] = {k: g * (max_norm / total) for k, g in s["grads"].items()}
        return {"total_norm": encode_scalar(total)}

    def train_step(self, p):
        s = self.sessions[p["session"]]
        for k, g in s["grads"].items():
            s["params"][k] = s["params"][k] - p["lr"] * g
        return {}

    def train_close(self, p):
        self.sessions.pop(p["session"], None)
        return {}

    # -- protocol
    def hello(self, p):
        if self.o.refuse_version or p.get("protocol") != VERSION:
            raise VersionMismatch(f"this child speaks protocol {VERSION} only")
        return {"protocol": self.o.protocol, "engine": "numpy-child",
                "engine_version": np.__version__, "devices": ["cpu"],
                "dtypes": self.o.declare_dtypes.split(","),
                "capabilities": {"vjp": True, "jvp": True, "order2": False, "training": True},
                "semantics": {"accumulation": self.o.accumulation, "stop_gradient": "stop",
                              "notes": "test child"}}

    def ops(self, p):
        return {"ops": [{"name": n, "arity": OPS[n][0].__code__.co_argcount} for n in OPS]}


class VersionMismatch(Exception):
    pass


def _fault(opts, method, counts):
    counts[method] = counts.get(method, 0) + 1
    if opts.crash_on:
        name, _, k = opts.crash_on.partition(":")
        if name == method and counts[method] >= int(k or 1):
            sys.stderr.write("numpy_child: crashing on purpose\n")
            sys.stderr.flush()
            os._exit(3)
    if opts.hang_on == method:
        time.sleep(3600)
    if opts.malformed_on == method:
        sys.stdout.write("this is not json {\n")
        sys.stdout.flush()
        return True
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", type=int, default=VERSION)
    ap.add_argument("--refuse-version", action="store_true")
    ap.add_argument("--crash-on")
    ap.add_argument("--hang-on")
    ap.add_argument("--malformed-on")
    ap.add_argument("--stop-reading-after", help="answer METHOD, then stop reading stdin")
    ap.add_argument("--noisy-evaluate", type=float, default=0.0,
                    help="add Gaussian noise of this size to every evaluate answer")
    ap.add_argument("--wrong-vjp", type=float, default=1.0)
    ap.add_argument("--accumulation", default="functional")
    ap.add_argument("--declare-dtypes", default="float64,float32")
    ap.add_argument("--unchecked-clip", action="store_true",
                    help="mutant: apply a negative or NaN max_norm instead of refusing it")
    opts = ap.parse_args()
    child = Child(opts)
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except json.JSONDecodeError as exc:
            out = {"id": None, "error": {"type": "invalid_request", "message": str(exc)}}
            print(json.dumps(out), flush=True)
            continue
        method = req.get("method", "")
        if method == "shutdown":
            print(json.dumps({"id": req["id"], "result": {}}), flush=True)
            return
        if _fault(opts, method, child.counts):
            continue
        handler = getattr(child, method.replace(".", "_"), None)
        try:
            if handler is None:
                raise NotImplementedError(f"unknown method {method!r}")
            out = {"id": req["id"], "result": handler(req.get("params", {}))}
        except VersionMismatch as exc:
            out = {"id": req["id"], "error": {"type": "version_mismatch", "message": str(exc)}}
        except NotImplementedError as exc:
            out = {"id": req["id"], "error": {"type": "unsupported", "message": str(exc)}}
        except Exception as exc:
            out = {"id": req["id"], "error": {"type": "engine_error",
                                              "message": f"{type(exc).__name__}: {exc}"}}
        print(json.dumps(out), flush=True)
        if opts.stop_reading_after == method:
            time.sleep(3600)  # never reads stdin again


if __name__ == "__main__":
    main()
