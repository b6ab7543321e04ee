"""The training-hooks contract on the real adapters: state, names, copies, cut points."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from gradcheck.backends.registry import get_backend
from gradcheck.backends.training import NumpyLoss, TrainingHooks

ENGINES = ["numpy", "torch", "jax"]


def _hooks(name: str, dtype: str = "float64") -> TrainingHooks:
    pytest.importorskip(name)
    return get_backend(name).training("cpu", dtype)


def _loss(hooks: TrainingHooks):
    """L = sum(w * w * x): gradient 2 w x (hand-derived for numpy)."""
    return hooks.make_loss(lambda xp, m, x: xp.sum(m["w"] * m["w"] * x),
                           grad=lambda p, x: {"w": 2.0 * p["w"] * x})


@pytest.mark.parametrize("engine", ENGINES)
def test_parameters_are_copies_and_state_is_kept(engine):
    hooks = _hooks(engine)
    w = np.array([1.0, -2.0, 0.5])
    hooks.create_parameters({"w": w})
    x = hooks.to_native(np.array([1.0, 2.0, 3.0]))
    loss = _loss(hooks)
    assert hooks.gradients() == {"w": None}
    hooks.backward(loss, x)
    np.testing.assert_allclose(hooks.gradients()["w"], 2 * w * [1, 2, 3])
    hooks.sgd_step(0.1)
    np.testing.assert_allclose(hooks.parameter_values()["w"], w - 0.2 * w * [1, 2, 3])
    np.testing.assert_array_equal(w, [1.0, -2.0, 0.5])  # the caller's array is untouched
    hooks.zero_grad()
    assert hooks.gradients()["w"] is None
    g = np.array([3.0, 4.0, 0.0])
    hooks.set_gradients({"w": g})
    assert hooks.clip_grad_norm(1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(hooks.gradients()["w"], g / 5.0, rtol=1e-6)
    np.testing.assert_array_equal(g, [3.0, 4.0, 0.0])


def test_numpy_hooks_need_a_numpy_loss():
    hooks = _hooks("numpy")
    hooks.create_parameters({"w": np.ones(2)})
    with pytest.raises(TypeError, match="NumpyLoss"):
        hooks.backward(lambda m: 0.0)
    with pytest.raises(NotImplementedError, match="no AD"):
        hooks.make_loss(lambda xp, m: 0.0)
    assert isinstance(_loss(hooks), NumpyLoss)


def test_torch_adopt_uses_named_parameters_and_attributes_cuts():
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    hooks = _hooks("torch", "float32")
    hooks.adopt(model)
    assert hooks.parameter_names() == tuple(n for n, _ in model.named_parameters())
    assert hooks.dtype == "float32"

    def loss(m, x):
        h = m[0](x)
        scale = m[1].weight.sum().item()  # a host round trip upstream of m[1].weight only
        return (m[1](h) * scale).sum()

    cuts = hooks.find_cut_points(loss, torch.ones(4, 2))
    assert len(cuts) == 1 and cuts[0].host and cuts[0].what == "host round trip: Tensor.item()"
    assert cuts[0].params == ("1.weight",)
    assert "test_training.py:" in cuts[0].where


def test_jax_adopt_uses_key_paths_and_vectorized_fd_matches_loop():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    hooks = _hooks("jax")
    tree = {"layers": [{"w": jnp.ones(2)}, {"w": jnp.full(2, 2.0)}], "b": jnp.asarray(0.5)}
    hooks.adopt(tree)
    assert hooks.parameter_names() == ("b", "layers.0.w", "layers.1.w")

    def loss(p, x):
        return jnp.sum(jnp.sin(p["layers"][0]["w"] * x) * p["layers"][1]["w"]) + p["b"]

    x = jnp.asarray([0.3, -0.7])
    rows = np.random.default_rng(0).normal(size=(5, 2))
    fast = hooks.loss_batch(loss, "layers.0.w", rows, x)
    slow = TrainingHooks.loss_batch(hooks, loss, "layers.0.w", rows, x)
    np.testing.assert_allclose(fast, slow, rtol=1e-13)
    np.testing.assert_array_equal(hooks.parameter_values()["layers.0.w"], [1.0, 1.0])


def test_jax_clip_rejects_invalid_thresholds_and_keeps_float16_norms_finite():
    hooks = _hooks("jax", "float16")
    hooks.create_parameters({"w": np.zeros(4)})
    hooks.set_gradients({"w": np.full(4, 300.0)})  # 300^2 overflows float16
    assert hooks.clip_grad_norm(1e4) == pytest.approx(600.0)
    with pytest.raises(ValueError, match="max_norm"):
        hooks.clip_grad_norm(-1.0)


def test_importing_the_semantic_modules_imports_no_engine():
    code = ("import sys, gradcheck.semantics.check, gradcheck.model_audit.flow, "
            "gradcheck.backends.training; "
            "bad = [m for m in ('torch', 'jax') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_op_protocol_hooks_are_bridged():
    pytest.importorskip("autograd")
    from gradcheck.backends.op_training import OpLoss, OpProtocolHooks, as_training_hooks

    hooks = as_training_hooks(get_backend("autograd"), "cpu", "float64")
    assert isinstance(hooks, OpProtocolHooks) and not hooks.python_losses
    hooks.create_parameters({"w": np.array([1.0, -2.0])})
    hooks.set_gradients({"w": np.array([3.0, 4.0])})  # loaded through backward("mul", ...)
    np.testing.assert_array_equal(hooks.gradients()["w"], [3.0, 4.0])
    hooks.backward(OpLoss("mul", ("w", "w"), np.ones(2)), scale=0.5)
    np.testing.assert_allclose(hooks.gradients()["w"], [1.0, -2.0])
    with pytest.raises(NotImplementedError, match="op protocol"):
        hooks.make_loss(lambda xp, m: 0.0)
    with pytest.raises(ValueError, match="max_norm"):
        hooks.clip_grad_norm(-1.0)


@pytest.mark.parametrize("engine", ENGINES)
def test_gradient_at_zeros(engine):
    """The model audit's cotangent pass: d/dz f(z) at z = 0, zeros where f ignores a base."""
    hooks = _hooks(engine)
    if engine == "numpy":
        with pytest.raises(NotImplementedError):
            hooks.gradient_at_zeros(lambda zs: 0.0, [np.zeros(2)])
        return
    xp = hooks.xp
    a, b = hooks.to_native(np.array([1.0, -2.0, 0.5])), hooks.to_native(np.ones(2))

    def f(zs):
        return xp.sum(xp.sin(a + zs[0]) * a)

    got = [np.asarray(hooks.backend.native_to_numpy(g)) for g in
           hooks.gradient_at_zeros(f, [a, b])]
    want = np.cos([1.0, -2.0, 0.5]) * [1.0, -2.0, 0.5]
    np.testing.assert_allclose(got[0], want, rtol=1e-14)
    np.testing.assert_array_equal(got[1], np.zeros(2))


@pytest.mark.parametrize("engine", ENGINES)
def test_views_inplace_loss_is_the_engines_spelling_of_one_function(engine):
    from gradcheck.semantics.fanout import _views_numpy

    hooks = _hooks(engine)
    if engine == "numpy":
        assert hooks.views_inplace_loss is None  # the fan-out probe skips it
        return
    loss = hooks.views_inplace_loss
    assert loss is hooks.views_inplace_loss  # one function: engine caches keyed on it agree
    a, x = np.array([0.3, -1.1, 0.7, 1.4]), np.array([1.2, 0.4, -0.8, 0.9])
    run = hooks.backend.user_function(loss)  # JAX: in 64-bit mode, as the hooks run it
    value = hooks.backend.native_to_numpy(run({"a": hooks.to_native(a)}, hooks.to_native(x)))
    np.testing.assert_allclose(value, _views_numpy(a, x), rtol=1e-14)
