"""JAX training steps over several steps: a momentum optimizer whose state is threaded, and a
gradient function that closes over the initial parameters under ``jax.jit`` (correct at step 1,
stale from step 2).  Also the user's own clip function checked through the public API.

Run ``python -m examples.jax_steps``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import gradcheck
from gradcheck import SGD, TrainStep, audit


def params():
    r = np.random.default_rng(0)
    return {"w1": jnp.asarray(r.normal(size=(4, 6)) * 0.5), "b1": jnp.zeros(6),
            "w2": jnp.asarray(r.normal(size=(6,)) * 0.5)}


def batch():
    r = np.random.default_rng(1)
    return jnp.asarray(r.normal(size=(16, 4))), jnp.asarray(r.normal(size=(16,)))


def loss(p, b):
    x, y = b
    return jnp.mean((jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] - y) ** 2)


grad = jax.jit(jax.grad(loss))


def momentum_step(p, buf, b):
    g = grad(p, b)
    buf = {k: g[k] if buf is None else 0.9 * buf[k] + g[k] for k in p}
    return {k: p[k] - 0.05 * buf[k] for k in p}, buf


P0 = params()
stale_grad = jax.jit(lambda b: jax.grad(loss)(P0, b))  # BUG: closes over the initial params


def stale_step(p, b):
    g = stale_grad(b)
    return {k: p[k] - 0.05 * g[k] for k in p}


def naive_clip(g, max_norm):  # squares float16 in float16; applies any threshold
    n = jnp.sqrt(sum(jnp.sum(v * v) for v in g.values()))
    return {k: v * jnp.minimum(1.0, max_norm / n) for k, v in g.items()}, n


def main() -> None:
    for title, step in (
            ("momentum, state threaded, 3 steps",
             TrainStep(momentum_step, optimizer=SGD(lr=0.05, momentum=0.9), state=None,
                       steps=3)),
            ("jit closure over the initial parameters, 3 steps",
             TrainStep(stale_step, lr=0.05, steps=3))):
        report = audit(params(), loss, batch(), backend="jax", train_step=step)
        print(f"== {title}: {report.summary()}")
        for r in report.failures:
            print(f"  FAILED {r.name}: {r.message[:400]}")
    report = gradcheck.check_clip_function(naive_clip, backend="jax")
    print(f"== a user's naive JAX clip: {report.summary()}")
    for r in report.failures:
        print(f"  FAILED {r.name}: {r.message[:260]}")


if __name__ == "__main__":
    main()
