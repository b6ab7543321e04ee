"""The determinism check of the default float64 check (gradcheck/numeric/prepare.py): its
second evaluation of ``f`` at the point is the forward pass the primary reverse path
differentiated, where the adapter gives its outputs (``Backend.vjp_gives_primal``, torch);
where those differ from the first evaluation, ``f`` is evaluated once more and that decides.

Mutants (a nondeterministic ``f``) are never passed; their twins (the same ``f`` without the
noise, an ``f`` whose taped forward differs from its ``no_grad`` one by a constant) pass."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.backends.base import Gradients
from gradcheck.core.errors import NothingDecided
from gradcheck.core.results import Status

torch = pytest.importorskip("torch")

from gradcheck.engines.torch.backend import TorchBackend  # noqa: E402

X = np.random.default_rng(0).normal(size=(3, 4))


# a fresh torch adapter evaluates f once at a point more, the first time it vmaps it, to
# verify the batching (TorchBackend._check_vmap_row)
_VMAP_CHECK = 1


class _Counting(TorchBackend):
    """The torch adapter, counting the evaluations of ``f`` at one point (``evaluate``)."""

    def __init__(self) -> None:
        super().__init__()
        self.at_point = 0

    def evaluate(self, fn, args, device):
        self.at_point += 1
        return super().evaluate(fn, args, device)


def _cube(x):
    return x ** 3


def _noisy(x):
    return x ** 3 + 1e-2 * torch.randn_like(x)


def _shifted_under_the_tape(x):
    """``x^3``, plus a constant only while autograd records (the taped forward): the same
    derivative, but the reverse path's forward is not the ``no_grad`` evaluation."""
    return x ** 3 + (1e-3 if torch.is_grad_enabled() else 0.0)


@pytest.mark.parametrize("order", [1, 2])
def test_a_nondeterministic_function_ends_the_default_check_inconclusive(order):
    """The mutant: one inconclusive result saying so, nothing compared, nothing else run
    (no order 2, no per-component check)."""
    rep = gradcheck.check(_noisy, X, backend="torch", order=order)
    assert [(r.kind, r.status) for r in rep.results] == [("call", Status.INCONCLUSIVE)]
    (r,) = rep.results
    assert "nondeterministic" in r.message and r.details["nondeterministic"] > 1e-4
    with pytest.raises(NothingDecided):
        gradcheck.assert_gradients(_noisy, X, backend="torch")


def test_its_deterministic_twin_passes_with_one_evaluation_at_the_point():
    be = _Counting()
    rep = gradcheck.check(_cube, X, backend=be)
    assert rep.passed and not any("nondeterministic" in r.details for r in rep.results)
    assert sorted(r.kind for r in rep.results) == ["eager_func", "fwd_rev", "jvp", "vjp"]
    assert be.at_point == 1 + _VMAP_CHECK  # the second: the reverse path's forward pass


def test_a_taped_forward_that_differs_is_judged_by_one_more_evaluation():
    """Where the reverse path's forward pass differs from the first evaluation, the check
    does not call ``f`` nondeterministic on that: it evaluates ``f`` again as before, and two
    equal ``no_grad`` evaluations make it deterministic."""
    be = _Counting()
    rep = gradcheck.check(_shifted_under_the_tape, X, backend=be)
    assert rep.passed, rep.summary()
    assert not any("nondeterministic" in r.details for r in rep.results)
    assert be.at_point == 2 + _VMAP_CHECK


def test_without_a_reverse_mode_the_second_evaluation_is_made_at_once():
    be = _Counting()
    rep = gradcheck.check(_cube, X, backend=be, modes=("fwd",))
    assert rep.passed and be.at_point == 2 + _VMAP_CHECK
    noisy = gradcheck.check(_noisy, X, backend="torch", modes=("fwd",))
    assert [(r.kind, r.status) for r in noisy.results] == [("call", Status.INCONCLUSIVE)]


class _WrongPrimal(_Counting):
    """An adapter whose ``Gradients.primal`` has the wrong number of outputs."""

    def vjp_batch(self, fn, args, diff, cotangents, device, vectorize=False):
        got = super().vjp_batch(fn, args, diff, cotangents, device, vectorize)
        return Gradients.of(list(got), [])


def test_outputs_an_adapter_gives_wrongly_are_not_read():
    be = _WrongPrimal()
    rep = gradcheck.check(_cube, X, backend=be)
    assert rep.passed and be.at_point == 2 + _VMAP_CHECK


def test_a_nondeterministic_function_is_caught_where_finite_differences_raise():
    """The screen's finite differences raise before the reverse path runs: the determinism
    check is made then, before the full check."""

    def f(x):
        if float(torch.max(torch.abs(x - x0))) > 0:  # every point but x itself
            raise ValueError("outside the domain")
        return x ** 3 + 1e-2 * torch.randn_like(x)

    x0 = torch.as_tensor(X)
    rep = gradcheck.check(f, X, backend="torch")
    assert [(r.kind, r.status) for r in rep.results] == [("call", Status.INCONCLUSIVE)]
    assert "nondeterministic" in rep.results[0].details


def test_the_jax_adapter_gives_its_forward_pass_too():
    jnp = pytest.importorskip("jax.numpy")
    from gradcheck.engines.jax.backend import JaxBackend

    class Counting(JaxBackend):
        at_point = 0

        def evaluate(self, fn, args, device):
            Counting.at_point += 1
            return super().evaluate(fn, args, device)

    rep = gradcheck.check(lambda x: jnp.tanh(x) * 2 + jnp.sin(x), X, backend=Counting())
    assert rep.passed and Counting.at_point == 1


def test_a_deferred_determinism_check_is_made_where_the_screen_does_not_run(monkeypatch):
    """A safeguard: preparation defers the check only where the screen runs; were the screen
    not to run, the full check makes it first (the mutant), and passes the twin."""
    from gradcheck.numeric import screen

    monkeypatch.setattr(screen, "applies", lambda prep: False)
    rep = gradcheck.check(_noisy, X, backend="torch")
    assert [(r.kind, r.status) for r in rep.results] == [("call", Status.INCONCLUSIVE)]
    assert gradcheck.check(_cube, X, backend="torch").passed
