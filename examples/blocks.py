"""Audits of standard torch blocks in train mode: ``TransformerEncoderLayer`` with dropout 0.1,
``LSTM``, ``MultiheadAttention`` and a BatchNorm MLP, each with an SGD-momentum step over two
steps.  Every one must pass with the model, optimizer and RNG left bitwise as found; the cost of
each audit is counted (loss evaluations = forward passes, backward passes) and timed.

Run ``python -m examples.blocks`` to print the table kept in docs/notes/semantics-measurements.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from gradcheck import TrainStep, audit


def _seq(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.1,
                                                batch_first=True)

    def forward(self, x):
        return self.layer(x)


class LSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 6, batch_first=True)
        self.head = nn.Linear(6, 1)

    def forward(self, x):
        return self.head(self.lstm(x)[0][:, -1])


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x)[0]


class BatchNormMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, x):
        return self.net(x)


BLOCKS: dict[str, tuple[Callable[[], nn.Module], Callable[[], torch.Tensor]]] = {
    "TransformerEncoderLayer(8, 2, dropout=0.1)": (Transformer, lambda: _seq(1, 4, 5, 8)),
    "LSTM(4, 6) + Linear": (LSTM, lambda: _seq(2, 4, 5, 4)),
    "MultiheadAttention(8, 2)": (Attention, lambda: _seq(3, 4, 5, 8)),
    "BatchNorm MLP (4-8-1)": (BatchNormMLP, lambda: _seq(4, 16, 4)),
}


def square_loss(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return (model(x) ** 2).mean()


def build(name: str) -> tuple[nn.Module, torch.Tensor, Any, TrainStep]:
    make, batch = BLOCKS[name]
    torch.manual_seed(0)
    model = make()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(m, x):
        opt.zero_grad()
        square_loss(m, x).backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    return model, batch(), opt, TrainStep(step, max_norm=1.0, steps=2)


@contextmanager
def counting() -> Any:
    """Counts backward passes (Tensor.backward and autograd.grad calls)."""
    counts = {"backward": 0}
    tb, ag = torch.Tensor.backward, torch.autograd.grad

    def backward(self, *a, **k):
        counts["backward"] += 1
        return tb(self, *a, **k)

    def grad(*a, **k):
        counts["backward"] += 1
        return ag(*a, **k)

    torch.Tensor.backward, torch.autograd.grad = backward, grad
    try:
        yield counts
    finally:
        torch.Tensor.backward, torch.autograd.grad = tb, ag


def run(name: str) -> tuple[Any, dict[str, float], bool]:
    model, x, opt, step = build(name)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    forwards = {"n": 0}

    def loss(m, b):
        forwards["n"] += 1
        return square_loss(m, b)

    with counting() as counts:
        t0 = time.perf_counter()
        report = audit(model, loss, x, backend="torch", train_step=step)
        wall = time.perf_counter() - t0
    same = all(torch.equal(v, before[k]) for k, v in model.state_dict().items()) and \
        not opt.state and all(p.grad is None for p in model.parameters())
    n_params = sum(p.numel() for p in model.parameters())
    return report, {"params": n_params, "forwards": forwards["n"],
                    "backwards": counts["backward"], "seconds": wall}, same


def main() -> None:
    print("| block | parameters | verdict | loss evaluations (forwards) | backward passes "
          "| wall time | left as found |")
    print("|---|---|---|---|---|---|---|")
    for name in BLOCKS:
        report, cost, same = run(name)
        print(f"| {name} | {cost['params']} | {report.summary()} | {cost['forwards']} | "
              f"{cost['backwards']} | {cost['seconds']:.1f} s | {same} |")


if __name__ == "__main__":
    main()
