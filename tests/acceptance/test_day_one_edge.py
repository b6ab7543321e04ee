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
