"""Shared pieces of the performance benchmarks: test functions, (1 + delta) mutants, timing.

Timing protocol (the machine is shared, so single measurements are noisy): every contender of
one comparison is run once to warm up, then the contenders are run in turn, ``reps`` rounds,
and each reports its *fastest* round.  Interleaving exposes every contender to the same load;
the minimum is the least disturbed run.  Ratios are only ever taken between numbers measured
in the same interleaved comparison.  torch runs on one thread for every contender.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# one XLA CPU thread, like torch below (must be set before jax is imported)
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                   "intra_op_parallelism_threads=1")

DELTAS = (1e-3, 1e-5, 1e-7)


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def interleaved(contenders: dict[str, Callable[[], object]], reps: int = 7,
                budget_s: float = 20.0, clock: str = "wall", stat: str = "min"
                ) -> dict[str, float]:
    """Fastest time (seconds) of each contender over ``reps`` interleaved rounds; stops early
    (after at least 2 rounds) once ``budget_s`` of wall time is spent.  ``clock="cpu"``
    measures this process's CPU time instead of wall time: on a shared machine it leaves out
    the time spent waiting for a core (every contender here is single-threaded).
    ``stat="median"`` reports each contender's median round instead: the typical cost,
    including the allocation and collection hiccups the fastest round avoids."""
    now = CLOCKS[clock]
    for f in contenders.values():
        f()
    times: dict[str, list[float]] = {k: [] for k in contenders}
    start = time.perf_counter()
    for r in range(reps):
        for k, f in contenders.items():
            t = now()
            f()
            times[k].append(now() - t)
        if r >= 1 and time.perf_counter() - start > budget_s:
            break
    pick = {"min": min, "median": lambda v: float(np.median(v))}[stat]
    return {k: pick(v) for k, v in times.items()}


def once(f: Callable[[], object]) -> tuple[float, object]:
    """Wall time (seconds) and result of one call."""
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


# -- the functions under test ---------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One function at one size, written for torch and for jax, with its input."""

    name: str
    n: int
    x: np.ndarray
    torch_fn: Callable
    jax_fn: Callable


def _layer_weights(n: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    k = min(n, 64)
    return rng.standard_normal((k, n)) / np.sqrt(n), rng.standard_normal(k)


def workloads(n: int, seed: int = 0) -> list[Workload]:
    """An elementwise chain (m = n), a dense layer ``tanh(W x + b)`` (m = min(n, 64)) and a
    reduction ``logsumexp`` (m = 1), each at ``n`` input elements."""
    import jax.numpy as jnp
    import torch

    x = np.random.default_rng(seed).standard_normal(n)
    W, b = _layer_weights(n)
    Wt, bt = torch.from_numpy(W), torch.from_numpy(b)
    Wj, bj = jnp.asarray(W), jnp.asarray(b)
    return [
        Workload("elementwise", n, x,
                 lambda v: torch.sin(v) * torch.exp(-v * v) + torch.tanh(v) ** 2,
                 lambda v: jnp.sin(v) * jnp.exp(-v * v) + jnp.tanh(v) ** 2),
        Workload("layer", n, x, lambda v: torch.tanh(Wt @ v + bt),
                 lambda v: jnp.tanh(Wj @ v + bj)),
        Workload("reduction", n, x, lambda v: torch.logsumexp(v, 0),
                 lambda v: jnp.log(jnp.sum(jnp.exp(v - jnp.max(v)))) + jnp.max(v)),
    ]


def sparse_workloads(n: int, seed: int = 0) -> list[Workload]:
    """Sparse Jacobians beyond the elementwise chain, for the localization benchmark: a
    three-point stencil ``x[k-1] x[k] + sin(x[k+1])`` (tridiagonal, zero padded) and a softmax
    over consecutive blocks of 10 elements (block-diagonal); ``n`` a multiple of 10."""
    import jax.numpy as jnp
    import torch

    x = np.random.default_rng(seed).standard_normal(n)

    def stencil_t(v):
        z = torch.nn.functional.pad(v, (1, 1))
        return z[:-2] * z[1:-1] + torch.sin(z[2:])

    def stencil_j(v):
        z = jnp.pad(v, 1)
        return z[:-2] * z[1:-1] + jnp.sin(z[2:])

    return [
        Workload("stencil", n, x, stencil_t, stencil_j),
        Workload("block softmax", n, x,
                 lambda v: torch.softmax(v.reshape(-1, 10), dim=1).reshape(-1),
                 lambda v: (lambda e: (e / e.sum(axis=1, keepdims=True)).reshape(-1))(
                     jnp.exp(v.reshape(-1, 10) - v.reshape(-1, 10).max(axis=1, keepdims=True)))),
    ]


# -- (1 + delta) mutants -------------------------------------------------------------------


def torch_mutant(f: Callable, delta: float) -> Callable:
    """``f`` with its backward pass scaled by ``1 + delta`` (a custom autograd.Function that
    vmap can batch, so every tool evaluates it the way it evaluates ``f``)."""
    import torch

    class ScaledBackward(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return f(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            _, pullback = torch.func.vjp(f, x)
            return pullback(g)[0] * (1 + delta)

    def mutant(x):
        return ScaledBackward.apply(x)

    mutant.__name__ = f"mutant_{delta:g}"
    return mutant


def torch_element_mutant(f: Callable, delta: float, element: int) -> Callable:
    """``f`` with its backward pass wrong at one element of the gradient, ``element`` of the
    last axis scaled by ``1 + delta`` (a boundary bug; a custom autograd.Function that vmap
    can batch)."""
    import torch

    class OneWrongElement(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return f(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            _, pullback = torch.func.vjp(f, x)
            grad = pullback(g)[0]
            at = torch.arange(grad.shape[-1], device=grad.device) == element
            return torch.where(at, grad * (1 + delta), grad)

    def mutant(x):
        return OneWrongElement.apply(x)

    mutant.__name__ = f"mutant_{delta:g}_at_{element}"
    return mutant


def jax_mutant(f: Callable, delta: float) -> Callable:
    """``f`` with its VJP scaled by ``1 + delta`` (``jax.custom_vjp``; reverse mode only)."""
    import jax

    @jax.custom_vjp
    def mutant(x):
        return f(x)

    def fwd(x):
        return f(x), x

    def bwd(x, ct):
        _, pullback = jax.vjp(f, x)
        return (pullback(ct)[0] * (1 + delta),)

    mutant.defvjp(fwd, bwd)
    return mutant


# -- verdicts of each tool -------------------------------------------------------------------


def torch_gradcheck_passes(f: Callable, x: np.ndarray, fast: bool) -> bool:
    """``torch.autograd.gradcheck`` with its defaults (slow or fast mode)."""
    import torch

    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    try:
        return bool(torch.autograd.gradcheck(f, (t,), fast_mode=fast, raise_exception=False))
    except RuntimeError:
        return False


def jax_check_grads_passes(f: Callable, x: np.ndarray, modes: tuple[str, ...]) -> bool:
    """``jax.test_util.check_grads`` at order 1 with its defaults."""
    import jax.numpy as jnp
    from jax.test_util import check_grads

    try:
        check_grads(f, (jnp.asarray(x),), order=1, modes=modes)
        return True
    except AssertionError:
        return False


def gradcheck_passes(f: Callable, x: np.ndarray, backend: str, **kw: object) -> bool:
    import gradcheck

    # no false alarm: nothing failed (an abstention is not one; Report.passed also needs a
    # decided comparison)
    return not gradcheck.check(f, x, backend=backend, **kw).failures


def catalog_parser() -> argparse.ArgumentParser:
    """The options of the benchmarks that walk the catalog (:func:`catalog_cases`):
    ``--backend`` (default torch), ``--dtype`` and ``--op`` (repeatable), ``--order``."""
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="torch")
    p.add_argument("--dtype", action="append")
    p.add_argument("--order", type=int, default=1)
    p.add_argument("--op", action="append")
    return p


def catalog_cases(backend_name: str, backend: object, ops: list[str] | None,
                  dtypes: list[str], order: int) -> Iterator[tuple[object, Callable, str, object]]:
    """``(spec, fn, dtype, case)`` for every catalog op the backend implements (``ops``: name
    globs), in each of ``dtypes`` it declares (float16 and bfloat16 where it declares float32)
    and the backend has, at its seeded sample point and its special points; order 2 only for
    ops that declare it."""
    import fnmatch

    from gradcheck.harness.runner import Case, op_function
    from gradcheck.ops import catalog

    for spec in catalog.all_specs():
        if ops and not any(fnmatch.fnmatch(spec.name, g) for g in ops):
            continue
        try:
            fn = op_function(backend_name, spec.name)
        except Exception:
            continue
        declared = set(spec.dtypes) | ({"float16", "bfloat16"} if "float32" in spec.dtypes
                                       else set())
        if order == 2 and not spec.order2:
            continue
        for dtype in dtypes:
            if dtype not in declared or dtype not in getattr(backend, "dtypes", ()):
                continue
            for point in ["random", *[sp.name for sp in spec.special]]:
                yield spec, fn, dtype, Case(backend_name, "cpu", dtype, spec.name, point)


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f}"


def setup() -> None:
    """One torch thread for every contender (the machine is shared; see module doc) and
    64-bit JAX (what gradcheck's jax adapter turns on anyway)."""
    import jax
    import torch

    torch.set_num_threads(1)
    jax.config.update("jax_enable_x64", True)
