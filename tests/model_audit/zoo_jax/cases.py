"""JAX training steps as users write them with optax, each with a buggy twin.

A case builds ``(params, loss, batch, train_step, audit keyword arguments)`` for ``bug=False``
(the correct step, which must pass) or ``bug=True`` (its twin, which must fail with the cause
in ``Case.cause``: the bug class the failure starts with and words of the named cause).
Parameters are Flax-style nested dicts (``{"params": {"Dense_0": {"kernel", "bias"}}}``) or
Equinox-style dataclass pytrees; optimizers are optax's ``adamw``, ``sgd``, chains with
``clip_by_global_norm``, ``MultiSteps`` accumulation and ``apply_if_finite``; the declaration is
the engine-neutral ``gradcheck.SGD`` / ``AdamW`` with ``max_norm`` and schedules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from gradcheck import SGD, AdamW, TargetUpdate, TrainStep

jax = __import__("jax")
jnp = jax.numpy
optax = __import__("optax")


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[bool], tuple]
    cause: tuple[str, ...]  # (bug class, words of the named cause...)
    dtype: str = "float32"


def _arr(a: np.ndarray, dtype: str) -> Any:
    return jnp.asarray(a, dtype=dtype)


def flax_mlp(dtype: str = "float32", sizes: tuple[int, ...] = (4, 8, 1), seed: int = 0) -> dict:
    """``{"params": {"Dense_i": {"kernel": (in, out), "bias": (out,)}}}`` as Flax stores it."""
    r = np.random.default_rng(seed)
    layers = {f"Dense_{i}": {"kernel": _arr(r.normal(size=(a, b)) / np.sqrt(a), dtype),
                             "bias": _arr(r.normal(size=b) * 0.1, dtype)}
              for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True))}
    return {"params": layers}


def flax_apply(p: dict, x: Any) -> Any:
    layers = p["params"]
    n = len(layers)
    for i in range(n):
        x = x @ layers[f"Dense_{i}"]["kernel"] + layers[f"Dense_{i}"]["bias"]
        if i < n - 1:
            x = jnp.tanh(x)
    return x


def mse(p: Any, b: tuple) -> Any:
    return jnp.mean((flax_apply(p, b[0]) - b[1]) ** 2)


def batch(dtype: str = "float32", n: int = 16, d: int = 4, seed: int = 1) -> tuple:
    r = np.random.default_rng(seed)
    return _arr(r.normal(size=(n, d)), dtype), _arr(r.normal(size=(n, 1)), dtype)


def _optax_step(opt: Any, loss: Callable = mse, *, twice: bool = False,
                grad_fn: Callable | None = None) -> Callable:
    grad = grad_fn or jax.grad(loss)

    def step(p, state, b):
        g = grad(p, b)
        updates, state = opt.update(g, state, p)
        p = optax.apply_updates(p, updates)
        if twice:  # BUG: the update applied a second time
            p = optax.apply_updates(p, updates)
        return p, state
    return jax.jit(step)  # one compilation per case: eager optax ops compile one by one


# -- the cases -------------------------------------------------------------------------------

def adamw_clip(bug: bool) -> tuple:
    """``chain(clip_by_global_norm, adamw)``, jitted; twin: updates applied twice."""
    p, b = flax_mlp(), batch()
    opt = optax.chain(optax.clip_by_global_norm(0.5), optax.adamw(1e-2, weight_decay=1e-2))
    decl = AdamW(1e-2, weight_decay=1e-2)
    return p, mse, b, TrainStep(_optax_step(opt, twice=bug), optimizer=decl, max_norm=0.5,
                                state=opt.init(p), steps=3), {}


def sgd_momentum_clip(bug: bool) -> tuple:
    """``chain(clip_by_global_norm(0.3), sgd(momentum=0.9))``; twin: the clip left out of the
    chain."""
    p, b = flax_mlp(), batch()
    sgd = optax.sgd(0.05, momentum=0.9)
    opt = sgd if bug else optax.chain(optax.clip_by_global_norm(0.3), sgd)
    return p, mse, b, TrainStep(_optax_step(opt), optimizer=SGD(0.05, momentum=0.9),
                                max_norm=0.3, state=opt.init(p), steps=2), {}


def _micro_steps(opt: Any, k: int, *, extra_divide: bool = False, stale: Any = None) -> Callable:
    """One training step = ``k`` calls of a ``MultiSteps`` optimizer on ``k`` micro-batches."""
    grad = jax.grad(mse)

    def micro(carry, xy):
        p, state = carry
        g = grad(p if stale is None else stale, xy)
        if extra_divide:  # BUG: MultiSteps already averages the k gradients
            g = jax.tree_util.tree_map(lambda a: a / k, g)
        updates, state = opt.update(g, state, p)
        return (optax.apply_updates(p, updates), state), None

    def step(p, state, b):
        x, y = (a.reshape((-1, k) + a.shape[1:]).swapaxes(0, 1) for a in b)  # x[i::k]
        (p, state), _ = jax.lax.scan(micro, (p, state), (x, y))
        return p, state
    return jax.jit(step)


def multisteps_sgd_f64(bug: bool) -> tuple:
    """``MultiSteps(sgd, every_k_schedule=4)`` in float64; twin: the micro-batch loss also
    divided by K (averaged twice)."""
    p, b = flax_mlp("float64"), batch("float64")
    opt = optax.MultiSteps(optax.sgd(0.1), every_k_schedule=4, accumulator_dtype=jnp.float64)
    return p, mse, b, TrainStep(_micro_steps(opt, 4, extra_divide=bug), optimizer=SGD(0.1),
                                state=opt.init(p), steps=2), {}


def multisteps_accumulator_f64(bug: bool) -> tuple:
    """``MultiSteps(sgd, every_k_schedule=2)`` on a float64 model with a float64 accumulator;
    twin: the default ``accumulator_dtype`` (float32), which rounds the float64 gradients."""
    p, b = flax_mlp("float64"), batch("float64")
    acc = {} if bug else {"accumulator_dtype": jnp.float64}
    opt = optax.MultiSteps(optax.sgd(0.1), every_k_schedule=2, **acc)
    return p, mse, b, TrainStep(_micro_steps(opt, 2), optimizer=SGD(0.1), state=opt.init(p),
                                steps=1), {}


def multisteps_adamw(bug: bool) -> tuple:
    """``MultiSteps(adamw, every_k_schedule=8)``; twin: the micro-batch gradients taken with a
    function closing over the initial parameters (stale from step 2)."""
    p, b = flax_mlp(), batch(n=32)
    opt = optax.MultiSteps(optax.adamw(1e-2, weight_decay=1e-3), every_k_schedule=8)
    stale = p if bug else None
    return p, mse, b, TrainStep(_micro_steps(opt, 8, stale=stale),
                                optimizer=AdamW(1e-2, weight_decay=1e-3), state=opt.init(p),
                                steps=2), {}


def apply_if_finite_loss_scale(bug: bool) -> tuple:
    """Mixed-precision style: the loss scaled by 2^12, the gradient unscaled, and
    ``apply_if_finite(sgd)`` skipping overflowed steps; twin: the gradient never unscaled."""
    p, b = flax_mlp(), batch()
    opt = optax.apply_if_finite(optax.sgd(0.05), max_consecutive_errors=3)
    scale = 2.0 ** 12
    scaled = jax.grad(lambda q, bb: mse(q, bb) * scale)

    def grad_fn(q, bb):
        g = scaled(q, bb)
        return g if bug else jax.tree_util.tree_map(lambda a: a / scale, g)

    return p, mse, b, TrainStep(_optax_step(opt, grad_fn=grad_fn), optimizer=SGD(0.05),
                                state=opt.init(p), steps=2), {}


def adamw_warmup_cosine_flax(bug: bool) -> tuple:
    """A deeper Flax-style MLP, ``adamw`` with a warm-up cosine schedule (declared as the same
    schedule function); twin: the gradient from a ``jax.jit`` closure over the initial
    parameters."""
    p, b = flax_mlp(sizes=(4, 16, 8, 1)), batch()
    sched = optax.warmup_cosine_decay_schedule(0.0, 1e-2, warmup_steps=2, decay_steps=10)
    opt = optax.adamw(sched, weight_decay=1e-4)
    p0 = p
    grad_fn = jax.jit(lambda q, bb: jax.grad(mse)(p0, bb)) if bug else None
    return p, mse, b, TrainStep(_optax_step(opt, grad_fn=grad_fn),
                                optimizer=AdamW(lambda t: float(sched(t)), weight_decay=1e-4),
                                state=opt.init(p), steps=3), {}


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Linear:
    """An Equinox-style module: a dataclass pytree with its arrays as fields."""

    weight: Any
    bias: Any

    def __call__(self, x: Any) -> Any:
        return x @ self.weight.T + self.bias


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class MLP:
    layers: list

    def __call__(self, x: Any) -> Any:
        for layer in self.layers[:-1]:
            x = jnp.tanh(layer(x))
        return self.layers[-1](x)


def eqx_mlp(dtype: str = "float32") -> MLP:
    r = np.random.default_rng(3)
    return MLP([Linear(_arr(r.normal(size=(8, 4)) * 0.5, dtype), _arr(np.zeros(8), dtype)),
                Linear(_arr(r.normal(size=(1, 8)) * 0.5, dtype), _arr(np.zeros(1), dtype))])


def eqx_loss(m: MLP, b: tuple) -> Any:
    return jnp.mean((m(b[0]) - b[1]) ** 2)


def equinox_sgd(bug: bool) -> tuple:
    """An Equinox-style dataclass model with ``optax.sgd``; twin: the update applied twice
    (with momentum that would equal a doubled gradient and be named so: the update is linear
    in the gradient)."""
    m, b = eqx_mlp(), batch()
    opt = optax.sgd(0.05)
    return m, eqx_loss, b, TrainStep(_optax_step(opt, eqx_loss, twice=bug),
                                     optimizer=SGD(0.05), state=opt.init(m), steps=2), {}


def equinox_adamw_f64(bug: bool) -> tuple:
    """The Equinox-style model in float64 with ``chain(clip_by_global_norm, adamw)``; twin:
    the updates applied twice."""
    m, b = eqx_mlp("float64"), batch("float64")
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(5e-3, weight_decay=1e-2))
    return m, eqx_loss, b, TrainStep(_optax_step(opt, eqx_loss, twice=bug),
                                     optimizer=AdamW(5e-3, weight_decay=1e-2), max_norm=1.0,
                                     state=opt.init(m), steps=2), {}


def polyak_target(bug: bool) -> tuple:
    """A Q-network with a target network (``optax.incremental_update``, tau 0.01) and a
    semi-gradient TD loss; twin: tau 0.05."""
    online = flax_mlp(seed=4)
    p = {"online": online, "target": jax.tree_util.tree_map(lambda a: a + 0.05, online)}
    r = np.random.default_rng(5)
    b = tuple(_arr(a, "float32") for a in (r.normal(size=(16, 4)), r.normal(size=(16, 1)),
                                             r.normal(size=(16, 4))))

    def td(q, bb):
        s, rew, s2 = bb
        target = rew + 0.9 * jax.lax.stop_gradient(flax_apply(q["target"], s2))
        return jnp.mean((flax_apply(q["online"], s) - target) ** 2)

    opt = optax.adam(1e-2)
    tau = 0.05 if bug else 0.01

    @jax.jit
    def step(q, state, bb):
        g = jax.grad(td)(q, bb)
        updates, state = opt.update(g["online"], state, q["online"])
        new_online = optax.apply_updates(q["online"], updates)
        new_target = optax.incremental_update(new_online, q["target"], step_size=tau)
        return {"online": new_online, "target": new_target}, state

    from gradcheck import Adam
    return p, td, b, TrainStep(step, optimizer=Adam(1e-2), state=opt.init(p["online"]), steps=2,
                               target_updates=(TargetUpdate("target", "online", 0.01),)), \
        {"stop_gradient": ("target",)}


def clip_below_threshold(bug: bool) -> tuple:
    """``chain(clip_by_global_norm(10), sgd)`` where the gradient's norm is below 10 (the clip
    does nothing); twin: a hand-written "clip" that always rescales to the threshold."""
    p, b = flax_mlp(), batch()
    opt = optax.sgd(0.01)

    def normalise(g):
        n = optax.tree.norm(g)
        return jax.tree_util.tree_map(lambda a: a * 10.0 / n, g)

    grad = jax.grad(mse)

    def grad_fn(q, bb):
        return normalise(grad(q, bb)) if bug else grad(q, bb)

    inner = opt if bug else optax.chain(optax.clip_by_global_norm(10.0), opt)
    return p, mse, b, TrainStep(_optax_step(inner, grad_fn=grad_fn), optimizer=SGD(0.01),
                                max_norm=10.0, state=inner.init(p), steps=2), {}


def scan_accumulation_k16(bug: bool) -> tuple:
    """Gradient accumulation over K=16 micro-batches with ``jax.lax.scan`` and ``optax.sgd``;
    twin: the micro-batch gradients summed, not averaged."""
    p, b = flax_mlp(), batch(n=32)
    opt = optax.sgd(0.02)
    k = 16

    @jax.jit
    def step(q, state, bb):
        x, y = (a.reshape((k, -1) + a.shape[1:]) for a in bb)

        def body(acc, xy):
            g = jax.grad(mse)(q, xy)
            return jax.tree_util.tree_map(lambda a, c: a + c, acc, g), None

        zero = jax.tree_util.tree_map(jnp.zeros_like, q)
        g, _ = jax.lax.scan(body, zero, (x, y))
        if not bug:
            g = jax.tree_util.tree_map(lambda a: a / k, g)
        updates, state = opt.update(g, state, q)
        return optax.apply_updates(q, updates), state

    return p, mse, b, TrainStep(step, optimizer=SGD(0.02), state=opt.init(p), steps=2), {}


CASES = [
    Case("adamw_clip", adamw_clip, ("two optimizer updates in one step",)),
    Case("sgd_momentum_clip", sgd_momentum_clip,
         ("clip that ignores the threshold", "the clip was not applied")),
    Case("multisteps_sgd_f64", multisteps_sgd_f64,
         ("training step differs from lr x clipped gradient", "divided by 4"), "float64"),
    Case("multisteps_accumulator_f64", multisteps_accumulator_f64,
         ("float64 step computed in float32 somewhere", "accumulator"), "float64"),
    Case("multisteps_adamw_k8", multisteps_adamw,
         ("step uses state captured at an earlier step", "parameters of step 1")),
    Case("apply_if_finite_loss_scale", apply_if_finite_loss_scale,
         ("loss scale not removed from the step", "2^12")),
    Case("adamw_warmup_cosine_flax", adamw_warmup_cosine_flax,
         ("step uses state captured at an earlier step",)),
    Case("equinox_sgd", equinox_sgd, ("two optimizer updates in one step",)),
    Case("equinox_adamw_clip_f64", equinox_adamw_f64, ("two optimizer updates in one step",),
         "float64"),
    Case("polyak_target", polyak_target,
         ("target update differs from the declared one", "tau = 0.05")),
    Case("clip_below_threshold", clip_below_threshold,
         ("clip that ignores the threshold", "rescaled the gradient to norm max_norm")),
    Case("scan_accumulation_k16", scan_accumulation_k16,
         ("micro-batch gradients summed, not averaged", "16 micro-batch")),
]
