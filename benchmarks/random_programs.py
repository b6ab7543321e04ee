"""Random smooth programs (elementwise ops, matmuls, broadcast biases) with hand-written rules.

Shared by ``tests/numeric/test_threshold.py`` and ``benchmarks/detection_threshold.py``.  A
:class:`Program` is data: a chain of layers applied to input 0, some of which read further
inputs (a weight matrix, a bias broadcast over rows).  It can be turned into

* a :class:`gradcheck.NumpyFunction` whose forward, VJP and JVP are written out by hand and
  computed in the dtype of the inputs (float32 in, float32 arithmetic throughout), optionally
  with the VJP scaled by ``1 + delta`` (in every dtype, or only in one) - the "custom op with a
  wrong backward";
* a plain torch or jax function (their autodiff derives the gradient).

Every elementwise op is smooth on the whole real line, so each program is smooth everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from gradcheck import NumpyFunction


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(x.dtype.type(0), x)


# name -> (forward, derivative written the way autodiff libraries do: from x and/or y = f(x))
ELEMENTWISE: dict[str, tuple[Callable, Callable]] = {
    "sin": (np.sin, lambda x, y: np.cos(x)),
    "cos": (np.cos, lambda x, y: -np.sin(x)),
    "tanh": (np.tanh, lambda x, y: 1 - y * y),
    "sigmoid": (special.expit, lambda x, y: y * (1 - y)),
    "softplus": (_softplus, lambda x, y: special.expit(x)),
    "exp": (np.exp, lambda x, y: y),
    "atan": (np.arctan, lambda x, y: 1 / (1 + x * x)),
    "square": (lambda x: x * x, lambda x, y: 2 * x),
}


MAX_INTERMEDIATE = 1e3


@dataclass(frozen=True)
class Layer:
    """``ew``: elementwise op ``name``; ``matmul``: ``h @ weight`` (a constant);
    ``matmul_input``: ``h @ inputs[arg]``; ``bias_input``: ``h + inputs[arg]`` (a row vector
    broadcast over the rows of ``h``)."""

    kind: str
    name: str = ""
    weight: np.ndarray | None = None
    arg: int = 0


@dataclass(frozen=True)
class Program:
    """A chain of layers on input 0 and the float64 sample inputs; ``seed`` regenerates it."""

    layers: tuple[Layer, ...]
    inputs: tuple[np.ndarray, ...]
    seed: int

    def describe(self) -> str:
        parts = []
        for L in self.layers:
            if L.kind == "ew":
                parts.append(L.name)
            elif L.kind == "matmul":
                parts.append(f"@W{list(L.weight.shape)}")  # type: ignore[union-attr]
            elif L.kind == "matmul_input":
                parts.append(f"@x{L.arg}")
            else:
                parts.append(f"+x{L.arg}")
        shapes = ", ".join(str(list(a.shape)) for a in self.inputs)
        return f"seed {self.seed}: x0 -> {' -> '.join(parts)}  (inputs {shapes})"


def random_program(seed: int) -> Program:
    """A random smooth program: 1-5 layers, input shapes from 1 to ~200 elements.

    Programs with an intermediate value above ``MAX_INTERMEDIATE`` in magnitude are redrawn (from
    a derived seed): ``cos(exp(exp(3)))`` oscillates with a period of 1e-10 in ``x`` and is not a
    function float64 can differentiate numerically.
    """
    for attempt in range(100):
        prog = _draw(np.random.default_rng([seed, attempt]), seed)
        with np.errstate(all="ignore"):  # overflowing drafts are rejected just below
            trace = _forward_trace(prog, prog.inputs)
        if all(np.all(np.abs(h) <= MAX_INTERMEDIATE) for h in trace):  # False for nan
            return prog
    raise RuntimeError(f"no well-scaled program for seed {seed}")  # pragma: no cover


def _draw(rng: np.random.Generator, seed: int) -> Program:
    rows = int(rng.integers(1, 9))
    width = int(rng.integers(1, 17))
    inputs = [rng.standard_normal((rows, width)) * rng.choice([0.5, 1.0, 2.0])]
    layers: list[Layer] = []
    names = list(ELEMENTWISE)
    for _ in range(int(rng.integers(1, 6))):
        r = rng.random()
        if r < 0.55:
            layers.append(Layer("ew", name=str(rng.choice(names))))
        elif r < 0.75:
            new = int(rng.integers(1, 17))
            w = rng.standard_normal((width, new)) / np.sqrt(width)
            layers.append(Layer("matmul", weight=w))
            width = new
        elif r < 0.88:
            new = int(rng.integers(1, 17))
            inputs.append(rng.standard_normal((width, new)) / np.sqrt(width))
            layers.append(Layer("matmul_input", arg=len(inputs) - 1))
            width = new
        else:
            inputs.append(rng.standard_normal(width))
            layers.append(Layer("bias_input", arg=len(inputs) - 1))
    return Program(tuple(layers), tuple(inputs), seed)


# -- NumPy: forward, VJP and JVP by hand, in the dtype of the inputs ----------------------------


def _forward_trace(prog: Program, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Values before each layer, and the output last."""
    h = args[0]
    trace = [h]
    for L in prog.layers:
        if L.kind == "ew":
            h = ELEMENTWISE[L.name][0](h)
        elif L.kind == "matmul":
            h = h @ L.weight.astype(h.dtype)  # type: ignore[union-attr]
        elif L.kind == "matmul_input":
            h = h @ args[L.arg]
        else:
            h = h + args[L.arg]
        trace.append(h)
    return trace


def evaluate(prog: Program, args: Sequence[np.ndarray]) -> np.ndarray:
    """The program's output at ``args``."""
    return _forward_trace(prog, args)[-1]


def _vjp(prog: Program, args: Sequence[np.ndarray], g: np.ndarray) -> list[np.ndarray]:
    trace = _forward_trace(prog, args)
    grads = [np.zeros_like(a) for a in args]
    for L, x, y in reversed(list(zip(prog.layers, trace[:-1], trace[1:], strict=True))):
        if L.kind == "ew":
            g = g * ELEMENTWISE[L.name][1](x, y)
        elif L.kind == "matmul":
            g = g @ L.weight.astype(g.dtype).T  # type: ignore[union-attr]
        elif L.kind == "matmul_input":
            grads[L.arg] = grads[L.arg] + x.T @ g
            g = g @ args[L.arg].T
        else:
            grads[L.arg] = grads[L.arg] + g.sum(axis=0)
    grads[0] = grads[0] + g
    return grads


def _jvp(prog: Program, args: Sequence[np.ndarray], tangents: Sequence[np.ndarray]) -> np.ndarray:
    trace = _forward_trace(prog, args)
    t = tangents[0]
    for L, x, y in zip(prog.layers, trace[:-1], trace[1:], strict=True):
        if L.kind == "ew":
            t = t * ELEMENTWISE[L.name][1](x, y)
        elif L.kind == "matmul":
            t = t @ L.weight.astype(t.dtype)  # type: ignore[union-attr]
        elif L.kind == "matmul_input":
            t = t @ args[L.arg] + x @ tangents[L.arg]
        else:
            t = t + tangents[L.arg]
    return t


def numpy_function(prog: Program, delta: float = 0.0, only_dtype: str | None = None
                   ) -> NumpyFunction:
    """The program as a :class:`gradcheck.NumpyFunction`; its VJP is scaled by ``1 + delta``
    (only when computing in ``only_dtype``, if given)."""

    def vjp(args: Sequence[np.ndarray], cts: Sequence[np.ndarray]) -> list[np.ndarray]:
        grads = _vjp(prog, args, cts[0])
        if delta and (only_dtype is None or args[0].dtype == np.dtype(only_dtype)):
            factor = args[0].dtype.type(1 + delta)
            grads = [gr * factor for gr in grads]
        return grads

    return NumpyFunction(lambda *a: evaluate(prog, a), vjp, lambda a, t: [_jvp(prog, a, t)],
                         name=f"program_{prog.seed}")


# -- torch / jax: the same program, derivatives by the engine ---------------------------------


def _engine_ops(xp: str) -> dict[str, Callable]:
    if xp == "torch":
        import torch

        return {"sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
                "softplus": torch.nn.functional.softplus, "exp": torch.exp, "atan": torch.atan,
                "square": lambda x: x * x}
    import jax
    import jax.numpy as jnp

    return {"sin": jnp.sin, "cos": jnp.cos, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid,
            "softplus": jax.nn.softplus, "exp": jnp.exp, "atan": jnp.arctan,
            "square": lambda x: x * x}


def engine_function(prog: Program, engine: str) -> Callable[..., Any]:
    """The program written with ``engine``'s ops (``"torch"`` or ``"jax"``)."""
    ops = _engine_ops(engine)

    def fn(*args: Any) -> Any:
        h = args[0]
        for L in prog.layers:
            if L.kind == "ew":
                h = ops[L.name](h)
            elif L.kind == "matmul":
                h = h @ _const(L.weight, h, engine)
            elif L.kind == "matmul_input":
                h = h @ args[L.arg]
            else:
                h = h + args[L.arg]
        return h

    fn.__name__ = f"program_{prog.seed}"
    return fn


def _const(w: Any, like: Any, engine: str) -> Any:
    if engine == "torch":
        import torch

        return torch.as_tensor(w, dtype=like.dtype, device=like.device)
    import jax.numpy as jnp

    return jnp.asarray(w, dtype=like.dtype)


# -- scans shared by tests/numeric/test_threshold.py and benchmarks/detection_threshold.py -----


@dataclass(frozen=True)
class Scan:
    """Outcome of checking the *correct* programs of ``seeds`` in one dtype."""

    dtype: str
    cases: int
    checks: int
    not_passed: tuple[str, ...]  # "seed: message" of every check that did not pass
    max_ratio: dict[str, float]  # check kind -> largest discrepancy / allowed


def false_positive_scan(seeds: Sequence[int], dtype: str) -> Scan:
    """Check the correct (unscaled) program of every seed on the numpy backend in ``dtype``."""
    import gradcheck

    not_passed: list[str] = []
    max_ratio: dict[str, float] = {}
    checks = 0
    for seed in seeds:
        prog = random_program(seed)
        args = [a.astype(dtype) for a in prog.inputs]
        report = gradcheck.check(numpy_function(prog), *args, backend="numpy", seed=seed)
        for r in report:
            checks += 1
            if r.status is not gradcheck.Status.PASSED:
                not_passed.append(f"{prog.describe()}: {r.status.value}: {r.message}")
            if r.discrepancy_ratio is not None:
                max_ratio[r.kind] = max(max_ratio.get(r.kind, 0.0), r.discrepancy_ratio)
    return Scan(dtype, len(seeds), checks, tuple(not_passed), max_ratio)
