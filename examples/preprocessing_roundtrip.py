"""A trainable preprocessing layer whose gradient dies in a host round trip.

``Pipeline`` learns a per-feature ``scale`` and ``shift`` before a squashing nonlinearity, then
applies two preprocessing steps written the way the seed report found them: outlier clipping
with bounds taken through ``.item()`` and a windowed z-score computed on a Python list
(``.tolist()`` and back).  The list round trip cuts the graph: ``pre.scale`` and ``pre.shift``
change the loss (finite differences see it) but receive no gradient.  The audit reports them as
*blocked unintentionally* and names the cut points upstream of each.  ``FixedPipeline`` does the
same arithmetic with tensor operations, and every parameter flows.

Run ``python -m examples.preprocessing_roundtrip`` to print both audits.
"""

from __future__ import annotations

import torch
from torch import nn

import gradcheck
from gradcheck.model_audit.flow import audit

WINDOW = 8
EPS = 1e-12  # keeps the window-of-one z-score (0 / 0) finite, value and gradient


def clip_outliers(z: torch.Tensor, n_sigma: float = 4.0) -> torch.Tensor:
    mean = z.mean().item()  # host round trip: the bounds become constants
    std = z.std().item()
    return z.clamp(mean - n_sigma * std, mean + n_sigma * std)


def windowed_normalize(z: torch.Tensor, window: int = WINDOW) -> torch.Tensor:
    rows = z.tolist()  # host round trip: the rest is plain Python
    out = []
    for i in range(len(rows)):
        past = rows[max(0, i - window + 1): i + 1]
        cols = list(zip(*past, strict=True))
        mean = [sum(c) / len(c) for c in cols]
        std = [(sum((v - m) ** 2 for v in c) / len(c) + EPS) ** 0.5
               for c, m in zip(cols, mean, strict=True)]
        out.append([(v - m) / s for v, m, s in zip(rows[i], mean, std, strict=True)])
    return torch.tensor(out, dtype=z.dtype)


def windowed_normalize_tensor(z: torch.Tensor, window: int = WINDOW) -> torch.Tensor:
    out = []
    for i in range(z.shape[0]):
        past = z[max(0, i - window + 1): i + 1]
        mean = past.mean(dim=0)
        std = (((past - mean) ** 2).mean(dim=0) + EPS).sqrt()
        out.append((z[i] - mean) / std)
    return torch.stack(out)


class Pre(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, n, dtype=torch.float64))
        self.shift = nn.Parameter(torch.linspace(-0.2, 0.2, n, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x * self.scale + self.shift)


class Pipeline(nn.Module):
    def __init__(self, n: int = 3, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.pre = Pre(n)
        self.head = nn.Linear(n, 1, dtype=torch.float64)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return windowed_normalize(clip_outliers(self.pre(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x)).squeeze(-1)


class FixedPipeline(Pipeline):
    def features(self, x: torch.Tensor) -> torch.Tensor:
        z = self.pre(x)
        mean, std = z.mean(), z.std()
        return windowed_normalize_tensor(z.clamp(mean - 4 * std, mean + 4 * std))


def make_batch(seed: int = 2, n: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.cumsum(torch.randn(n, 3, generator=g, dtype=torch.float64), dim=0) * 0.3
    y = torch.randn(n, generator=g, dtype=torch.float64)
    return x, y


def mse(model: Pipeline, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return ((model(x) - y) ** 2).mean()


def run(model_cls: type = Pipeline) -> gradcheck.Report:
    return audit(model_cls(), mse, make_batch(), backend="torch")


def main() -> None:
    for title, cls in (("host round trips", Pipeline), ("tensor-only preprocessing",
                                                          FixedPipeline)):
        report = run(cls)
        print(f"== {title}: {report.summary()}")
        print(report.table())
        for r in report.failures:
            print(f"  FAILED {r.name}: {r.message}")
        print()


if __name__ == "__main__":
    main()
