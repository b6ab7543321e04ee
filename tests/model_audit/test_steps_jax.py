"""Mutant pairs on JAX: functional optimizer state threaded over steps, declared schedules,
a jit closure over the initial parameters, dropout with an explicit key, declared stops and
surrogates, micro-batches, Polyak targets, monitors on the gradient pytree, a user's clip."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import SGD, Adam, TargetUpdate, TrainStep, audit
from gradcheck.core.results import Status

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _params():
    r = np.random.default_rng(0)
    return {"w1": jnp.asarray(r.normal(size=(4, 6)) * 0.5), "b1": jnp.zeros(6),
            "w2": jnp.asarray(r.normal(size=(6,)) * 0.5)}


def _batch():
    r = np.random.default_rng(1)
    return jnp.asarray(r.normal(size=(16, 4))), jnp.asarray(r.normal(size=(16,)))


def loss(p, b):
    x, y = b
    return jnp.mean((jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] - y) ** 2)


grad = jax.jit(jax.grad(loss))


def _steps(report):
    return [r for r in report.results if r.name.startswith("train_step")]


def _ok(report, steps=True):
    assert (_steps(report) or not steps) and report.passed, [r.message for r in report.failures]


def _bad(report, bug=None):
    failed = [r for r in _steps(report) if r.status is Status.FAILED]
    assert failed, [r.message for r in report.results]
    if bug:
        assert any(r.message.startswith(f"[{bug}]") for r in failed), [r.message for r in failed]


def _momentum(thread: bool):
    def step(p, state, b):
        g = grad(p, b)
        buf = {k: g[k] if state is None else 0.9 * state[k] + g[k] for k in p}
        new = {k: p[k] - 0.05 * buf[k] for k in p}
        return new, (buf if thread else state)  # BUG when not threaded: state never advances
    return step


def test_momentum_with_threaded_state_pair():
    decl = SGD(lr=0.05, momentum=0.9)
    _ok(audit(_params(), loss, _batch(), backend="jax",
              train_step=TrainStep(_momentum(True), optimizer=decl, state=None, steps=3)))
    _bad(audit(_params(), loss, _batch(), backend="jax",
               train_step=TrainStep(_momentum(False), optimizer=decl, state=None, steps=3)))


def _adam(bias_correction: bool):
    def step(p, st, b):
        g = grad(p, b)
        t = st["t"] + 1
        m = {k: 0.9 * st["m"][k] + 0.1 * g[k] for k in p}
        v = {k: 0.999 * st["v"][k] + 0.001 * g[k] ** 2 for k in p}
        c1, c2 = (1 - 0.9 ** t, 1 - 0.999 ** t) if bias_correction else (1.0, 1.0)
        new = {k: p[k] - 1e-2 * (m[k] / c1) / (jnp.sqrt(v[k] / c2) + 1e-8) for k in p}
        return new, {"t": t, "m": m, "v": v}
    return step


def test_adam_pair():
    st = {"t": 0, "m": {k: jnp.zeros_like(v) for k, v in _params().items()},
          "v": {k: jnp.zeros_like(v) for k, v in _params().items()}}
    decl = Adam(lr=1e-2)
    _ok(audit(_params(), loss, _batch(), backend="jax",
              train_step=TrainStep(_adam(True), optimizer=decl, state=st, steps=2)))
    _bad(audit(_params(), loss, _batch(), backend="jax",
               train_step=TrainStep(_adam(False), optimizer=decl, state=st, steps=2)))


def test_jit_closure_over_initial_parameters_is_flagged():
    p0 = _params()
    stale = jax.jit(lambda b: jax.grad(loss)(p0, b))  # BUG: closes over the initial params

    def bad_step(p, b):
        g = stale(b)
        return {k: p[k] - 0.05 * g[k] for k in p}

    def good_step(p, b):
        g = grad(p, b)
        return {k: p[k] - 0.05 * g[k] for k in p}

    _ok(audit(_params(), loss, _batch(), backend="jax",
              train_step=TrainStep(good_step, lr=0.05, steps=3)))
    _bad(audit(_params(), loss, _batch(), backend="jax",
               train_step=TrainStep(bad_step, lr=0.05, steps=3)),
         "step uses state captured at an earlier step")


def test_warmup_schedule_pair():
    sched = lambda t: 0.05 * min(1.0, (t + 1) / 3)  # noqa: E731

    def make(off: int):
        def step(p, t, b):
            g = grad(p, b)
            return {k: p[k] - sched(t + off) * g[k] for k in p}, t + 1  # BUG: off by one
        return step

    _ok(audit(_params(), loss, _batch(), backend="jax",
              train_step=TrainStep(make(0), optimizer=SGD(lr=sched), state=0, steps=3)))
    _bad(audit(_params(), loss, _batch(), backend="jax",
               train_step=TrainStep(make(1), optimizer=SGD(lr=sched), state=0, steps=3)))


def test_micro_batches_pair():
    def make(divide: bool):
        def step(p, b):
            x, y = b
            g = {k: 0.0 for k in p}
            for i in range(4):
                gi = grad(p, (x[i::4], y[i::4]))
                g = {k: g[k] + gi[k] / (4 if divide else 1) for k in p}
            return {k: p[k] - 0.05 * g[k] for k in p}
        return step

    _ok(audit(_params(), loss, _batch(), backend="jax", train_step=TrainStep(make(True), lr=0.05)))
    _bad(audit(_params(), loss, _batch(), backend="jax",
               train_step=TrainStep(make(False), lr=0.05)),
         "micro-batch gradients summed, not averaged")


# -- randomness and intent in the loss --------------------------------------------------------

def _drop_loss(detach: bool):
    def f(p, b):
        x, y, key = b
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        keep = jax.random.bernoulli(key, 0.7, h.shape)
        h = jnp.where(keep, h / 0.7, 0.0)
        side = jax.lax.stop_gradient(h) if detach else h  # BUG when stopped
        return jnp.mean((h @ p["w2"] + side @ p["w2"] * 0.5 - y) ** 2)
    return f


def test_dropout_with_key_and_stopped_branch_pair():
    x, y = _batch()
    b = (x, y, jax.random.PRNGKey(0))
    _ok(audit(_params(), _drop_loss(False), b, backend="jax"), steps=False)
    bad = audit(_params(), _drop_loss(True), b, backend="jax")
    assert any(r.name == "w1" for r in bad.failures)


def _td(declare: bool):
    def f(p, b):
        s, r, s2 = b
        v = lambda z: jnp.tanh(z @ p["w1"] + p["b1"]) @ p["w2"]  # noqa: E731
        target = r + 0.9 * jax.lax.stop_gradient(v(s2))
        if declare:
            target = gradcheck.stopped(target, "TD target")
        return jnp.mean((v(s) - target) ** 2)
    return f


def test_semi_gradient_td_pair_jax():
    r = np.random.default_rng(2)
    b = tuple(jnp.asarray(a) for a in (r.normal(size=(16, 4)), r.normal(size=16),
                                       r.normal(size=(16, 4))))
    _ok(audit(_params(), _td(True), b, backend="jax"), steps=False)
    bad = audit(_params(), _td(False), b, backend="jax")
    assert any(r.message.startswith("[partial stop or surrogate gradient not declared]")
               for r in bad.failures), [r.message for r in bad.failures]


@jax.custom_vjp
def _reverse(x):
    return x


_reverse.defvjp(lambda x: (x, None), lambda _, g: (-g,))


def _dann(declare: bool):
    def f(p, x):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        r = _reverse(h)
        if declare:
            r = gradcheck.surrogate(r, gradient_of=-h, label="gradient reversal")
        return jnp.mean((h @ p["w2"]) ** 2) + jnp.mean(jnp.sin(r @ p["w2"]))
    return f


def test_gradient_reversal_pair_jax():
    x = _batch()[0]
    _ok(audit(_params(), _dann(True), x, backend="jax"), steps=False)
    assert not audit(_params(), _dann(False), x, backend="jax").passed


def _ste(declare: bool):
    def f(p, x):
        h = x @ p["w1"]
        q = h + jax.lax.stop_gradient(jnp.round(h * 4) / 4 - h)
        if declare:
            q = gradcheck.surrogate(q, gradient_of=h, label="straight-through")
        return jnp.mean((q @ p["w2"]) ** 2)
    return f


def test_straight_through_pair_jax():
    x = _batch()[0]
    p = {"w1": _params()["w1"], "w2": _params()["w2"]}
    _ok(audit(p, _ste(True), x, backend="jax"), steps=False)
    assert not audit(p, _ste(False), x, backend="jax").passed


def test_polyak_pair_jax():
    r = np.random.default_rng(3)
    w = jnp.asarray(r.normal(size=(4, 2)))
    params = {"online": {"w": w}, "target": {"w": w + 0.1}}
    x = jnp.asarray(r.normal(size=(16, 4)))

    def q_loss(p, x):
        return jnp.mean((x @ p["online"]["w"] - jax.lax.stop_gradient(x @ p["target"]["w"])
                         - 1.0) ** 2)

    def make(tau):
        def step(p, x):
            g = jax.grad(q_loss)(p, x)
            on = p["online"]["w"] - 0.1 * g["online"]["w"]
            return {"online": {"w": on}, "target": {"w": (1 - tau) * p["target"]["w"] + tau * on}}
        return step

    decl = (TargetUpdate("target", "online", 0.01),)
    _ok(audit(params, q_loss, x, backend="jax", stop_gradient=("target",),
              train_step=TrainStep(make(0.01), lr=0.1, target_updates=decl, steps=2)))
    _bad(audit(params, q_loss, x, backend="jax", stop_gradient=("target",),
               train_step=TrainStep(make(0.02), lr=0.1, target_updates=decl, steps=2)),
         "target update differs from the declared one")


def test_after_backward_monitor_pair_jax():
    good = gradcheck.AfterBackward(
        lambda g: float(jnp.sqrt(sum(jnp.sum(v ** 2) for v in jax.tree_util.tree_leaves(g)))))
    bad = gradcheck.AfterBackward(lambda g: float(jnp.sqrt(jnp.sum(g["w1"] ** 2))))
    assert audit(_params(), loss, _batch(), backend="jax", grad_norm_monitor=good).passed
    r = audit(_params(), loss, _batch(), backend="jax", grad_norm_monitor=bad)
    assert [x.name for x in r.failures] == ["grad_norm"]


def test_user_clip_function_pair_jax():
    def good(g, m):
        if not m >= 0:
            raise ValueError("max_norm must be >= 0")
        n = jnp.sqrt(sum(jnp.sum(jnp.square(v.astype(jnp.promote_types(v.dtype, jnp.float32))))
                         for v in g.values()))
        s = jnp.minimum(1.0, m / n)
        return {k: (v * s).astype(v.dtype) for k, v in g.items()}, n

    def naive(g, m):  # BUG: squares float16 in float16, applies any threshold
        n = jnp.sqrt(sum(jnp.sum(v * v) for v in g.values()))
        return {k: v * jnp.minimum(1.0, m / n) for k, v in g.items()}, n

    assert gradcheck.check_clip_function(good, backend="jax").passed
    bad = gradcheck.check_clip_function(naive, backend="jax")
    assert {"clip.threshold_validation", "clip.low_precision_norm[float16:large]"} <= {
        r.name for r in bad.failures}


@jax.custom_vjp
def _clip_grad(x):
    return x


_clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.05, 0.05),))


@jax.custom_vjp
def _unclipped(x):
    return x


_unclipped.defvjp(lambda x: (x, None), lambda _, g: (g,))  # BUG: the clip was forgotten


def _clipped_vjp(fn, declare: bool):
    def f(p, x):
        h = fn(jnp.tanh(x @ p["w1"] + p["b1"]))
        if declare:
            h = gradcheck.surrogate(h, vjp=lambda g: jnp.clip(g, -0.05, 0.05),
                                    label="gradient clip in backward")
        return jnp.mean(jnp.sin(3 * h @ p["w2"]))
    return f


def test_custom_vjp_that_clips_pair_jax():
    x = _batch()[0]
    _ok(audit(_params(), _clipped_vjp(_clip_grad, True), x, backend="jax"), steps=False)
    bad = audit(_params(), _clipped_vjp(_unclipped, True), x, backend="jax")
    assert any(r.message.startswith("[declared stop that does not happen]")
               for r in bad.failures), [r.message for r in bad.failures]
    assert not audit(_params(), _clipped_vjp(_clip_grad, False), x, backend="jax").passed


def test_user_grad_norm_and_accumulation_pairs_jax():
    def norm(g):
        return float(jnp.sqrt(sum(jnp.sum(jnp.square(v.astype(jnp.promote_types(
            v.dtype, jnp.float32)))) for v in g.values())))

    def summed_norms(g):  # BUG: sum of per-parameter norms
        return float(sum(jnp.linalg.norm(v) for v in g.values()))

    assert gradcheck.check_grad_norm_function(norm, backend="jax").passed
    assert not gradcheck.check_grad_norm_function(summed_norms, backend="jax").passed

    def mean_grad(p, loss_fn, mbs):
        gs = [jax.grad(loss_fn)(p, b) for b in mbs]
        return {k: sum(g[k] for g in gs) / len(gs) for k in p}

    def summed(p, loss_fn, mbs):  # BUG: not divided by the number of micro-batches
        gs = [jax.grad(loss_fn)(p, b) for b in mbs]
        return {k: sum(g[k] for g in gs) for k in p}

    assert gradcheck.check_accumulation_function(mean_grad, backend="jax").passed
    bad = gradcheck.check_accumulation_function(summed, backend="jax")
    assert bad.failures[0].message.startswith("[micro-batch gradients summed")


def test_jax_audit_leaves_params_and_numpy_rng_as_found():
    from tests.support.rng import rng_states, same_rng_states

    p = _params()
    before = {k: np.asarray(v).copy() for k, v in p.items()}
    np.random.seed(7)
    rng = rng_states()

    def noisy_numpy_loss(q, b):  # draws from the global NumPy RNG (seeded by the audit)
        x, y = b
        w = np.random.default_rng(np.random.randint(2 ** 31)).normal(size=y.shape)
        return jnp.mean(((jnp.tanh(x @ q["w1"] + q["b1"]) @ q["w2"]) - y) ** 2 * (1 + 0.1 * w))

    report = audit(p, noisy_numpy_loss, _batch(), backend="jax",
                   train_step=TrainStep(lambda q, b: {k: q[k] - 0.05 * grad(q, b)[k] for k in q},
                                        lr=0.05))
    assert same_rng_states(rng, rng_states())
    assert all(np.array_equal(np.asarray(p[k]), before[k]) for k in p)
    assert report["w1"].gradient_check is Status.PASSED
