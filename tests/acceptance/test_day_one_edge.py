"""Issue 29, "day one at the user's edge": what a new user does first, through the public API
(``gradcheck.check``, ``gradcheck.assert_gradients``, the pytest plugin).  Every detection
claim is a mutant pair: the deliberately broken function is caught, its correct twin passes."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import NothingDecided, NumpyFunction, Status

torch = pytest.importorskip("torch")

X = np.array([0.3, 0.7, -1.3, 2.1])


def _scaled_exp_torch(factor: float):
    """``exp`` whose backward is ``factor`` times the true one (1.0: correct)."""

    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            y = torch.exp(t)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y * factor

    return Exp.apply


# -- item 2: one rule, a report that decided nothing is not passed ---------------------------

def test_a_check_that_decided_nothing_is_not_passed():
    f = NumpyFunction(lambda x: np.full_like(x, np.nan), lambda a, c: (np.zeros_like(a[0]),),
                      name="all_nan")
    report = gradcheck.check(f, X, backend="numpy")
    assert report.decided == [] and report.failures == []
    assert report.passed is False  # was True: inconclusive everywhere read as passed
    with pytest.raises(NothingDecided):  # the same rule
        gradcheck.assert_gradients(f, X, backend="numpy")


def test_a_check_that_decided_something_and_nothing_failed_passes():
    report = gradcheck.check(lambda t: torch.sin(t), X, backend="torch")
    assert report.passed and report.decided


# -- item 3: integer and boolean outputs are skipped with a note, float outputs checked ------

def _int_notes(report):
    return [r for r in report.results if r.status is Status.SKIPPED
            and "integer or boolean values have no derivative" in r.message]


@pytest.mark.parametrize("extra", ["argmax", "topk", "sort", "max", "mask"])
def test_torch_integer_outputs_are_skipped_and_the_float_output_checked(extra):
    def f(t):
        y = torch.softmax(t, 0)
        if extra == "argmax":
            return y, torch.argmax(t)
        if extra == "topk":
            return torch.topk(t, 2)
        if extra == "sort":
            return torch.sort(t)
        if extra == "max":
            return torch.max(t.reshape(2, 2), dim=1)
        return y, t > 0

    report = gradcheck.assert_gradients(f, X, backend="torch")
    notes = _int_notes(report)
    assert len(notes) == 1 and notes[0].output_index == 1, report.summary()
    kinds = {r.kind for r in report.decided if r.status is Status.PASSED}
    # eager vs functional and forward mode ran on the float output (an error before)
    assert {"vjp", "jvp", "eager_func", "fwd_rev"} <= {k.value for k in kinds}


@pytest.mark.parametrize("factor,caught", [(1.0, False), (1.01, True)])
def test_torch_a_wrong_float_output_next_to_an_argmax_is_caught(factor, caught):
    exp = _scaled_exp_torch(factor)
    report = gradcheck.check(lambda t: (exp(t), torch.argmax(t)), X, backend="torch")
    assert len(_int_notes(report)) == 1
    assert report.passed is not caught, report.summary()
    if caught:
        assert {r.kind.value for r in report.failures} >= {"vjp"}
        assert all(r.output_index == 0 for r in report.failures)


@pytest.mark.parametrize("factor,caught", [(1.0, False), (1.01, True)])
def test_jax_a_wrong_float_output_next_to_an_argmax_is_caught(factor, caught):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    @jax.custom_vjp
    def exp(t):
        return jnp.exp(t)

    exp.defvjp(lambda t: (jnp.exp(t), jnp.exp(t)), lambda y, g: (g * y * factor,))
    report = gradcheck.check(lambda t: (exp(t), jnp.argmax(t)), X, backend="jax",
                             modes=("rev",))
    assert len(_int_notes(report)) == 1
    assert report.passed is not caught, report.summary()
    assert not [r for r in report.results if r.status is Status.ERROR]


@pytest.mark.parametrize("factor,caught", [(1.0, False), (1.01, True)])
def test_numpy_a_wrong_float_output_next_to_an_integer_one_is_caught(factor, caught):
    f = NumpyFunction(lambda t: (np.exp(t), np.argmax(t)),
                      lambda a, c: (c[0] * np.exp(a[0]) * factor,),
                      lambda a, t: (np.exp(a[0]) * t[0], np.zeros(())), name="exp_argmax")
    report = gradcheck.check(f, X, backend="numpy")
    assert len(_int_notes(report)) == 1
    assert report.passed is not caught, report.summary()


def test_jax_integer_output_forward_mode_is_checked():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    report = gradcheck.assert_gradients(lambda t: (jax.nn.softmax(t), jnp.argmax(t)), X,
                                        backend="jax")
    assert len(_int_notes(report)) == 1
    assert any(r.kind.value == "jvp" and r.status is Status.PASSED for r in report.results)


# -- item 1: a kink among the inputs no longer masks a bug elsewhere -------------------------

K = np.array([0.0, 0.7, -1.3, 2.1])  # abs/relu kink at element 0, exactly


def _abs_torch(wrong_at: int | None):
    """``3|t| + t^2`` with a hand-written backward, 1% wrong at element ``wrong_at``."""

    class Abs(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return 3 * torch.abs(t) + t**2

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            d = 3 * torch.sign(t) + 2 * t
            if wrong_at is not None:
                d = d.clone()
                d[wrong_at] = d[wrong_at] * 1.01
            return g * d

    return Abs.apply


def _kink_results(report):
    return [r for r in report.results if r.kind.value in ("vjp", "jvp")]


@pytest.mark.parametrize("wrong_at", [None, 1, 3])
def test_torch_kink_elements_are_left_out_and_the_rest_decided(wrong_at):
    fn = _abs_torch(wrong_at)
    report = gradcheck.check(fn, K, backend="torch", modes=("rev",))
    (vjp,) = _kink_results(report)
    assert vjp.details["kink_elements"] == {"input 0": [[0]]}
    assert "1 kink element(s) of 4 left out" in vjp.message and "input 0[0]" in vjp.message
    if wrong_at is None:
        assert vjp.status is Status.PASSED and report.passed  # was: inconclusive
    else:
        assert vjp.status is Status.FAILED  # was: inconclusive, the 1% bug unnoticed
        with pytest.raises(gradcheck.GradientMismatch) as info:
            gradcheck.assert_gradients(fn, K, backend="torch", modes=("rev",))
        text = str(info.value)
        assert "1 kink element(s) of 4 left out" in text
        assert f"d output 0[{wrong_at}] / d input 0[{wrong_at}]" in text  # the bug, not the kink


@pytest.mark.parametrize("factor,caught", [(1.0, False), (1.01, True)])
def test_numpy_relu_at_zero_beside_a_wrong_rule_elsewhere(factor, caught):
    def vjp(a, c):
        d = (a[0] > 0).astype(float)
        d[2] *= factor  # element 2 (1.5) away from the kinks
        return (c[0] * d,)

    relu = NumpyFunction(lambda x: np.maximum(x, 0.0), vjp, name="relu")
    x = np.array([0.0, -2.0, 1.5, 0.0, 0.4])
    report = gradcheck.check(relu, x, backend="numpy", modes=("rev",))
    (r,) = _kink_results(report)
    assert r.details["kink_elements"] == {"input 0": [[0], [3]]}
    assert r.status is (Status.FAILED if caught else Status.PASSED), r.message


@pytest.mark.parametrize("factor,caught", [(1.0, False), (1.01, True)])
def test_torch_max_tie_is_left_out_and_both_modes_decide(factor, caught):
    x = np.array([[0.5, 0.5], [0.2, 0.7]])  # a tie in row 0

    def f(t):
        e = torch.exp(t)  # the same values; its derivative `factor` times the true one
        e = e + (factor - 1.0) * (e - e.detach())
        return torch.max(t, dim=1).values + e.sum(dim=1)

    report = gradcheck.check(f, x, backend="torch")
    kinds = {r.kind.value: r for r in _kink_results(report)}
    assert set(kinds) == {"vjp", "jvp"}
    for r in kinds.values():
        assert r.details["kink_elements"] == {"input 0": [[0, 0], [0, 1]]}
        assert r.status is (Status.FAILED if caught else Status.PASSED), r.message


def test_every_element_at_a_kink_stays_inconclusive():
    report = gradcheck.check(lambda t: torch.abs(t), np.zeros(3), backend="torch")
    assert {r.status for r in report.results} == {Status.INCONCLUSIVE}
    assert not report.passed and "not differentiable" in report.results[0].message


# -- item 6: a float32 module closed over, float64 inputs -------------------------------------

def test_a_float32_module_closed_over_names_the_two_fixes():
    torch.manual_seed(0)
    linear = torch.nn.Linear(4, 2)  # float32 parameters
    report = gradcheck.check(lambda t: linear(t), X, backend="torch")
    (r,) = report.results
    assert r.status is Status.ERROR and r.details["computes_in"] == "float32"
    assert "It runs with float32 inputs: fn computes in float32" in r.message
    assert "module.double()" in r.message and 'dtype="float32"' in r.message
    linear.double()  # the fix the message names
    assert gradcheck.check(lambda t: linear(t), X, backend="torch").passed


def test_a_function_that_raises_in_every_dtype_gets_no_dtype_hint():
    def broken(t):
        raise ValueError("boom")

    (r,) = gradcheck.check(broken, X, backend="torch").results
    assert r.status is Status.ERROR and "boom" in r.message
    assert "module.double()" not in r.message and "computes_in" not in r.details


# -- item 11: error_model= is read on every path of check / assert_gradients ------------------

def _sin(eps_rev: float = 0.0, eps_fwd: float = 0.0, eps_low: float = 0.0,
         eps_second: float = 0.0):
    """``sin`` with hand-written rules: the VJP ``1 + eps_rev`` times the true one, the JVP
    ``1 + eps_fwd`` times, the float32 VJP ``1 + eps_low`` times more, and the VJP's own
    derivative ``1 + eps_second`` times (its values right)."""

    class Sin(torch.autograd.Function):
        @staticmethod
        def forward(t):
            return torch.sin(t)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.t = inputs[0]

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            low = eps_low if t.dtype == torch.float32 else 0.0
            c = torch.cos(t)
            c = c + eps_second * (c - c.detach())
            return g * c * (1 + eps_rev) * (1 + low)

        @staticmethod
        def jvp(ctx, tt):
            return tt * torch.cos(ctx.t) * (1 + eps_fwd)

    return Sin.apply


LOOSE = gradcheck.ErrorModel(rounding_gamma=1e8)  # allows ~2e-8 of the terms


@pytest.mark.parametrize("path,fn,kw,kinds", [
    ("screen and full VJP", _sin(eps_rev=1e-9), {"modes": ("rev",)}, {"vjp"}),
    ("fast", _sin(eps_rev=1e-9), {"modes": ("rev",), "fast": True}, {"vjp"}),
    ("JVP and forward vs reverse", _sin(eps_fwd=1e-9), {}, {"jvp", "fwd_rev"}),
    ("order 2", _sin(eps_second=1e-9), {"modes": ("rev",), "order": 2}, {"vjp_of_vjp"}),
    ("float32 rounding", _sin(eps_low=1e-4), {"modes": ("rev",), "dtype": "float32"},
     {"rounding"}),
    ("kinks left out", lambda t: torch.abs(t) + _sin(eps_rev=1e-9)(t), {"modes": ("rev",)},
     {"vjp"}),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_custom_error_model_changes_the_verdict_on_each_path(path, fn, kw, kinds):
    x = K if path == "kinks left out" else X
    strict = gradcheck.check(fn, x, backend="torch", **kw)
    assert {r.kind.value for r in strict.failures} == kinds, strict.summary()
    loose = gradcheck.check(fn, x, backend="torch", error_model=LOOSE, **kw)
    assert loose.passed, [r.message for r in loose.failures]
    assert "rounding_gamma=100000000.0" in loose.results[0].reproducer
    with pytest.raises(gradcheck.GradientMismatch):
        gradcheck.assert_gradients(fn, x, backend="torch", **kw)
    gradcheck.assert_gradients(fn, x, backend="torch", error_model=LOOSE, **kw)
    if path == "kinks left out":
        assert all("kink element(s)" in r.message for r in loose.results)


# -- item 11: GRADCHECK_RESULTS beside --gradcheck-report-dir is not silently ignored --------

pytest_plugins = ["pytester"]

USER_TEST = '''
import numpy as np
import gradcheck

def test_sin():
    f = gradcheck.NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]),), name="sin")
    gradcheck.assert_gradients(f, np.linspace(0.1, 1.0, 4), backend="numpy")
'''


def test_gradcheck_results_ignored_for_a_report_dir_is_warned(pytester, monkeypatch, tmp_path):
    env_path = tmp_path / "mine.jsonl"
    monkeypatch.setenv("GRADCHECK_RESULTS", str(env_path))
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess("--gradcheck-report-dir", str(tmp_path / "rep"))
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines([f"*GRADCHECK_RESULTS={env_path} is ignored: "
                                 "--gradcheck-report-dir is given, so the results stream to*"])
    assert not env_path.exists() and (tmp_path / "rep" / "results.jsonl").exists()


def test_gradcheck_results_alone_streams_without_a_warning(pytester, monkeypatch, tmp_path):
    env_path = tmp_path / "mine.jsonl"
    monkeypatch.setenv("GRADCHECK_RESULTS", str(env_path))
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    assert "is ignored" not in result.stdout.str() and env_path.exists()


# -- item 11: check_clip_function accepts torch's own clip, still catches a wrong one ---------

def _wrong_clip(params, max_norm):
    """torch's clip with a coefficient 1% too small: clipped norms 1% under max_norm."""
    grads = [p.grad for p in params]
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    coef = torch.clamp(max_norm / (total + 1e-6) * 0.99, max=1.0)
    for g in grads:
        g.mul_(coef)
    return total


@pytest.mark.parametrize("clip,caught", [(torch.nn.utils.clip_grad_norm_, False),
                                         (_wrong_clip, True)], ids=["torch", "wrong"])
def test_check_clip_function_on_torchs_own_clip_and_a_wrong_one(clip, caught):
    report = gradcheck.check_clip_function(clip, backend="torch")
    (bound,) = [r for r in report.results if r.name == "clip.bound"]
    assert bound.status is (Status.FAILED if caught else Status.PASSED), bound.message
    if not caught:  # what was compared: torch's documented definition, epsilon included
        assert "max_norm x norm / (norm + 1e-06)" in bound.message
        assert "documented: torch.nn.utils.clip_grad_norm_" in bound.message
        # the one failure left is torch's known, documented behaviour (no max_norm validation)
        assert all(r.known for r in report.failures), [r.name for r in report.failures]


# -- item 11: torch's silent zero for forward over forward through an autograd.Function --------

def test_an_autograd_function_with_jvp_failing_order2_forward_gets_a_hint():
    fn = _sin()  # a correct rule, with a jvp staticmethod
    report = gradcheck.check(fn, X, backend="torch", order=2)
    (r,) = report.failures
    assert r.kind.value == "jvp_of_jvp" and r.actual == 0.0
    assert "torch returns zeros, without an error" in r.details["hint"] and \
        r.details["hint"] in r.message
    with pytest.raises(gradcheck.GradientMismatch) as info:
        gradcheck.assert_gradients(fn, X, backend="torch", order=2)
    assert 'modes=("rev",)' in str(info.value)  # the way out the hint names ...
    gradcheck.assert_gradients(fn, X, backend="torch", order=2, modes=("rev",))  # ... works


def test_a_wrong_second_derivative_gets_no_silent_zero_hint():
    def f(t):  # first derivative right, second derivative off by 2e-3 (forward and reverse)
        w = t - t.detach()
        return torch.sin(t) + 1e-3 * w * w

    report = gradcheck.check(f, X, backend="torch", order=2)
    bad = {r.kind.value: r for r in report.failures}
    assert "jvp_of_jvp" in bad and bad["jvp_of_jvp"].actual != 0.0
    assert all("hint" not in r.details for r in report.results)
