"""Mutant pairs for randomness and declared intent (torch): dropout, residual
nondeterminism, semi-gradient TD, gradient reversal, straight-through estimators, ties and
Polyak target updates, a ``.data`` use; each buggy version flagged, its correct twin passing."""

from __future__ import annotations

import itertools

import pytest

import gradcheck
from gradcheck import TargetUpdate, Tie, TrainStep, audit
from gradcheck.core.results import Status

torch = pytest.importorskip("torch")
nn = torch.nn

# the models and steps the examples show, audited here in mutant pairs
from examples.intent_markers import Agent as ActorTarget  # noqa: E402
from examples.intent_markers import V, td_batch  # noqa: E402
from examples.intent_markers import polyak as _polyak_step  # noqa: E402
from examples.intent_markers import q_loss as _q_loss  # noqa: E402


def _x(n=16, d=4, seed=1):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed))


def _bugs(report):
    return {r.message[1:].split("]")[0] for r in report.failures if r.message.startswith("[")}


def _ok(report):
    assert report.passed, [r.message for r in report.failures]


# -- randomness ------------------------------------------------------------------------------

# defined here, not imported from examples/randomness.py: the test asserts that the message
# names this file's line of the detach
class DropNet(nn.Module):
    def __init__(self, detach: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)
        self.detach = detach

    def forward(self, x):
        h = nn.functional.dropout(torch.tanh(self.a(x)), 0.3, training=True)
        side = h.detach() if self.detach else h  # BUG when detached: a undertrained
        return self.b(h) + self.c(side)


def test_dropout_with_detached_branch_is_flagged_and_twin_passes():
    loss = lambda m, x: (m(x) ** 2).mean()  # noqa: E731
    ok = audit(DropNet(False), loss, _x(), backend="torch")
    _ok(ok)
    assert ok.stochastic
    bad = audit(DropNet(True), loss, _x(), backend="torch")
    assert "partial stop or surrogate gradient not declared" in _bugs(bad)
    r = [r for r in bad.failures if r.name == "a.weight"][0]
    assert "Tensor.detach()" in r.message and "test_intent.py:" in r.message


def test_residual_nondeterminism_is_reported_not_passed():
    counter = itertools.count()

    def noisy(m, x):  # BUG: a private generator the audit cannot seed
        g = torch.Generator().manual_seed(next(counter))
        return ((m(x) + 0.1 * torch.randn(16, 1, generator=g)) ** 2).mean()

    model = nn.Sequential(nn.Linear(4, 1))
    bad = audit(model, noisy, _x(), backend="torch")
    assert not bad.passed and "nondeterministic under a controlled RNG" in _bugs(bad)
    assert all(p.gradient_check is not Status.PASSED for p in bad.parameters)
    seeded = lambda m, x: ((m(x) + 0.1 * torch.randn(16, 1)) ** 2).mean()  # noqa: E731
    _ok(audit(model, seeded, _x(), backend="torch"))


# -- semi-gradient TD: a detach on one path of a parameter that trains through another ----

# the loss is defined here, not imported from examples/intent_markers.py (the model and the
# batch are): a test asserts that the message names this file's line of the declaration
def _td(declare: bool, detach: bool):
    def loss(v, batch):
        s, r, s2 = batch
        nxt = v(s2)
        target = r + 0.9 * (nxt.detach() if detach else nxt)
        if declare:
            target = gradcheck.stopped(target, "bootstrap target")
        return ((v(s) - target) ** 2).mean()
    return loss


def test_semi_gradient_td_declared_passes():
    report = audit(V(), _td(True, True), td_batch(), backend="torch")
    _ok(report)
    assert report.declarations and "bootstrap target" in report.declarations[0]


def test_semi_gradient_td_undeclared_detach_is_flagged():
    report = audit(V(), _td(False, True), td_batch(), backend="torch")
    assert "partial stop or surrogate gradient not declared" in _bugs(report)


def test_declared_stop_that_does_not_happen_is_flagged():
    report = audit(V(), _td(True, False), td_batch(), backend="torch")
    assert "declared stop that does not happen" in _bugs(report)
    r = [r for r in report.failures if r.name.startswith("intent.stopped")][0]
    assert "test_intent.py:" in r.message


# -- surrogate gradients ---------------------------------------------------------------------

class _Identity(torch.autograd.Function):
    """Identity forward; backward by ``mode``: "reverse" (-g), "clip" (g clamped to 0.02), or
    "plain" (g: a reversal or clip that was forgotten)."""

    @staticmethod
    def forward(ctx, x, mode):
        ctx.mode = mode
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        out = {"reverse": -g, "clip": g.clamp(-0.02, 0.02), "plain": g}[ctx.mode]
        return out, None


class DANN(nn.Module):
    """Domain-adversarial: the feature extractor learns against the domain head."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.feat, self.label, self.domain = nn.Linear(4, 6), nn.Linear(6, 1), nn.Linear(6, 1)


def _dann(declare: bool, negate: bool):
    def loss(m, x):
        f = torch.tanh(m.feat(x))
        r = _Identity.apply(f, "reverse" if negate else "plain")
        if declare:
            r = gradcheck.surrogate(r, gradient_of=-f, label="gradient reversal")
        return (m.label(f) ** 2).mean() + (m.domain(r) ** 2).mean()
    return loss


def test_gradient_reversal_declared_passes():
    _ok(audit(DANN(), _dann(True, True), _x(), backend="torch"))


def test_gradient_reversal_undeclared_is_flagged():
    bad = audit(DANN(), _dann(False, True), _x(), backend="torch")
    assert {r.name for r in bad.failures} >= {"feat.weight"}


def test_declared_reversal_that_does_not_reverse_is_flagged():
    bad = audit(DANN(), _dann(True, False), _x(), backend="torch")
    assert "declared stop that does not happen" in _bugs(bad)


def _ste(declare: bool):
    def loss(m, x):
        h = m[0](x)
        q = h + (torch.round(h * 4) / 4 - h).detach()  # straight-through rounding
        if declare:
            q = gradcheck.surrogate(q, gradient_of=h, label="straight-through round")
        return (m[1](q) ** 2).mean()
    return loss


def test_straight_through_estimator_pair():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 1))
    _ok(audit(model, _ste(True), _x(), backend="torch"))
    assert not audit(model, _ste(False), _x(), backend="torch").passed


# -- ties and target updates -----------------------------------------------------------------

class TwoCopies(nn.Module):
    """An autoencoder whose decoder weight is the encoder weight, kept as two parameters."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.enc = nn.Parameter(torch.randn(3, 5) * 0.5)
        self.dec = nn.Parameter(self.enc.detach().T.clone())

    def forward(self, x):
        return torch.tanh(x @ self.enc.T) @ self.dec.T


def _ae_loss(m, x):
    return ((m(x) - x) ** 2).mean()


def _tie_step(mode: str):
    def step(m, x):
        m.zero_grad()
        _ae_loss(m, x).backward()
        with torch.no_grad():
            if mode == "sum":
                m.enc.grad += m.dec.grad.T
            m.enc -= 0.1 * m.enc.grad
            if mode != "never":  # BUG "never": the copy is not re-synced
                m.dec.copy_(m.enc.T)
            else:
                m.dec -= 0.1 * m.dec.grad
    return step


def _tie_audit(mode: str, declare: bool = True):
    ties = (Tie("enc", "dec", transpose=True),) if declare else ()
    return audit(TwoCopies(), _ae_loss, _x(d=5), backend="torch",
                 train_step=TrainStep(_tie_step(mode), lr=0.1, ties=ties, steps=2))


def test_tie_synced_with_summed_gradient_passes():
    _ok(_tie_audit("sum"))


def test_tie_synced_without_summing_is_flagged():
    assert not _tie_audit("copy").passed


def test_declared_tie_never_synced_is_flagged():
    assert "declared tie not kept" in _bugs(_tie_audit("never"))


def _polyak_audit(code_tau: float, declared: float | None):
    ups = () if declared is None else (TargetUpdate("target", "online", declared),)
    return audit(ActorTarget(), _q_loss, _x(), backend="torch", stop_gradient=("target",),
                 train_step=TrainStep(_polyak_step(code_tau), lr=0.1, target_updates=ups,
                                      steps=2))


def test_polyak_update_as_declared_passes():
    _ok(_polyak_audit(0.01, 0.01))


def test_polyak_update_with_another_tau_is_flagged():
    bad = _polyak_audit(0.05, 0.01)
    assert "target update differs from the declared one" in _bugs(bad)
    assert "tau = 0.05" in " ".join(r.message for r in bad.failures)


def test_undeclared_target_update_is_flagged():
    bad = _polyak_audit(0.01, None)
    assert "target update differs from the declared one" in _bugs(bad)


# -- .data in the loss: a cut point with its file:line ---------------------------------------

def test_data_use_is_a_located_cut_point():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 1))

    def via_data(m, x):  # BUG: .data leaves the graph
        return (m[1](torch.tanh(x @ m[0].weight.data.T)) ** 2).mean()

    bad = audit(model, via_data, _x(), backend="torch")
    r = [r for r in bad.failures if r.name == "0.weight"][0]
    assert "Tensor.data" in r.message and "test_intent.py:" in r.message
    fine = lambda m, x: (m[1](torch.tanh(x @ m[0].weight.T)) ** 2).mean()  # noqa: E731
    assert audit(model, fine, _x(), backend="torch")["0.weight"].status.value == "flows"


def _clip_vjp_loss(clip: bool, declare: bool):
    def loss(m, x):
        h = _Identity.apply(torch.tanh(m[0](x)), "clip" if clip else "plain")
        if declare:
            h = gradcheck.surrogate(h, vjp=lambda g: g.clamp(-0.02, 0.02), label="clipped VJP")
        return torch.sin(3 * m[1](h)).mean()
    return loss


def test_custom_vjp_that_clips_pair():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 1))
    _ok(audit(model, _clip_vjp_loss(True, True), _x(), backend="torch"))
    bad = audit(model, _clip_vjp_loss(False, True), _x(), backend="torch")
    assert "declared stop that does not happen" in _bugs(bad)
    assert not audit(model, _clip_vjp_loss(True, False), _x(), backend="torch").passed
