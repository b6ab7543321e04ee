"""A zoo of ordinary torch training steps as users write them, each with a buggy twin.

``CASES``: each :class:`Case` builds ``(model, loss_fn, batch, train_step, stop_gradient)`` for
the correct step (``bug=False``) or its twin with one deliberate bug (``bug=True``), and names
the bug class (``gradcheck.semantics.context.BugClass`` value) the audit must report for the
twin.  Models are tiny so that the whole zoo runs in about two minutes on one core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import gradcheck
from gradcheck import TargetUpdate, Tie, TrainStep

LR = 0.05


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[bool], tuple[Any, Any, Any, TrainStep, tuple[str, ...]]]
    cause: str


def mse(m, b):
    return ((m(b[0]) - b[1]) ** 2).mean()


def data(shape, n: int, dtype, out: int = 1, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, *shape, generator=g).to(dtype),
            torch.randn(n, out, generator=g).to(dtype))


def accumulate(opt, loss_fn, k: int, *, bug: str = "", max_norm: float | None = None,
               wd_in_loss: float = 0.0):
    """A gradient-accumulation step over ``k`` chunks of the batch; ``bug`` selects one of the
    usual mistakes (``undivided``, ``uneven``, ``zero_inside``, ``clip_before_last``,
    ``step_inside``)."""

    def step(m, b):
        n = b[0].shape[0]
        parts = list(zip(b[0].chunk(k), b[1].chunk(k), strict=True))
        opt.zero_grad()
        for i, (x, y) in enumerate(parts):
            if bug == "zero_inside":
                opt.zero_grad()
            loss = loss_fn(m, (x, y))
            if wd_in_loss:
                loss = loss + 0.5 * wd_in_loss * sum((p ** 2).sum() for p in m.parameters()
                                                     if p.requires_grad) * len(x) / n
            if bug == "undivided":
                w = 1.0
            elif bug == "uneven":
                w = 1.0 / len(parts)
            else:
                w = len(x) / n
            if bug == "clip_before_last" and i == len(parts) - 1 and max_norm is not None:
                torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm)
            (loss * w).backward()
            if bug == "step_inside":
                opt.step()
                opt.zero_grad()
        if bug != "step_inside":
            if max_norm is not None and bug != "clip_before_last":
                torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm)
            opt.step()
    return step


def simple(opt, loss_fn, *, make_opt=None, max_norm: float | None = None,
           wd_in_loss: float = 0.0, scheduler=None):
    """One backward per step; ``make_opt(model)``: the optimizer is created inside the step
    (every step: its state is lost)."""

    def step(m, b):
        o = make_opt(m) if make_opt is not None else opt
        o.zero_grad()
        loss = loss_fn(m, b)
        if wd_in_loss:
            loss = loss + 0.5 * wd_in_loss * sum((p ** 2).sum() for p in m.parameters()
                                                 if p.requires_grad)
        loss.backward()
        if max_norm is not None:
            torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm)
        o.step()
        if scheduler is not None:
            scheduler.step()
    return step


# -- models --------------------------------------------------------------------------------

class MHA(nn.Module):
    def __init__(self, d: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.att = nn.MultiheadAttention(d, heads, batch_first=True)
        self.out = nn.Linear(d, 1)

    def forward(self, x):
        return self.out(self.att(x, x, x, need_weights=False)[0].mean(1))


class Encoder(nn.Module):
    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(d, 2, 16, dropout=0.0, batch_first=True)
        self.out = nn.Linear(d, 1)

    def forward(self, x):
        return self.out(self.enc(x).mean(1))


class HandAttention(nn.Module):
    """Single-head attention written by hand, biases initialised to zero."""

    def __init__(self, d: int = 6) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        for lin in (self.q, self.k, self.v):
            nn.init.zeros_(lin.bias)
        self.out = nn.Linear(d, 1)

    def forward(self, x):
        a = torch.softmax(self.q(x) @ self.k(x).transpose(1, 2) / x.shape[-1] ** 0.5, -1)
        return self.out((a @ self.v(x)).mean(1))


def conv_norm(norm: str):
    if norm == "group":
        body = [nn.Conv2d(2, 4, 3), nn.GroupNorm(4, 4)]
    elif norm == "group2":
        body = [nn.Conv2d(2, 4, 3), nn.GroupNorm(2, 4)]
    else:
        body = [nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4)]
    return nn.Sequential(*body, nn.ReLU(), nn.Flatten(), nn.Linear(4 * 3 * 3, 1))


class Recurrent(nn.Module):
    def __init__(self, cell: str, nonlinearity: str = "tanh") -> None:
        super().__init__()
        kind = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[cell]
        kw = {"nonlinearity": nonlinearity} if cell == "rnn" else {}
        self.rnn = kind(3, 5, batch_first=True, **kw)
        self.out = nn.Linear(5, 1)

    def forward(self, x):
        return self.out(self.rnn(x)[0][:, -1])


class Bag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, ids):
        return self.out(self.emb(ids).mean(1))


class TiedAutoencoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(4, 3, bias=False)
        self.dec = nn.Linear(3, 4, bias=False)
        with torch.no_grad():
            self.dec.weight.copy_(self.enc.weight.T)

    def forward(self, x):
        return self.dec(torch.tanh(self.enc(x)))


class Backbone(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(4, 6), nn.Tanh())
        self.head = nn.Linear(6, 1)

    def forward(self, x):
        return self.head(self.backbone(x))


class QNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.online = nn.Linear(4, 2)
        self.target = nn.Linear(4, 2)
        with torch.no_grad():
            self.target.load_state_dict(self.online.state_dict())
        self.target.requires_grad_(False)


def td_loss(m, b):
    x, y = b
    q = m.online(x).max(1).values
    return ((q - (y[:, 0] + 0.9 * m.target(x).max(1).values)) ** 2).mean()


# -- the cases -------------------------------------------------------------------------------

def _seeded(factory):
    torch.manual_seed(0)
    return factory()


def acc_case(name, factory, dtype, shape, n, k, make_opt, bug, cause, *, max_norm=None,
             loss=mse, batch=None, steps=2):
    def build(buggy: bool):
        model = _seeded(factory).to(dtype)
        opt = make_opt(model)
        b = batch(dtype) if batch is not None else data(shape, n, dtype)
        fn = accumulate(opt, loss, k, bug=bug if buggy else "", max_norm=max_norm)
        return model, loss, b, TrainStep(fn, max_norm=max_norm, steps=steps,
                                         micro_batches=k), ()
    return Case(name, build, cause)


def sgd_m(model, **kw):
    return torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=LR,
                           momentum=0.9, **kw)


def adamw(model, **kw):
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2, **kw)


def adam(model, **kw):
    return torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2, **kw)


def _ids(dtype):
    g = torch.Generator().manual_seed(2)
    return torch.randint(0, 10, (8, 5), generator=g), torch.randn(8, 1, generator=g).to(dtype)


F32, F64 = torch.float32, torch.float64
SUMMED = "micro-batch gradients summed, not averaged"
UNEVEN = "uneven micro-batches weighted equally"
ZERO_INSIDE = "gradients reset inside the accumulation loop"
CLIP_LAST = "clip before the last micro-batch"
STEP_INSIDE = "optimizer step inside the accumulation loop"
WD_TWICE = "weight decay applied twice"
STATE_LOST = "optimizer state lost between steps"
TIE_SUM = "tied weights' gradients not summed"
FROZEN = "parameters meant to be frozen were updated"
TARGET = "target update differs from the declared one"


def simple_case(name, factory, dtype, shape, n, make_opt, bug, cause, *, max_norm=None,
                declared=None, loss=mse, batch=None, wd=0.0, steps=2, scheduler=None,
                stop=(), model_opt=None):
    """``bug``: ``rebuilt`` (optimizer created inside the step; ``declared`` then says what the
    optimizer is, in both twins) or ``wd_twice`` (an L2 term of weight ``wd`` in the loss on top
    of the optimizer's weight decay)."""
    def build(buggy: bool):
        model = _seeded(factory).to(dtype)
        b = batch(dtype) if batch is not None else data(shape, n, dtype)
        opt = make_opt(model)
        sched = scheduler(opt) if scheduler is not None else None
        fn = simple(opt, loss, max_norm=max_norm, scheduler=sched,
                    make_opt=make_opt if (buggy and bug == "rebuilt") else None,
                    wd_in_loss=wd if (buggy and bug == "wd_twice") else 0.0)
        return model, loss, b, TrainStep(fn, max_norm=max_norm, steps=steps,
                                         optimizer=declared), stop
    return Case(name, build, cause)


def tied_case(name, dtype):
    def build(buggy: bool):
        model = _seeded(TiedAutoencoder).to(dtype)

        def step(m, b):
            m.zero_grad()
            mse(m, b).backward()
            with torch.no_grad():
                g = m.enc.weight.grad.clone()
                if not buggy:  # BUG when missing: the decoder's share of the gradient
                    g += m.dec.weight.grad.T
                m.enc.weight -= LR * g
                m.dec.weight.copy_(m.enc.weight.T)
        tie = Tie("enc.weight", "dec.weight", transpose=True)
        return model, mse, data((4,), 8, dtype, out=4), TrainStep(step, lr=LR, ties=(tie,),
                                                                  steps=2), ()
    return Case(name, build, TIE_SUM)


def frozen_case(name, dtype, make_opt):
    def build(buggy: bool):
        model = _seeded(Backbone).to(dtype)
        if not buggy:  # BUG when missing: the backbone trains
            model.backbone.requires_grad_(False)
        fn = simple(make_opt(model), mse)
        return model, mse, data((4,), 8, dtype), TrainStep(fn, steps=2), ("backbone",)
    return Case(name, build, FROZEN)


def target_case(name, dtype, tau: float = 0.01):
    def build(buggy: bool):
        model = _seeded(QNet).to(dtype)
        opt = torch.optim.SGD(model.online.parameters(), lr=LR, momentum=0.9)
        code_tau = 5 * tau if buggy else tau

        def step(m, b):
            opt.zero_grad()
            td_loss(m, b).backward()
            opt.step()
            with torch.no_grad():
                for pt, po in zip(m.target.parameters(), m.online.parameters(), strict=True):
                    pt.mul_(1 - code_tau).add_(code_tau * po)
        return model, td_loss, data((4,), 8, dtype), TrainStep(
            step, steps=2, target_updates=(TargetUpdate("target", "online", tau),)), ("target",)
    return Case(name, build, TARGET)


def mlp_ln():
    return nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.Tanh(), nn.Linear(6, 1))


def mlp():
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1))


def nesterov(model):
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9, nesterov=True)


def warmup(opt):
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda e: min(1.0, (e + 1) / 3))


def halving(opt):
    return torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)


SEQ, IMG, REC = (4, 8), (2, 5, 5), (6, 3)
CASES = [
    acc_case("mha_sgd_k2_f32", MHA, F32, SEQ, 8, 2, sgd_m, "undivided", SUMMED),
    acc_case("mha_adamw_k4_f64", MHA, F64, SEQ, 8, 4, adamw, "undivided", SUMMED),
    acc_case("encoder_adamw_k2_f32", Encoder, F32, SEQ, 8, 2, adamw, "zero_inside",
             ZERO_INSIDE),
    acc_case("encoder_sgd_k4_f64_clip", Encoder, F64, SEQ, 8, 4, sgd_m, "clip_before_last",
             CLIP_LAST, max_norm=0.05),
    acc_case("hand_attention_sgd_k4_f32", HandAttention, F32, (4, 6), 8, 4, sgd_m,
             "step_inside", STEP_INSIDE),
    acc_case("hand_attention_adam_k2_f64_uneven", HandAttention, F64, (4, 6), 7, 2, adam,
             "uneven", UNEVEN),
    acc_case("conv_groupnorm_sgd_k2_f32", lambda: conv_norm("group"), F32, IMG, 8, 2, sgd_m,
             "zero_inside", ZERO_INSIDE),
    acc_case("conv_groupnorm_adamw_k4_f64_uneven", lambda: conv_norm("group2"), F64, IMG, 10,
             4, adamw, "uneven", UNEVEN),
    simple_case("conv_batchnorm_sgd_wd_f32", lambda: conv_norm("batch"), F32, IMG, 8,
                lambda m: sgd_m(m, weight_decay=1e-2), "wd_twice", WD_TWICE, wd=1e-2),
    acc_case("layernorm_sgd_k8_f64", mlp_ln, F64, (4,), 16, 8, sgd_m, "step_inside",
             STEP_INSIDE),
    acc_case("layernorm_adam_k16_f32", mlp_ln, F32, (4,), 32, 16, adam, "undivided", SUMMED),
    simple_case("lstm_adam_clip_f32", lambda: Recurrent("lstm"), F32, REC, 8, adam, "rebuilt",
                STATE_LOST, max_norm=0.05, declared=gradcheck.Adam(lr=1e-2)),
    simple_case("gru_sgd_momentum_f64", lambda: Recurrent("gru"), F64, REC, 8, sgd_m,
                "rebuilt", STATE_LOST, declared=gradcheck.SGD(LR, momentum=0.9)),
    acc_case("rnn_nesterov_k4_f64", lambda: Recurrent("rnn"), F64, REC, 8, 4, nesterov,
             "undivided", SUMMED),
    acc_case("lstm_sgd_k2_f32_clip", lambda: Recurrent("lstm"), F32, REC, 8, 2, sgd_m,
             "clip_before_last", CLIP_LAST, max_norm=0.05),
    acc_case("embedding_adamw_k2_f32", Bag, F32, None, 8, 2, adamw, "zero_inside",
             ZERO_INSIDE, batch=_ids),
    simple_case("embedding_sgd_wd_f64", Bag, F64, None, 8,
                lambda m: sgd_m(m, weight_decay=1e-2), "wd_twice", WD_TWICE, wd=1e-2,
                batch=_ids),
    tied_case("tied_autoencoder_f32", F32),
    tied_case("tied_autoencoder_f64", F64),
    frozen_case("frozen_backbone_adam_f32", F32, adam),
    frozen_case("frozen_backbone_sgd_f64", F64, sgd_m),
    target_case("polyak_target_f32", F32),
    simple_case("warmup_sgd_wd_f32", mlp, F32, (4,), 8,
                lambda m: sgd_m(m, weight_decay=1e-2), "wd_twice", WD_TWICE, wd=1e-2,
                scheduler=warmup),
    simple_case("steplr_adamw_clip_f64", mlp, F64, (4,), 8,
                lambda m: adamw(m, weight_decay=0.05), "wd_twice", WD_TWICE, wd=0.05,
                max_norm=0.05, scheduler=halving),
]
