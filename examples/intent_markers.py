"""Intent declared where it happens (torch): a semi-gradient TD target, a gradient reversal
layer, and the same losses without the declaration, or with a declaration the code does not
honour; a tied weight kept as two parameters and a Polyak target update declared with tau.

Run ``python -m examples.intent_markers``.
"""

from __future__ import annotations

import torch
from torch import nn

import gradcheck
from gradcheck import TargetUpdate, TrainStep, audit


class V(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, s):
        return self.net(s).squeeze(-1)


def td_batch():
    g = torch.Generator().manual_seed(2)
    return torch.randn(16, 4, generator=g), torch.randn(16, generator=g), \
        torch.randn(16, 4, generator=g)


def td_loss(declare: bool, detach: bool):
    def loss(v, batch):
        s, r, s2 = batch
        nxt = v(s2)
        target = r + 0.9 * (nxt.detach() if detach else nxt)
        if declare:
            target = gradcheck.stopped(target, "bootstrap target")
        return ((v(s) - target) ** 2).mean()
    return loss


class Agent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.online, self.target = nn.Linear(4, 2), nn.Linear(4, 2)
        self.target.load_state_dict(self.online.state_dict())


def q_loss(m, x):
    with torch.no_grad():
        t = m.target(x)
    return ((m.online(x) - t - 1.0) ** 2).mean()


def polyak(tau):
    holder: dict = {}

    def step(m, x):
        opt = holder.setdefault("opt", torch.optim.SGD(m.online.parameters(), lr=0.1))
        opt.zero_grad()
        q_loss(m, x).backward()
        opt.step()
        with torch.no_grad():
            for pt, po in zip(m.target.parameters(), m.online.parameters(), strict=True):
                pt.mul_(1 - tau).add_(po, alpha=tau)
    return step


def show(title, report) -> None:
    print(f"== {title}: {report.summary()}")
    for r in report.failures:
        print(f"  FAILED {r.name}: {r.message[:400]}")


def main() -> None:
    show("semi-gradient TD, declared", audit(V(), td_loss(True, True), td_batch(),
                                             backend="torch"))
    show("semi-gradient TD, detach not declared", audit(V(), td_loss(False, True), td_batch(),
                                                        backend="torch"))
    show("declared stopped, no detach in the code", audit(V(), td_loss(True, False), td_batch(),
                                                          backend="torch"))
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))
    for code, declared in ((0.01, 0.01), (0.05, 0.01)):
        show(f"Polyak update tau={code} in the code, declared tau={declared}",
             audit(Agent(), q_loss, x, backend="torch", stop_gradient=("target",),
                   train_step=TrainStep(polyak(code), lr=0.1, steps=2,
                                        target_updates=(TargetUpdate("target", "online",
                                                                     declared),))))


if __name__ == "__main__":
    main()
