"""Training steps as people write them (torch): momentum SGD, Adam, a warm-up schedule and a
GradScaler pass when correct; each bug is flagged with its cause named from the factor.

Run ``python -m examples.training_steps``.
"""

from __future__ import annotations

import torch
from torch import nn

from gradcheck import AfterBackward, TrainStep, audit

LR = 0.05


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)


def mse(m, b):
    return ((m(b[0]) - b[1]) ** 2).mean()


def momentum_warmup(model, bug=False):
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: min(1.0, (e + 1) / 4))

    def step(m, b):
        opt.zero_grad()
        mse(m, b).backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
        sched.step()
    return TrainStep(step, max_norm=0.5, steps=3)


def adam_twice(model, bug=True):
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(m, b):
        opt.zero_grad()
        mse(m, b).backward()
        opt.step()
        opt.step()  # BUG
    return TrainStep(step, steps=2)


def scaler_bypassed(model, bug=True):
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    sc = torch.amp.GradScaler("cpu")

    def step(m, b):
        opt.zero_grad()
        sc.scale(mse(m, b)).backward()
        opt.step()  # BUG: should be sc.step(opt); sc.update()
    return TrainStep(step)


def micro_batches(model, bug=True):
    opt = torch.optim.SGD(model.parameters(), lr=LR)

    def step(m, b):
        opt.zero_grad()
        for x, y in zip(b[0].chunk(4), b[1].chunk(4), strict=True):
            mse(m, (x, y)).backward()  # BUG: not divided by 4
        opt.step()
    return TrainStep(step)


def first_layer_norm(m):  # BUG: a monitor reading only one layer's .grad
    return float(torch.sqrt(sum((p.grad ** 2).sum() for p in m[0].parameters())))


def main() -> None:
    for title, make in (("momentum SGD + warm-up + clip, 3 steps", momentum_warmup),
                        ("Adam, optimizer.step() twice", adam_twice),
                        ("GradScaler bypassed", scaler_bypassed),
                        ("4 micro-batches, not divided", micro_batches)):
        model = net()
        report = audit(model, mse, batch(), backend="torch", train_step=make(model))
        print(f"== {title}: {report.summary()}")
        for r in report.failures:
            print(f"  FAILED {r.name}: {r.message[:420]}")
    report = audit(net(), mse, batch(), backend="torch",
                   grad_norm_monitor=AfterBackward(first_layer_norm))
    print(f"== monitor after the loop's backward: {report.summary()}")
    for r in report.failures:
        print(f"  FAILED {r.name}: {r.message[:300]}")


if __name__ == "__main__":
    main()
