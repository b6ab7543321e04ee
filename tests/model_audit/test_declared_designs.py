"""Correct designs the audit reads from the user's torch objects, checked both ways (issue 30,
items 2 and 3): each correct step passes, each broken twin fails with its cause named.

* ``nn.Embedding(padding_idx=...)`` with pad positions in the loss: the pad row gets no
  gradient by design (read from the module); a pad row that gets one, or another row that
  gets none, is caught.
* ``torch.nn.utils.clip_grad_value_``: read from the step's call or declared as
  ``TrainStep(clip_value=)``; a clip value other than the declared one is caught.
* ``Adam(amsgrad=True)``: modelled (read from the torch optimizer or declared).
* An LR scheduler stepped twice per training step, with the torch optimizer as the declaration.
"""

from __future__ import annotations

import pytest

from gradcheck import Adam, TrainStep, audit
from gradcheck.core.errors import InvalidArgument
from gradcheck.core.results import Status

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)


def mse(m, b):
    return ((m(b[0]) - b[1]) ** 2).mean()


def _ok(report) -> None:
    assert report.passed, [r.message for r in report.failures]


def _bad(report, bug: str, *words: str) -> str:
    text = " ".join(r.message for r in report.failures)
    assert any(r.message.startswith(f"[{bug}]") for r in report.failures), text
    for w in words:
        assert w in text, (w, text)
    return text


# -- embeddings with padding ---------------------------------------------------------------

class _Tagger(nn.Module):
    """Token ids -> embedding (padding_idx=0) -> tanh -> linear, mean over positions (pads
    included: the loss sees them)."""

    def __init__(self, mode: str = "module") -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(10, 4, padding_idx=0)
        self.head = nn.Linear(4, 1)
        self.mode = mode
        if mode == "hook":  # BUG: a hand-written padding hook that also zeroes token 3
            self.emb.weight.register_hook(lambda g: g.index_fill(0, torch.tensor([0, 3]), 0.0))

    def forward(self, x):
        e = F.embedding(x, self.emb.weight) if self.mode == "no_pad" else self.emb(x)
        return self.head(torch.tanh(e)).mean(1)


_TOKENS = torch.tensor([[1, 2, 3, 0, 0], [4, 3, 5, 6, 0], [7, 8, 3, 0, 0]])


def _tag_batch():
    return _TOKENS, torch.randn(3, 1, generator=torch.Generator().manual_seed(2))


def test_padding_row_read_from_the_module_passes():
    report = audit(_Tagger(), mse, _tag_batch(), backend="torch")
    _ok(report)
    row = next(r for r in report.results if r.name == "emb.weight[0]")
    assert row.status is Status.PASSED and "padding_idx=0" in row.message
    assert report["emb.weight"].gradient_check is Status.PASSED


def test_padding_row_that_gets_a_gradient_is_caught():
    _bad(audit(_Tagger("no_pad"), mse, _tag_batch(), backend="torch"),
         "stop-gradient that leaks", "row(s) 0 of 'emb.weight'", "padding_idx=0")


def test_another_row_without_gradient_is_caught():
    _bad(audit(_Tagger("hook"), mse, _tag_batch(), backend="torch"),
         "partial stop or surrogate gradient not declared", "row(s) 3 of 'emb.weight'")


def test_rows_declared_by_name_and_checked():
    """``"name[i]"`` in stop_gradient declares rows for any model (here: padding done by hand
    with a mask, no padding_idx on the module)."""
    class Masked(_Tagger):
        def forward(self, x):
            w = self.emb.weight
            keep = torch.ones(w.shape[0], 1)
            keep[0] = 0.0
            e = F.embedding(x, w * keep + (w * (1 - keep)).detach())
            return self.head(torch.tanh(e)).mean(1)

    m = Masked()
    m.emb.padding_idx = None
    _ok(audit(m, mse, _tag_batch(), backend="torch", stop_gradient=("emb.weight[0]",)))
    plain = _Tagger("no_pad")
    plain.emb.padding_idx = None
    _bad(audit(plain, mse, _tag_batch(), backend="torch", stop_gradient=("emb.weight[0]",)),
         "stop-gradient that leaks", "declared emb.weight[0] in stop_gradient")
    with pytest.raises(InvalidArgument, match="out of range"):
        audit(m, mse, _tag_batch(), backend="torch", stop_gradient=("emb.weight[10]",))


# -- clip by value ---------------------------------------------------------------------------

def _clip_step(model, code_value: float, by_hand: bool = False):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(m, b):
        opt.zero_grad()
        mse(m, b).backward()
        if by_hand:
            for p in m.parameters():
                p.grad.clamp_(-code_value, code_value)
        else:
            torch.nn.utils.clip_grad_value_(m.parameters(), code_value)
        opt.step()
    return step


def test_clip_grad_value_read_from_the_call_passes():
    m = _net()
    report = audit(m, mse, _batch(), backend="torch",
                   train_step=TrainStep(_clip_step(m, 0.05), steps=2))
    _ok(report)
    assert "read from the step's clip_grad_value_ call" in report.results[-1].message


def test_clip_grad_value_declared_passes_and_a_wrong_value_is_caught():
    m = _net()
    _ok(audit(m, mse, _batch(), backend="torch",
              train_step=TrainStep(_clip_step(m, 0.05), clip_value=0.05, steps=2)))
    m = _net()
    _bad(audit(m, mse, _batch(), backend="torch",
               train_step=TrainStep(_clip_step(m, 0.02), clip_value=0.05, steps=2)),
         "elementwise gradient clip differs from the declared one", "+-0.02",
         "declared clip_value=0.05")


def test_an_undeclared_clip_by_hand_is_named_with_its_value():
    m = _net()
    text = _bad(audit(m, mse, _batch(), backend="torch",
                      train_step=TrainStep(_clip_step(m, 0.05, by_hand=True), steps=1)),
                "elementwise gradient clip differs from the declared one",
                "no clip_value declared")
    assert "TrainStep(clip_value=0.05)" in text


# -- Adam(amsgrad=True) ------------------------------------------------------------------------

def _adam_step(model, amsgrad: bool):
    opt = torch.optim.Adam(model.parameters(), lr=0.05, betas=(0.9, 0.5), amsgrad=amsgrad)

    def step(m, b):
        opt.zero_grad()
        mse(m, b).backward()
        opt.step()
    return step


def test_amsgrad_read_from_the_optimizer_is_modelled():
    m = _net()
    report = audit(m, mse, _batch(), backend="torch",
                   train_step=TrainStep(_adam_step(m, True), steps=4))
    _ok(report)
    steps = [r for r in report.results if r.name.startswith("train_step.effective_step")]
    assert len(steps) == 4 and all(r.status is Status.PASSED for r in steps)
    assert "amsgrad=True" in steps[0].message


def test_amsgrad_declared_but_not_built_is_caught():
    decl = Adam(lr=0.05, betas=(0.9, 0.5), amsgrad=True)
    m = _net()
    _ok(audit(m, mse, _batch(), backend="torch",
              train_step=TrainStep(_adam_step(m, True), optimizer=decl, steps=4)))
    m = _net()
    _bad(audit(m, mse, _batch(), backend="torch",
               train_step=TrainStep(_adam_step(m, False), optimizer=decl, steps=4)),
         "training step differs from lr x clipped gradient",
         "matches Adam with amsgrad=False, declared amsgrad=True")


# -- schedulers --------------------------------------------------------------------------------

def _scheduled(model, per_step: int):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def step(m, b):
        opt.zero_grad()
        mse(m, b).backward()
        opt.step()
        for _ in range(per_step):  # BUG when 2: stepped in the step and again
            sched.step()
    return step


def test_scheduler_stepped_once_per_step_passes():
    m = _net()
    report = audit(m, mse, _batch(), backend="torch",
                   train_step=TrainStep(_scheduled(m, 1), steps=3))
    _ok(report)
    assert any(r.name == "train_step.scheduler" and "stepped once per training step"
               in r.message for r in report.results)


def test_scheduler_stepped_twice_with_the_torch_optimizer_as_declaration_is_caught():
    m = _net()
    _bad(audit(m, mse, _batch(), backend="torch",
               train_step=TrainStep(_scheduled(m, 2), steps=3)),
         "LR scheduler stepped more than once per training step", "StepLR",
         "last_epoch advanced by 2, 2, 2")


# -- requires_grad=False -----------------------------------------------------------------------

def _frozen_backbone(sneaky_update: bool):
    m = _net()
    for p in m[0].parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1)

    def step(model, b):
        opt.zero_grad()
        mse(model, b).backward()
        opt.step()
        if sneaky_update:  # BUG: a "frozen" layer still changed by the step (EMA-style code)
            with torch.no_grad():
                model[0].weight.mul_(0.99)
    return m, step


def test_a_frozen_backbone_read_from_requires_grad_passes():
    m, step = _frozen_backbone(False)
    report = audit(m, mse, _batch(), backend="torch", train_step=TrainStep(step, steps=2))
    _ok(report)
    assert report["0.weight"].status.value == "blocked as intended"
    assert "requires_grad=False" in next(r.message for r in report.results
                                         if r.name == "0.weight" and r.kind == "flow")


def test_a_frozen_parameter_the_step_moves_is_caught():
    m, step = _frozen_backbone(True)
    text = _bad(audit(m, mse, _batch(), backend="torch", train_step=TrainStep(step)),
                "target update differs from the declared one")
    assert "0.weight" in text and "changed by the step" in text


def test_maximize_read_from_the_optimizer_is_modelled():
    """A reward maximised with ``SGD(maximize=True)``: the audit's loss is the reward."""
    def reward(m, b):
        return -mse(m, b)

    def make(maximize: bool):
        m = _net()
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, maximize=maximize)

        def step(model, b):
            opt.zero_grad()
            (reward(model, b) if maximize else -reward(model, b)).backward()
            opt.step()
        return m, step

    m, step = make(True)
    _ok(audit(m, reward, _batch(), backend="torch", train_step=TrainStep(step, steps=2)))
    m, step = make(False)  # the same ascent written by hand, but declared as maximize=False
    from gradcheck import SGD
    report = audit(m, reward, _batch(), backend="torch",
                   train_step=TrainStep(step, optimizer=SGD(0.05, momentum=0.9), steps=1))
    assert not report.passed
    assert report.results[-1].details["effective_factor"] == pytest.approx(-1.0, rel=1e-3)
