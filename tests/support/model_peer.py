"""A reference peer of the model protocol (``docs/protocol-model.md``): the library side, in
Python, for a small NumPy MLP with hand-derived gradients (float64 and float32 builds), its
training step (SGD or AdamW, a global-norm clip knob, a logged norm) and the mutants that are
real user bugs.  Run as a program::

    python tests/support/model_peer.py --variant NAME [--optimizer sgd|adamw] [--size N]

With ``GRADCHECK_PROTOCOL=model`` it answers on its stdin/stdout (what ``gradcheck model
--command`` starts); without, it starts ``python -m gradcheck model --peer-stdio`` itself, the
way the Rust and Go libraries do, and exits with its code.

Variants: ``correct``; flow / gradient mutants ``absent_grad`` (the first layer's output goes
through host memory: fc1.* absent from the store), ``zero_grad`` (fc1.* present but zero),
``wrong_grad`` (fc2.weight's gradient sign-flipped), ``unregistered`` (a scale vector the loss
uses outside the registry), ``nondeterministic`` (dropout from an unseeded generator); step
mutants ``double_backward``, ``two_pass_clip_accumulating``, ``no_clip``, ``clip_twice``,
``swapped_names``, ``norm_from_loss``, ``stale_grads``, ``sgd_twice``; ``big`` (``--size``
parameters in 4 tensors, a cheap elementwise loss; ``--wrong-element``, ``--dense-norm``,
``--factor`` seed the benchmark's mutants); transport mutants ``f32_only`` (the builder refuses
float64), ``crash_on_line``, ``hang_on_grads``, ``garbage_on_loss``, ``not_model``,
``prints`` (the user's code prints on stdout), ``refuses_empty_t`` (a ``model.line`` without
``t`` is an error); ``partial_cut`` (rows 0..3 of fc2.weight, half its elements, read through
host memory: their gradient is exactly zero) and its look-alike ``dense_half`` (fc2.weight's
whole gradient halved); library mutants ``dir_sign`` (the generator's sign flipped at element 5
of fc2.weight), ``dir_scope`` (every scope starts one element late), ``grads_array_off``
(model.grads' arrays scaled by 1.5, the line projections right), ``terms_off`` (abs_terms
100x too large: every allowance 100x too loose).  ``--sleep-forward S`` sleeps
``S`` seconds per forward (a slow model).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from gradcheck.backends.wire import encode_array  # noqa: E402
from gradcheck.model_audit import directions  # noqa: E402

STEP_MUTANTS = ("double_backward", "two_pass_clip_accumulating", "no_clip", "clip_twice",
                "swapped_names", "norm_from_loss", "stale_grads", "sgd_twice")
FLOW_MUTANTS = ("absent_grad", "zero_grad", "wrong_grad", "unregistered", "nondeterministic",
                "partial_cut", "dense_half")
#: library mutants: the direction generator or the gradient extraction off (the losses and the
#: projection both use the wrong direction, so FD agrees with it)
LIBRARY_MUTANTS = ("dir_sign", "dir_scope", "grads_array_off", "terms_off")
TRANSPORT = ("f32_only", "crash_on_line", "hang_on_grads", "garbage_on_loss", "not_model",
             "prints", "refuses_empty_t")
VARIANTS = ("correct", "big", *FLOW_MUTANTS, *STEP_MUTANTS, *TRANSPORT, *LIBRARY_MUTANTS)


class Unsupported(Exception):
    pass


# -- the user's model ---------------------------------------------------------------------------

class MLP:
    """x (16 x 4) -> tanh(fc1) -> tanh(fc2) -> fc3 -> softmax cross-entropy over 3 classes."""

    SHAPES = {"fc1.weight": (8, 4), "fc1.bias": (8,), "fc2.weight": (8, 8), "fc2.bias": (8,),
              "fc3.weight": (3, 8), "fc3.bias": (3,)}

    def __init__(self, variant: str) -> None:
        self.variant = variant
        rng = np.random.default_rng(1234)
        self.init = {k: rng.standard_normal(s) * (0.5 if "weight" in k else 0.1)
                     for k, s in self.SHAPES.items()}
        self.x = rng.standard_normal((16, 4))
        self.y = rng.integers(0, 3, 16)
        self.scale = 1.0 + 0.5 * rng.standard_normal(8)  # the unregistered variant's Var
        self.noise = np.random.default_rng()  # unseeded: the nondeterministic variant's dropout

    def loss_and_grads(self, p: dict[str, np.ndarray], dt: Any, want: bool = True
                       ) -> tuple[float, dict[str, np.ndarray | None]]:
        x = self.x.astype(dt)
        a1 = x @ p["fc1.weight"].T + p["fc1.bias"]
        h1 = np.tanh(a1)
        if self.variant == "unregistered":
            h1 = h1 * self.scale.astype(dt)
        if self.variant == "nondeterministic":
            h1 = h1 * (self.noise.random(h1.shape) > 0.1).astype(dt) / dt(0.9)
        a2 = h1 @ p["fc2.weight"].T + p["fc2.bias"]
        h2 = np.tanh(a2)
        z = h2 @ p["fc3.weight"].T + p["fc3.bias"]
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        prob = e / e.sum(axis=1, keepdims=True)
        n = len(x)
        loss = float(-np.mean(np.log(prob[np.arange(n), self.y])))
        if not want:
            return loss, {}
        dz = prob.copy()
        dz[np.arange(n), self.y] -= 1
        dz /= n
        g: dict[str, np.ndarray | None] = {"fc3.weight": dz.T @ h2, "fc3.bias": dz.sum(axis=0)}
        da2 = (dz @ p["fc3.weight"]) * (1 - h2 * h2)
        g["fc2.weight"] = da2.T @ h1
        g["fc2.bias"] = da2.sum(axis=0)
        dh1 = da2 @ p["fc2.weight"]
        if self.variant == "unregistered":
            dh1 = dh1 * self.scale.astype(dt)
        da1 = dh1 * (1 - np.tanh(a1) ** 2)
        g["fc1.weight"] = da1.T @ x
        g["fc1.bias"] = da1.sum(axis=0)
        if self.variant == "absent_grad":  # h1.to_vec1() then Tensor::new: fc1.* cut
            g["fc1.weight"] = g["fc1.bias"] = None
        elif self.variant == "zero_grad":
            g["fc1.weight"] = np.zeros_like(p["fc1.weight"])
            g["fc1.bias"] = np.zeros_like(p["fc1.bias"])
        elif self.variant == "wrong_grad":
            g["fc2.weight"] = -g["fc2.weight"]
        elif self.variant == "partial_cut":  # W2[:4] via to_vec2 then Tensor::new: a constant
            g["fc2.weight"] = np.concatenate([np.zeros((4, 8)), g["fc2.weight"][4:]])
        elif self.variant == "dense_half":
            g["fc2.weight"] = 0.5 * g["fc2.weight"]
        return loss, {k: (None if v is None else np.asarray(v, dtype=dt)) for k, v in g.items()}


class Big:
    """``size`` parameters in 4 tensors, ``L = sum c_j log cosh(w_j) + (sum b_j w_j)^2 / 2``
    (O(n) per forward), with the benchmark's seeded gradient mutants."""

    def __init__(self, size: int, args: argparse.Namespace) -> None:
        self.variant = "big"
        part = max(1, size // 4)
        self.SHAPES = {f"layer.{i}.weight": (part,) for i in range(4)}
        rng = np.random.default_rng(99)
        self.init = {k: rng.standard_normal(s) * 0.3 for k, s in self.SHAPES.items()}
        self.c = {k: rng.random(s) + 0.5 for k, s in self.SHAPES.items()}
        self.b = {k: rng.standard_normal(s) / math.sqrt(size) for k, s in self.SHAPES.items()}
        self.args = args

    def loss_and_grads(self, p: dict[str, np.ndarray], dt: Any, want: bool = True
                       ) -> tuple[float, dict[str, np.ndarray | None]]:
        s = sum(float(np.dot(self.b[k].astype(dt), p[k])) for k in p)
        lc = {k: np.logaddexp(p[k], -p[k]) - dt(math.log(2)) for k in p}
        loss = float(sum(float(np.dot(self.c[k].astype(dt), lc[k])) for k in p) + 0.5 * s * s)
        if not want:
            return loss, {}
        g: dict[str, np.ndarray | None] = {
            k: (self.c[k].astype(dt) * np.tanh(p[k]) + dt(s) * self.b[k].astype(dt))
            for k in p}
        a = self.args
        if a.factor != 1.0:
            g["layer.1.weight"] = g["layer.1.weight"] * dt(a.factor)  # type: ignore[operator]
        if a.wrong_element >= 0:
            w = np.array(g["layer.0.weight"])
            w[a.wrong_element] += dt(a.wrong_delta)
            g["layer.0.weight"] = w
        if a.dense_norm > 0:
            w = np.array(g["layer.2.weight"])
            e = np.random.default_rng(a.dense_seed).standard_normal(w.size)
            w += (e * (a.dense_norm / np.linalg.norm(e))).astype(dt)
            g["layer.2.weight"] = w
        return loss, g


# -- the library side ---------------------------------------------------------------------------

DT = {"float64": np.float64, "float32": np.float32}


class Peer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.variant = args.variant
        self.model: Any = Big(args.size, args) if args.variant == "big" else MLP(args.variant)
        self.names = list(self.model.SHAPES)
        # the first build is float32: its values are theta0 for every build
        self.theta0 = {k: v.astype(np.float32).astype(np.float64)
                       for k, v in self.model.init.items()}
        self.optimizer = args.optimizer
        self.max_norm = args.max_norm
        self.verdicts: dict[str, Any] | None = None

    def _dtypes(self) -> list[str]:
        return ["float64", "float32"]  # f32_only's builder refuses float64 when it builds

    def build(self, dtype: str) -> dict[str, np.ndarray]:
        if dtype not in DT:
            raise Unsupported(f"unknown dtype {dtype!r}")
        if self.variant == "f32_only" and dtype == "float64":
            raise Unsupported(f"unsupported dtype for rmsnorm F64 (the builder refused {dtype})")
        return {k: v.astype(DT[dtype]) for k, v in self.theta0.items()}

    # the methods
    def hello(self, _: dict) -> dict:
        return {"protocol": 1, "kind": "ops" if self.variant == "not_model" else "model",
                "engine": "numpy-reference", "engine_version": np.__version__,
                "library": "tests/support/model_peer.py", "library_version": "0",
                "model": f"mlp[{self.variant}]", "dtypes": self._dtypes(), "devices": ["cpu"],
                "capabilities": {"step": True}, "semantics": {"accumulation": "functional"}}

    def describe(self, q: dict) -> dict:
        p = self.build(q["dtype"])
        tensors = [{"name": k, "shape": list(v.shape), "dtype": q["dtype"],
                    "rms": float(np.sqrt(np.mean(v.astype(np.float64) ** 2))),
                    "max_abs": float(np.max(np.abs(v)))} for k, v in p.items()]
        unreg = ([{"shape": [8], "what": "a Var the loss reaches that is not in the VarMap"}]
                 if self.variant == "unregistered" else [])
        opt: dict[str, Any] = ({"kind": "sgd", "lr": 0.1} if self.optimizer == "sgd" else
                               {"kind": "adamw", "lr": 0.01, "beta1": 0.9, "beta2": 0.999,
                                "eps": 1e-8, "weight_decay": 0.01})
        return {"tensors": tensors, "unregistered": unreg, "knobs": {"max_norm": self.max_norm},
                "clip": {"kind": "global_norm", "max_norm": self.max_norm, "knob": "max_norm"},
                "optimizer": opt, "stopped": [], "step": True}

    def forward(self) -> None:
        if self.args.sleep_forward > 0:
            time.sleep(self.args.sleep_forward)

    def loss(self, q: dict) -> dict:
        self.forward()
        p = self.build(q["dtype"])
        return {"loss": self.model.loss_and_grads(p, DT[q["dtype"]], want=False)[0]}

    def grads(self, q: dict) -> dict:
        if self.variant == "hang_on_grads":
            time.sleep(3600)
        self.forward()
        p = self.build(q["dtype"])
        loss, g = self.model.loss_and_grads(p, DT[q["dtype"]])
        out = {}
        for k in self.names:
            v = g.get(k)
            if v is None:
                out[k] = {"present": False, "sumsq": 0.0, "sumabs": 0.0, "maxabs": 0.0}
                continue
            v64 = v.astype(np.float64)
            out[k] = {"present": True, "sumsq": float(v64.ravel() @ v64.ravel()),
                      "sumabs": float(np.sum(np.abs(v64))), "maxabs": float(np.max(np.abs(v64)))}
            if q.get("arrays"):
                off = 1.5 if self.variant == "grads_array_off" else 1.0
                out[k]["array"] = encode_array(v64 * off, q["dtype"])
        return {"loss": loss, "grads": out}

    def line(self, q: dict) -> dict:
        if self.variant == "crash_on_line":
            sys.stderr.write("thread 'main' panicked at src/lib.rs:7: index out of bounds\n")
            sys.stderr.flush()
            os._exit(101)
        if self.variant == "refuses_empty_t" and not q["t"]:
            raise ValueError("t must not be empty")
        dt = DT[q["dtype"]]
        p = self.build(q["dtype"])
        self.forward()
        _, g = self.model.loss_and_grads(p, dt)
        d = q["direction"]
        sizes = {k: int(np.prod(self.model.SHAPES[k])) for k in self.names}
        u: dict[str, np.ndarray] = {}
        for s in d["scope"]:
            name = s["name"]
            if name not in sizes:
                raise ValueError(f"no tensor {name!r}")
            start = int(s.get("start", 0)) + (1 if self.variant == "dir_scope" else 0)
            v = directions.values(int(d["seed"]), name, sizes[name], start,
                                  s.get("stop"), float(s.get("scale", 1.0)))
            if self.variant == "dir_sign" and name == "fc2.weight":
                v[5] = -v[5]
            u[name] = u[name] + v if name in u else v
        proj = terms = norm2 = 0.0
        for k, v in u.items():
            gk = g.get(k)
            norm2 += float(v @ v)
            if gk is not None:
                prod = v * gk.astype(np.float64).ravel()
                proj += float(prod.sum())
                terms += float(np.abs(prod).sum())
        losses, inexact = [], 0
        for t in q["t"]:
            self.forward()
            moved = dict(p)
            for k, v in u.items():
                base = self.theta0[k].ravel()
                new = (base + float(t) * v).astype(dt)
                inexact += int(np.count_nonzero(new.astype(np.float64) - base != float(t) * v))
                moved[k] = new.reshape(self.model.SHAPES[k])
            losses.append(self.model.loss_and_grads(moved, dt, want=False)[0])
        if self.variant == "terms_off":
            terms *= 100.0
        return {"losses": losses, "projection": proj, "abs_terms": terms, "norm2": norm2,
                "inexact": inexact}

    # the training step -----------------------------------------------------------------------
    def step(self, q: dict) -> dict:
        dtype, dt = q["dtype"], DT[q["dtype"]]
        params = self.build(dtype)
        knobs = {"max_norm": self.max_norm, **(q.get("knobs") or {})}
        max_norm = float(knobs["max_norm"])
        k_s = int(q.get("sample", 64))
        experiment = q.get("experiment", "run")
        calls = 2 if experiment == "repeat" else int(q.get("steps", 1))
        state: dict[str, Any] = {"t": 0, "m": {}, "v": {}, "store": {}}
        records = []
        for c in range(calls):
            if experiment == "repeat" and c == 1:
                for k in params:
                    params[k] = self.theta0[k].astype(dt)
            self.forward()  # the fresh gradient, then the user's step (its own forward)
            self.forward()
            _, g = self.model.loss_and_grads(params, dt)
            before = {k: v.copy() for k, v in params.items()}
            logged, applied = self._user_step(params, state, dt, max_norm)
            tensors = {}
            for k in self.names:
                gk = np.zeros(params[k].size) if g.get(k) is None else \
                    g[k].astype(np.float64).ravel()  # type: ignore[union-attr]
                ak = applied.get(k)
                a64 = None if ak is None else ak.astype(np.float64).ravel()
                delta = params[k].astype(np.float64).ravel() - before[k].astype(np.float64).ravel()
                rec: dict[str, Any] = {
                    "grad_sumsq": float(gk @ gk), "applied_present": a64 is not None,
                    "applied_sumsq": 0.0 if a64 is None else float(a64 @ a64),
                    "applied_dot_grad": 0.0 if a64 is None else float(a64 @ gk),
                    "delta_sumsq": float(delta @ delta), "delta_dot_grad": float(delta @ gk),
                    "delta_dot_applied": 0.0 if a64 is None else float(delta @ a64)}
                n = gk.size
                idx = directions.sample_indices(n, k_s) if n > k_s else None

                def pick(a: np.ndarray, idx: np.ndarray | None = idx) -> np.ndarray:
                    return a if idx is None else a[idx]
                if idx is not None:
                    rec["index"] = [int(i) for i in idx]
                rec["theta"] = encode_array(pick(before[k].astype(np.float64).ravel()), dtype)
                rec["grad"] = encode_array(pick(gk), dtype)
                if a64 is not None:
                    rec["applied"] = encode_array(pick(a64), dtype)
                rec["delta"] = encode_array(pick(delta), dtype)
                tensors[k] = rec
            records.append({"logged": logged, "tensors": tensors})
        return {"steps": records}

    def _user_step(self, params: dict[str, np.ndarray], st: dict[str, Any], dt: Any,
                   max_norm: float) -> tuple[dict, dict[str, np.ndarray | None]]:
        """The user's training step: backward into an accumulating store, clip by global norm,
        log the norm, optimizer step; the mutants are the user's bugs."""
        v = self.variant
        loss, g = self.model.loss_and_grads(params, dt)
        store: dict[str, np.ndarray] = st["store"]
        if v != "stale_grads":
            store.clear()
        for k, gk in g.items():
            if gk is not None:
                store[k] = store[k] + gk if k in store else gk.copy()
        if v == "double_backward":  # loss.backward() called again into the same store
            for k, gk in g.items():
                if gk is not None:
                    store[k] = store[k] + gk
        norm = math.sqrt(sum(float(np.sum(s.astype(np.float64) ** 2)) for s in store.values()))
        scale = min(1.0, max_norm / (norm + 1e-6))
        if v != "no_clip":
            for k in store:
                store[k] = store[k] * dt(scale)
        if v == "clip_twice":
            for k in store:  # clip_grad_norm_ and the optimizer's own clip: s^2
                store[k] = store[k] * dt(scale)
        if v == "two_pass_clip_accumulating":  # a second backward after the in-place clip
            for k, gk in g.items():
                if gk is not None:
                    store[k] = store[k] + gk
        logged = {"grad_norm": math.sqrt(loss) if v == "norm_from_loss" else norm,
                  "which": "pre_clip"}
        applied: dict[str, np.ndarray | None] = {k: store.get(k) for k in self.names}
        if v == "swapped_names":
            applied["fc1.bias"], applied["fc2.bias"] = applied["fc2.bias"], applied["fc1.bias"]
        for _ in range(2 if v == "sgd_twice" else 1):
            self._update(params, applied, st, dt)
        return logged, applied

    def _update(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray | None],
                st: dict[str, Any], dt: Any) -> None:
        st["t"] += 1
        if self.optimizer == "sgd":
            for k, gk in grads.items():
                if gk is not None:
                    params[k] = params[k] - dt(0.1) * gk
            return
        lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-8, 0.01
        t = st["t"]
        for k, gk in grads.items():
            if gk is None:
                continue
            params[k] = params[k] * dt(1 - lr * wd)
            m = st["m"].get(k, np.zeros_like(gk)) * dt(b1) + dt(1 - b1) * gk
            vv = st["v"].get(k, np.zeros_like(gk)) * dt(b2) + dt(1 - b2) * gk * gk
            st["m"][k], st["v"][k] = m, vv
            mh = m / dt(1 - b1 ** t)
            vh = vv / dt(1 - b2 ** t)
            params[k] = params[k] - dt(lr) * mh / (np.sqrt(vh) + dt(eps))

    def done(self, q: dict) -> dict:
        self.verdicts = q
        if self.args.done_file:  # what a library turns into test cases, for the tests
            with open(self.args.done_file, "w") as f:
                json.dump(q, f)
        return {}


METHODS = {"hello": "hello", "model.describe": "describe", "model.loss": "loss",
           "model.grads": "grads", "model.line": "line", "model.step": "step",
           "model.done": "done"}


def serve(peer: Peer, inp: Any, out: Any) -> None:
    for line in inp:
        if not line.strip():
            continue
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        try:
            if method not in METHODS:
                raise Unsupported(f"unknown method {method!r}")
            answer: dict[str, Any] = {"id": rid,
                                      "result": getattr(peer, METHODS[method])(msg["params"])}
        except Unsupported as exc:
            answer = {"id": rid, "error": {"type": "unsupported", "message": str(exc)}}
        except Exception as exc:  # the user's code failed: an engine_error answer
            answer = {"id": rid, "error": {"type": "engine_error", "message": repr(exc)}}
        if peer.variant == "garbage_on_loss" and method == "model.loss":
            out.write("loss = 0.7\n")  # a stray print on the protocol stream
        out.write(json.dumps(answer) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default="correct", choices=VARIANTS)
    ap.add_argument("--optimizer", default="adamw", choices=("adamw", "sgd"))
    ap.add_argument("--max-norm", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--factor", type=float, default=1.0)
    ap.add_argument("--wrong-element", type=int, default=-1)
    ap.add_argument("--wrong-delta", type=float, default=0.0)
    ap.add_argument("--dense-norm", type=float, default=0.0)
    ap.add_argument("--dense-seed", type=int, default=0)
    ap.add_argument("--done-file", default="")
    ap.add_argument("--sleep-forward", type=float, default=0.0)
    args, rest = ap.parse_known_args(argv)
    peer = Peer(args)
    if os.environ.get("GRADCHECK_PROTOCOL") == "model":
        # the library's first act: the protocol keeps stdout, the user's prints go to stderr
        out = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)
        if args.variant == "prints":
            print("epoch 0: hello from the user's code")
        serve(peer, sys.stdin, out)
        return 0
    # the user's program starts the harness (cargo test / go test)
    cmd = [os.environ.get("GRADCHECK_PYTHON", sys.executable), "-m", "gradcheck", "model",
           "--peer-stdio", *os.environ.get("GRADCHECK_ARGS", "").split(), *rest]
    env = {**os.environ, "PYTHONPATH": _ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env)
    assert proc.stdout is not None and proc.stdin is not None
    try:
        serve(peer, proc.stdout, proc.stdin)
    except BrokenPipeError:
        pass
    try:
        proc.stdin.close()
    except BrokenPipeError:
        pass
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
