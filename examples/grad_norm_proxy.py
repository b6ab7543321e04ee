"""A gradient-norm monitor that reports the loss magnitude instead of the gradient norm.

The seed report's adapter logged ``grad_norm = sqrt(|loss|)`` after ``loss.backward()``: a
number that moves with the loss and says nothing about exploding or vanishing gradients.
``proxy_monitor`` reproduces it; ``true_monitor`` computes the global L2 norm of all parameter
gradients.  The audit compares each with the norm recomputed in float64 and names the proxy.

Run ``python -m examples.grad_norm_proxy`` to print both audits.
"""

from __future__ import annotations

import torch
from torch import nn

import gradcheck
from gradcheck.model_audit.flow import audit


class Regressor(nn.Module):
    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.encoder = nn.Linear(5, 8)
        self.decoder = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(torch.tanh(self.encoder(x))).squeeze(-1)


def make_batch(seed: int = 3, n: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, generator=g)
    return x, torch.sin(x[:, 0]) + 0.1 * torch.randn(n, generator=g)


def mse(model: Regressor, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return ((model(x) - y) ** 2).mean()


def proxy_monitor(model: Regressor, batch: tuple[torch.Tensor, torch.Tensor]) -> float:
    loss = mse(model, batch)
    loss.backward()
    return loss.abs().sqrt().item()  # BUG: a loss-magnitude proxy


def true_monitor(model: Regressor, batch: tuple[torch.Tensor, torch.Tensor]) -> float:
    mse(model, batch).backward()
    squares = [(p.grad.double() ** 2).sum() for p in model.parameters() if p.grad is not None]
    return float(torch.stack(squares).sum().sqrt())


def run(monitor=proxy_monitor) -> gradcheck.Report:
    return audit(Regressor(), mse, make_batch(), backend="torch", grad_norm_monitor=monitor)


def main() -> None:
    for title, monitor in (("loss-magnitude proxy", proxy_monitor),
                           ("global L2 norm", true_monitor)):
        report = run(monitor)
        print(f"== {title}: {report.summary()}")
        for r in report.results:
            if r.name == "grad_norm":
                print(f"  {r.status.value}: {r.message}")
        print()


if __name__ == "__main__":
    main()
