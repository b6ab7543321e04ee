"""Mutant pairs on torch training steps: each buggy step is flagged (with its named cause) and
its correct twin passes; the model, optimizer and RNG are left as found."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import TrainStep, audit
from gradcheck.core.results import Status
from tests.support.rng import rng_states, same_rng_states

torch = pytest.importorskip("torch")
nn = torch.nn
LR, MAX_NORM = 0.05, 0.5


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def _batch(n: int = 16):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 4, generator=g), torch.randn(n, 1, generator=g)


def mse(m, b):
    return ((m(b[0]) - b[1]) ** 2).mean()


def _step_results(report):
    return [r for r in report.results if r.name.startswith("train_step")]


def _passes(report) -> None:
    steps = _step_results(report)
    assert steps and all(r.status is Status.PASSED for r in steps), \
        [r.message for r in steps if r.status is not Status.PASSED]
    assert report.passed, [r.message for r in report.failures]


def _flagged(report, bug: str | None = None, name: str | None = None) -> str:
    bad = [r for r in _step_results(report) if r.status is Status.FAILED
           and (name is None or r.name == name)]
    assert bad, [r.message for r in report.results]
    if bug is not None:
        assert any(r.message.startswith(f"[{bug}]") for r in bad), [r.message for r in bad]
    return " ".join(r.message for r in bad)


def _run(make_step, steps: int = 2, max_norm=MAX_NORM, **kw):
    model = _net()
    fn, extra = make_step(model)
    return audit(model, mse, _batch(), backend="torch",
                 train_step=TrainStep(fn, max_norm=max_norm, steps=steps, **extra, **kw))


# -- optimizers: correct twins pass, bugs flagged --------------------------------------------

def momentum(bug: bool, clip: bool = True):
    def make(model):
        opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

        def step(m, b):
            if not bug:
                opt.zero_grad()  # BUG when missing: last step's .grad is added
            mse(m, b).backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(m.parameters(), MAX_NORM)
            opt.step()
        return step, {}
    return make


def adam(bug: bool):
    def make(model):
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)

        def step(m, b):
            opt.zero_grad()
            mse(m, b).backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), MAX_NORM)
            opt.step()
            if bug:
                opt.step()  # BUG: a second update with the same gradient
        return step, {}
    return make


def adamw_decay(bug: bool):
    def make(model):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)

        def step(m, b):
            opt.zero_grad()
            mse(m, b).backward()
            if bug:  # BUG: L2 added by hand on top of AdamW's decoupled decay
                for p in m.parameters():
                    p.grad.add_(p.detach(), alpha=0.1)
            torch.nn.utils.clip_grad_norm_(m.parameters(), MAX_NORM)
            opt.step()
        return step, {}
    return make


def warmup(bug: bool):
    def make(model):
        opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.5)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: min(1.0, (e + 1) / 4))

        def step(m, b):
            opt.zero_grad()
            mse(m, b).backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), MAX_NORM)
            if bug:
                sched.step()  # BUG: the schedule advanced before the update it should set
            opt.step()
            if not bug:
                sched.step()
        return step, {}
    return make


def scaler(bug: bool):
    def make(model):
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        sc = torch.amp.GradScaler("cpu")

        def step(m, b):
            opt.zero_grad()
            sc.scale(mse(m, b)).backward()
            if bug:
                opt.step()  # BUG: bypasses the scaler: the 2^16 loss scale stays in
                return
            sc.step(opt)  # unscales, skips the step on inf/nan
            sc.update()
        return step, {}
    return make


def clip_after_step(bug: bool):
    def make(model):
        opt = torch.optim.SGD(model.parameters(), lr=LR)

        def step(m, b):
            opt.zero_grad()
            mse(m, b).backward()
            if not bug:
                torch.nn.utils.clip_grad_norm_(m.parameters(), MAX_NORM)
            opt.step()
            if bug:  # BUG: clipped after the update
                torch.nn.utils.clip_grad_norm_(m.parameters(), MAX_NORM)
        return step, {}
    return make


def micro_batches(bug: bool):
    def make(model):
        opt = torch.optim.SGD(model.parameters(), lr=LR)

        def step(m, b):
            opt.zero_grad()
            for x, y in zip(b[0].chunk(4), b[1].chunk(4), strict=True):
                loss = mse(m, (x, y))
                (loss if bug else loss / 4).backward()  # BUG: not divided by K
            opt.step()
        return step, {}
    return make


def normalising_clip(bug: bool):
    def make(model):
        opt = torch.optim.SGD(model.parameters(), lr=LR)

        def step(m, b):
            opt.zero_grad()
            mse(m, b).backward()
            if bug:  # BUG: rescales to max_norm whatever the norm
                n = torch.sqrt(sum((p.grad ** 2).sum() for p in m.parameters()))
                for p in m.parameters():
                    p.grad.mul_(10.0 / n)
            else:
                torch.nn.utils.clip_grad_norm_(m.parameters(), 10.0)
            opt.step()
        return step, {}
    return make


def stale_cache(bug: bool):
    def make(model):
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        cache: dict = {}

        def step(m, b):
            opt.zero_grad()
            if bug and "g" in cache:  # BUG: a memo of the first step's gradient
                for p, g in zip(m.parameters(), cache["g"], strict=True):
                    p.grad = g.clone()
            else:
                mse(m, b).backward()
                cache["g"] = [p.grad.clone() for p in m.parameters()]
            opt.step()
        return step, {}
    return make


def partial_optimizer(bug: bool):
    def make(model):
        params = list(model[2].parameters()) if bug else list(model.parameters())
        opt = torch.optim.SGD(params, lr=LR)  # BUG: the first layer is missing

        def step(m, b):
            m.zero_grad()
            mse(m, b).backward()
            opt.step()
        return step, {"optimizer": torch.optim.SGD(model.parameters(), lr=LR)}
    return make


def loss_scaled_down(bug: bool):
    def make(model):
        opt = torch.optim.SGD(model.parameters(), lr=LR)

        def step(m, b):
            opt.zero_grad()
            (mse(m, b) / 1024).backward()
            if not bug:  # BUG when missing: the 1/1024 loss scale is never undone
                for p in m.parameters():
                    p.grad.mul_(1024)
            opt.step()
        return step, {}
    return make


class _Learner(nn.Module):
    """A model that owns its optimizer and exposes its step as a method."""

    def __init__(self, bug: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=LR, momentum=0.9)
        self.bug = bug

    def forward(self, x):
        return self.net(x)

    def step(self, m, b):
        if not self.bug:
            self.opt.zero_grad()  # BUG when missing
        mse(m, b).backward()
        self.opt.step()


PAIRS = {
    "momentum_no_zero_grad": (lambda bug: momentum(bug, clip=False),
                              "reset that does not reset", {"max_norm": None}),
    "momentum_no_zero_grad_clipped": (momentum, None, {}),
    "adam_two_updates": (adam, "two optimizer updates in one step", {}),
    "adamw_double_decay": (adamw_decay, None, {}),
    "warmup_scheduler_order": (warmup, None, {"steps": 3}),
    "gradscaler_bypassed": (scaler, "loss scale not removed from the step",
                            {"max_norm": None}),
    "clip_after_step": (clip_after_step, "clip that ignores the threshold", {}),
    "micro_batches_not_divided": (micro_batches, "micro-batch gradients summed, not averaged",
                                  {"max_norm": None}),
    "normalising_clip": (normalising_clip, "clip that ignores the threshold",
                         {"max_norm": 10.0}),
    "stale_gradient_cache": (stale_cache, "step uses state captured at an earlier step",
                             {"max_norm": None, "steps": 3}),
    "layer_missing_from_optimizer": (partial_optimizer, None, {"max_norm": None}),
    "loss_scale_not_undone": (loss_scaled_down, "loss scale not removed from the step",
                              {"max_norm": None}),
}


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step()`")
@pytest.mark.parametrize("case", sorted(PAIRS))
def test_step_pair(case):
    make, bug, kw = PAIRS[case]
    _passes(_run(make(False), **kw))
    _flagged(_run(make(True), **kw), bug)


def test_optimizer_owned_by_the_model_is_found_pair():
    for bug in (False, True):
        model = _Learner(bug)
        report = audit(model, mse, _batch(), backend="torch",
                       train_step=TrainStep(model.step, steps=2))
        steps = {r.name: r for r in _step_results(report)}
        assert "torch.optim.SGD(lr=0.05, momentum=0.9)" in \
            steps["train_step.effective_step"].message
        assert (steps["train_step.repeatable"].status is Status.FAILED) is bug
        assert not model.opt.state  # restored: no momentum buffers left by the audit


def test_diagnoses_name_the_factor():
    msg = _flagged(_run(micro_batches(True), max_norm=None))
    assert "4 micro-batch gradients summed" in msg and "per parameter" in msg
    msg = _flagged(_run(scaler(True), max_norm=None))
    assert "2^16 = 65536" in msg
    msg = _flagged(_run(normalising_clip(True), max_norm=10.0))
    assert "post-clip norm always equals max_norm" in msg
    msg = _flagged(_run(partial_optimizer(True), max_norm=None))
    assert "0.weight 0 (not updated)" in msg
    msg = _flagged(_run(loss_scaled_down(True), max_norm=None))
    assert "2^10 = 1024" in msg and "never scaled back" in msg


def test_optimizer_scheduler_scaler_and_model_left_as_found():
    model = _net()
    model.add_module("bn", nn.BatchNorm1d(1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: min(1.0, (e + 1) / 4))
    sc = torch.amp.GradScaler("cpu")
    mse(model, _batch()).backward()  # the user's own .grad, left from before the audit
    opt.step()  # optimizer state exists before the audit
    model.eval()
    model[0].train()

    def step(m, b):
        opt.zero_grad()
        sc.scale(mse(m, b)).backward()
        sc.unscale_(opt)
        sc.step(opt)
        sc.update()
        sched.step()

    state = {k: v.clone() for k, v in model.state_dict().items()}
    grads = [p.grad.clone() for p in model.parameters()]
    modes = [m.training for m in model.modules()]
    opt_state = {id(p): {k: v.clone() for k, v in s.items()} for p, s in opt.state.items()}
    lr, epoch, scale = opt.param_groups[0]["lr"], sched.last_epoch, sc.get_scale()
    np.random.seed(3)
    rng = rng_states()
    report = audit(model, mse, _batch(), backend="torch", train_step=TrainStep(step, steps=2))
    assert [r for r in report.results if r.name.startswith("train_step")]
    for k, v in model.state_dict().items():
        assert torch.equal(v, state[k]), k
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), grads, strict=True))
    assert [m.training for m in model.modules()] == modes
    for p, s in opt.state.items():
        assert all(torch.equal(v, opt_state[id(p)][k]) for k, v in s.items())
    assert (opt.param_groups[0]["lr"], sched.last_epoch, sc.get_scale()) == (lr, epoch, scale)
    assert same_rng_states(rng, rng_states())


# -- monitors reading .grad after the loop's backward ----------------------------------------

def test_after_backward_monitor_pair():
    def global_norm(m):
        return float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in m.parameters())))

    def first_layer_only(m):  # BUG: the norm of one layer
        return float(torch.sqrt(sum((p.grad ** 2).sum() for p in m[0].parameters())))

    ok = audit(_net(), mse, _batch(), backend="torch",
               grad_norm_monitor=gradcheck.AfterBackward(global_norm))
    assert ok.passed, [r.message for r in ok.failures]
    bad = audit(_net(), mse, _batch(), backend="torch",
                grad_norm_monitor=gradcheck.AfterBackward(first_layer_only))
    (r,) = [r for r in bad.results if r.name == "grad_norm"]
    assert r.status is Status.FAILED and "AfterBackward" in r.message


def test_infinite_norm_is_never_shown_as_allowed():
    bad = audit(_net(), mse, _batch(), backend="torch",
                grad_norm_monitor=gradcheck.AfterBackward(lambda m: float("inf")))
    (r,) = [r for r in bad.results if r.name == "grad_norm"]
    assert r.status is Status.FAILED and "non-finite norm never passes" in r.message
    assert "allowed inf" not in r.message


# -- the user's own utilities through the public API ----------------------------------------

def test_user_clip_function_pair():
    def good(ps, m):
        return torch.nn.utils.clip_grad_norm_(ps, m)

    def elementwise(ps, m):  # BUG: clamps elements, changes the direction
        for p in ps:
            p.grad.clamp_(-m, m)
        return torch.sqrt(sum((p.grad ** 2).sum() for p in ps))

    ok = gradcheck.check_clip_function(good, backend="torch", epsilon=1e-6)
    assert [r.name for r in ok.failures] == ["clip.threshold_validation"]  # torch's own, known
    bad = gradcheck.check_clip_function(elementwise, backend="torch", epsilon=1e-6)
    assert any(r.name == "clip.direction" for r in bad.failures)


def test_user_grad_norm_function_pair():
    def good(ps):
        return float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in ps)))

    def summed(ps):  # BUG: sum of per-parameter norms
        return float(sum(p.grad.norm() for p in ps))

    assert gradcheck.check_grad_norm_function(good, backend="torch").passed
    bad = gradcheck.check_grad_norm_function(summed, backend="torch")
    assert any("sum of per-parameter norms" in r.message for r in bad.failures)


def test_user_accumulation_function_pair():
    def good(m, loss_fn, mbs):
        for b in mbs:
            (loss_fn(m, b) / len(mbs)).backward()

    def summed(m, loss_fn, mbs):  # BUG: not divided by the number of micro-batches
        for b in mbs:
            loss_fn(m, b).backward()

    assert gradcheck.check_accumulation_function(good, backend="torch").passed
    bad = gradcheck.check_accumulation_function(summed, backend="torch")
    assert bad.failures[0].message.startswith("[micro-batch gradients summed")
