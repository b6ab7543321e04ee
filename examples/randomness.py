"""Stochastic forwards: a dropout network whose second head reads a detached copy of the hidden
layer (the first layer is under-trained) is flagged, its twin passes; a loss drawing noise from
a private generator is reported as nondeterministic, its FD verdicts inconclusive.

Run ``python -m examples.randomness``.
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

from gradcheck import audit


class DropNet(nn.Module):
    def __init__(self, detach: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)
        self.detach = detach

    def forward(self, x):
        h = nn.functional.dropout(torch.tanh(self.a(x)), 0.3, training=True)
        return self.b(h) + self.c(h.detach() if self.detach else h)


def square(m, x):
    return (m(x) ** 2).mean()


_counter = itertools.count()


def private_noise(m, x):  # a generator the audit cannot seed
    g = torch.Generator().manual_seed(next(_counter))
    return ((m(x) + 0.1 * torch.randn(x.shape[0], 1, generator=g)) ** 2).mean()


def main() -> None:
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))
    for title, model, loss in (("dropout, both heads train the first layer", DropNet(False),
                                square),
                               ("dropout, second head reads h.detach()", DropNet(True), square),
                               ("noise from a private generator", DropNet(False), private_noise)):
        report = audit(model, loss, x, backend="torch")
        print(f"== {title}: {report.summary()} (stochastic forward: {report.stochastic})")
        for r in report.results:
            if r.name == "rng.determinism" or r.status.value not in ("passed", "skipped"):
                print(f"  {r.status.value.upper()} {r.name}: {r.message[:330]}")


if __name__ == "__main__":
    main()
