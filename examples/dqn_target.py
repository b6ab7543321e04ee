"""DQN with a target network: the target's gradient is blocked on purpose.

The TD target ``r + gamma * max_a' Q_target(s', a')`` must be a constant for the online network's
update, so the target network is evaluated under ``torch.no_grad()`` and named in
``stop_gradient``.  Three audits:

* the correct agent: online parameters flow, target parameters are blocked as intended, the
  training step (SGD, lr 0.05, clip to global norm 0.5) applies exactly ``lr x clipped gradient``;
* ``leaky_td_loss`` forgets the ``no_grad``: the target network *leaks* (gradient reaches it);
* ``double_backward_step`` clips by "measuring, rescaling the loss and calling backward again"
  without resetting ``.grad`` in between (the seed report's pattern, on an accumulating engine):
  the step is ``(1 + s) / s`` times the intended one.

Run ``python -m examples.dqn_target`` to print the three audits.
"""

from __future__ import annotations

import torch
from torch import nn

import gradcheck
from gradcheck.model_audit.flow import TrainStep, audit

GAMMA = 0.9
LR = 0.05
MAX_NORM = 0.5


class QNet(nn.Module):
    def __init__(self, n_obs: int = 4, n_actions: int = 2, hidden: int = 16) -> None:
        super().__init__()
        self.body = nn.Linear(n_obs, hidden)
        self.head = nn.Linear(hidden, n_actions)

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.body(s)))


class Agent(nn.Module):
    """Online and target Q-networks; the target starts as a copy of the online network."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.online = QNet()
        self.target = QNet()
        self.target.load_state_dict(self.online.state_dict())
        with torch.no_grad():  # a target that has drifted a little, as after some updates
            for p in self.target.parameters():
                p.add_(0.05 * torch.randn_like(p))


def make_batch(seed: int = 1, n: int = 32) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(n, 4, generator=g)
    a = torch.randint(0, 2, (n,), generator=g)
    r = torch.randn(n, generator=g)
    s2 = torch.randn(n, 4, generator=g)
    done = (torch.rand(n, generator=g) < 0.1).to(s.dtype)
    return s, a, r, s2, done


def td_loss(agent: Agent, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    s, a, r, s2, done = batch
    q = agent.online(s).gather(1, a[:, None]).squeeze(1)
    with torch.no_grad():  # the TD target is a constant
        q_next = agent.target(s2).max(dim=1).values
    y = r + GAMMA * (1.0 - done) * q_next
    return ((q - y) ** 2).mean()


def leaky_td_loss(agent: Agent, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    s, a, r, s2, done = batch
    q = agent.online(s).gather(1, a[:, None]).squeeze(1)
    q_next = agent.target(s2).max(dim=1).values  # BUG: no no_grad / detach
    y = r + GAMMA * (1.0 - done) * q_next
    return ((q - y) ** 2).mean()


def train_step(agent: Agent, batch: tuple[torch.Tensor, ...]) -> None:
    """The intended step: one backward, clip_grad_norm_, SGD on the online network."""
    opt = torch.optim.SGD(agent.online.parameters(), lr=LR)
    opt.zero_grad()
    td_loss(agent, batch).backward()
    torch.nn.utils.clip_grad_norm_(agent.online.parameters(), MAX_NORM)
    opt.step()


def double_backward_step(agent: Agent, batch: tuple[torch.Tensor, ...]) -> None:
    """Clip by rescaling the loss and differentiating again, without a reset in between."""
    opt = torch.optim.SGD(agent.online.parameters(), lr=LR)
    opt.zero_grad()
    loss = td_loss(agent, batch)
    loss.backward(retain_graph=True)  # measure
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in agent.online.parameters()))
    if norm > MAX_NORM:
        (loss * (MAX_NORM / norm.item())).backward()  # BUG: adds to the measured gradients
    opt.step()


def run(loss=td_loss, step=train_step) -> gradcheck.Report:
    agent = Agent()
    return audit(agent, loss, make_batch(), backend="torch", stop_gradient=("target",),
                 train_step=TrainStep(step, lr=LR, max_norm=MAX_NORM))


def main() -> None:
    for title, loss, step in (("correct agent", td_loss, train_step),
                              ("target without no_grad", leaky_td_loss, train_step),
                              ("double-backward clipping", td_loss, double_backward_step)):
        report = run(loss, step)
        print(f"== {title}: {report.summary()}")
        print(report.table())
        for r in report.failures:
            print(f"  FAILED {r.name}: {r.message}")
        print()


if __name__ == "__main__":
    main()
