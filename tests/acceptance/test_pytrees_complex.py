"""Issue 29 items 4 and 5, through the public API: nested inputs and outputs (pytrees) and
complex inputs and outputs, each detection claim a mutant pair (the broken function is caught
and named, its correct twin passes)."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import gradcheck
from gradcheck import GradientMismatch, InvalidArgument, Status

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
jnp = jax.numpy

RNG = np.random.default_rng(29)
W, B, X = RNG.standard_normal((3, 2)), RNG.standard_normal(2), RNG.standard_normal((4, 3))
Z = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)


def _t(a):
    return torch.tensor(a)


# -- pytrees: a wrong gradient on one leaf of a dict is caught and named by its path ------------


def _torch_scaled(at: tuple[int, int] | None):
    """``w * 1`` whose backward scales one element of the gradient by 1.01 (None: correct)."""

    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w):
            return w * 1.0

        @staticmethod
        def backward(ctx, g):
            g = g.clone()
            if at is not None:
                g[at] *= 1.01
            return g

    return Scaled.apply


def _torch_loss(at):
    scaled = _torch_scaled(at)

    def loss(params, x):
        return torch.tanh(x @ scaled(params["w"]) + params["b"]).sum()

    return loss


def test_torch_dict_params_correct_passes_and_every_result_names_the_leaf():
    params = {"w": _t(W), "b": _t(B)}
    report = gradcheck.assert_gradients(_torch_loss(None), params, _t(X), backend="torch")
    assert {r.input_path for r in report.results} == {"params['w']", "params['b']", "x"}
    assert "VJP of output 0 w.r.t. input params['w']" in {r.subject for r in report.results}


def test_torch_dict_params_wrong_leaf_gradient_is_caught_and_named_by_its_path():
    params = {"w": _t(W), "b": _t(B)}
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(_torch_loss((1, 0)), params, _t(X), backend="torch")
    text = str(info.value)
    assert "VJP of output 0 w.r.t. input params['w'] [failed]" in text
    assert "    params['w'][1, 0]: " in text  # the worst element, as the user indexes it
    failed = info.value.report.failures
    assert {r.input_path for r in failed} == {"params['w']"}


def _jax_loss(wrong: float):
    @jax.custom_vjp
    def scaled(w):
        return w

    def bwd(_, g):
        return (g.at[1, 0].multiply(wrong),)

    scaled.defvjp(lambda w: (w, None), bwd)

    def loss(params, x):
        return jnp.tanh(x @ scaled(params["w"]) + params["b"]).sum()

    return loss


def test_jax_dict_params_mutant_pair():
    params = {"w": jnp.asarray(W), "b": jnp.asarray(B)}
    gradcheck.assert_gradients(_jax_loss(1.0), params, X, backend="jax")
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(_jax_loss(1.01), params, X, backend="jax")
    assert "    params['w'][1, 0]: " in str(info.value)
    assert {r.input_path for r in info.value.report.failures} == {"params['w']"}


class Params(NamedTuple):
    w: object
    b: object


@dataclasses.dataclass
class Layer:
    w: object
    b: object
    activation: str = "tanh"


def test_lists_tuples_namedtuples_and_dataclasses_in_and_out():
    def torch_fn(layers, pair, layer):
        h = torch.tanh(layers[0] @ pair.w + pair.b)
        y = getattr(torch, layer.activation)(h @ layer.w + layer.b)
        return Params(w=y.sum(), b=[h.mean(), layers[1] * 2])

    inputs = ([_t(X), _t(B)], Params(_t(W), _t(B)), Layer(_t(RNG.standard_normal((2, 2))),
                                                          _t(B)))
    report = gradcheck.assert_gradients(torch_fn, *inputs, backend="torch", modes=("rev",))
    assert {r.input_path for r in report.results} == {
        "layers[0]", "layers[1]", "pair.w", "pair.b", "layer.w", "layer.b"}
    assert {r.path for r in report.results} == {".w", ".b[0]", ".b[1]"}

    def jax_fn(layers, pair, layer):
        h = jnp.tanh(layers[0] @ pair.w + pair.b)
        return {"y": jnp.tanh(h @ layer.w + layer.b).sum(), "h": h}

    report = gradcheck.assert_gradients(jax_fn, [X, B], Params(W, B), Layer(W[:2], B),
                                        backend="jax", modes=("rev",))
    assert {r.input_path for r in report.results} == {
        "layers[0]", "layers[1]", "pair.w", "pair.b", "layer.w", "layer.b"}


def test_wrt_chooses_the_leaves_differentiated():
    params = {"w": _t(W), "b": _t(B)}
    # the bug is in w's gradient: checking b alone does not look at it, checking w does
    report = gradcheck.assert_gradients(_torch_loss((1, 0)), params, _t(X), backend="torch",
                                        wrt="params['b']")
    assert {r.input_path for r in report.results} == {"params['b']"}
    with pytest.raises(GradientMismatch, match=r"params\['w'\]\[1, 0\]"):
        gradcheck.assert_gradients(_torch_loss((1, 0)), params, _t(X), backend="torch",
                                   wrt=["params"])
    report = gradcheck.check(_torch_loss(None), params, _t(X), backend="torch", wrt=1)
    assert {r.input_path for r in report.results} == {"x"}
    with pytest.raises(InvalidArgument, match=r"wrt=.params\[.v.\]. names no input array"):
        gradcheck.check(_torch_loss(None), params, _t(X), backend="torch", wrt="params['v']")


def test_wrt_on_plain_arrays_by_position_or_name():
    def f(x, y):
        return torch.sin(x) * y

    report = gradcheck.assert_gradients(f, _t(B), _t(B), backend="torch", wrt="y")
    assert {r.input_index for r in report.results if r.input_index is not None} == {1}


# -- complex: each engine's convention, the classic missing conj caught -------------------------


def _torch_square(conj: bool):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            ctx.save_for_backward(z)
            return z * z

        @staticmethod
        def backward(ctx, g):
            (z,) = ctx.saved_tensors
            d = 2 * z
            return g * (d.conj() if conj else d)  # torch: grad * conj(f'(z))

    return Square.apply


def test_torch_custom_function_missing_conj_is_caught_and_the_correct_one_passes():
    report = gradcheck.assert_gradients(_torch_square(conj=True), _t(Z), backend="torch")
    assert all(r.details["complex_convention"].startswith("torch (conjugate Wirtinger)")
               for r in report.results)
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(_torch_square(conj=False), _t(Z), backend="torch")
    text = str(info.value)
    assert "w.r.t. input inputs[0].imag [failed]" in text
    assert "in the convention of torch (conjugate Wirtinger)" in text.splitlines()[1]


def _torch_abs(conj: bool):
    class Abs(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            ctx.save_for_backward(z)
            return z.abs()

        @staticmethod
        def backward(ctx, g):
            (z,) = ctx.saved_tensors
            return g * (z.conj() if conj else z) / z.abs()  # torch: g * z / |z|

    return Abs.apply


def test_torch_non_holomorphic_rule_mutant_pair_and_builtins_pass():
    gradcheck.assert_gradients(_torch_abs(conj=False), _t(Z), backend="torch")
    with pytest.raises(GradientMismatch, match=r"w\.r\.t\. input inputs\[0\]\.imag"):
        gradcheck.assert_gradients(_torch_abs(conj=True), _t(Z), backend="torch")
    for fn in (torch.abs, torch.conj, torch.real, torch.imag, torch.angle, torch.exp,
               lambda z: (z * z.conj()).real.sum()):
        gradcheck.assert_gradients(fn, _t(Z), backend="torch")


def _jax_square(conj: bool):
    @jax.custom_vjp
    def square(z):
        return z * z

    def bwd(z, c):
        d = 2 * z
        return (c * (jnp.conj(d) if conj else d),)  # jax: c * f'(z), no conjugate

    square.defvjp(lambda z: (z * z, z), bwd)
    return square


def test_jax_custom_vjp_in_torch_convention_is_caught_and_the_correct_one_passes():
    report = gradcheck.assert_gradients(_jax_square(conj=False), Z, backend="jax")
    assert all(r.details["complex_convention"].startswith("jax:") for r in report.results)
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(_jax_square(conj=True), Z, backend="jax")
    assert "w.r.t. input z.imag [failed]" in str(info.value)  # named by the parameter
    assert "in the convention of jax:" in str(info.value)


def _jax_abs(conj: bool):
    @jax.custom_vjp
    def cabs(z):
        return jnp.abs(z)

    def bwd(z, c):
        return (c * (jnp.conj(z) if conj else z) / jnp.abs(z),)  # jax: c * conj(z) / |z|

    cabs.defvjp(lambda z: (jnp.abs(z), z), bwd)
    return cabs


def test_jax_non_holomorphic_rule_mutant_pair_and_builtins_pass():
    gradcheck.assert_gradients(_jax_abs(conj=True), Z, backend="jax")
    with pytest.raises(GradientMismatch, match=r"w\.r\.t\. input z\.imag"):
        gradcheck.assert_gradients(_jax_abs(conj=False), Z, backend="jax")
    for fn in (jnp.abs, jnp.conj, jnp.real, jnp.imag, jnp.angle, jnp.exp):
        gradcheck.assert_gradients(fn, Z, backend="jax")


def test_real_inputs_complex_outputs_and_complex_leaves_of_a_dict():
    for backend, exp in (("torch", torch.exp), ("jax", jnp.exp)):
        x = _t(B) if backend == "torch" else B
        report = gradcheck.assert_gradients(lambda x, exp=exp: exp(1j * x), x, backend=backend)
        assert {r.path for r in report.results} == {".real", ".imag"}

    def f(p):
        return (p["z"] * p["s"]).abs().sum()

    report = gradcheck.assert_gradients(f, {"z": _t(Z), "s": _t(B[:1])}, backend="torch")
    assert {r.input_path for r in report.results} == {"p['z'].real", "p['z'].imag", "p['s']"}


def test_order_2_and_the_fast_check_run_on_nested_complex_inputs():
    report = gradcheck.assert_gradients(lambda z: torch.exp(z) * z.conj(), _t(Z[:3]),
                                        backend="torch", order=2)
    assert {"vjp_of_vjp", "jvp_of_vjp", "jvp_of_jvp"} <= {r.kind.value for r in report.results}
    report = gradcheck.assert_gradients(lambda p: jnp.sin(p["z"]) * p["a"],
                                        {"z": Z[:3], "a": B[:1]}, backend="jax", fast=True)
    assert {r.input_path for r in report.results} == {"p['z'].real", "p['z'].imag", "p['a']"}


def test_complex64_is_checked_in_float32():
    report = gradcheck.assert_gradients(torch.exp, _t(Z.astype(np.complex64)), backend="torch")
    assert {r.dtype for r in report.results} == {"float32"}


def test_a_backend_without_a_convention_refuses_complex_inputs_saying_what_to_do():
    f = gradcheck.NumpyFunction(lambda z: z * z, lambda a, c: (c[0] * 2 * a[0],))
    with pytest.raises(InvalidArgument, match="a complex one as its .real and .imag"):
        gradcheck.check(f, Z, backend="numpy")
    assert all(r.status is not Status.ERROR for r in gradcheck.check(
        torch.exp, _t(Z), backend="torch").results)


# -- the printed reproducer rebuilds the nested and complex inputs and fails the same way ------


class _Square(torch.autograd.Function):  # the classic bug: backward without conj
    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return z * z

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * 2 * z


def _nested_complex_loss(params, layer):
    h = torch.tanh(params["x"] @ layer.w + layer.b)
    return (h.sum() * _Square.apply(params["z"]).abs()).sum()


def test_the_reproducer_of_nested_complex_inputs_runs_and_fails_the_same_way(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    params = {"x": _t(X), "z": _t(Z), "note": "not an array"}
    report = gradcheck.check(_nested_complex_loss, params, Layer(_t(W), _t(B)),
                             backend="torch", wrt="params['z']", modes=("rev",))
    failed = report.failures
    assert failed and {r.input_path for r in failed} <= {"params['z'].real", "params['z'].imag"}
    script = failed[0].reproducer
    assert "'z': (leaves[" in script and "'note': 'not an array'" in script
    assert "wrt=\"params['z']\"" in script
    path = tmp_path / "repro.py"
    path.write_text(script)
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env,
                         cwd=root, check=False)
    assert out.returncode == 1, out.stderr  # the script exits 1 while the check fails
    assert "gradient check failed" in out.stdout
    assert "w.r.t. input params['z'].imag [failed]" in out.stdout
