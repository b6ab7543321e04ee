"""What an audit costs on a transformer block: passes and time.

    python benchmarks/audit_transformer.py [--reps 3] [--steps 2] [--micro-batches 4]

The model: ``nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0)``
and a linear head (2,241 parameters in 14 tensors), float32, a batch of 8 sequences of 6; the
training step accumulates ``--micro-batches`` micro-batch gradients (each loss divided by K)
and takes one AdamW step, audited over ``--steps`` steps.

Printed: the number of loss evaluations the audit makes without a gradient (the finite
differences of the flow check: two Gaussian directions per parameter tensor), with a backward
(the reference gradients, their rounding samples), and the calls of the user's step; the CPU
time (one torch thread, fastest of ``--reps``) of the whole audit and of the audit without the
step (the flow check alone), and one training step's own CPU time for scale.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from gradcheck import TrainStep, audit  # noqa: E402


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(self.enc(x).mean(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--micro-batches", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    k = args.micro_batches
    counts = {"no_grad": 0, "grad": 0, "step": 0}

    def loss_fn(m, b):
        counts["grad" if torch.is_grad_enabled() else "no_grad"] += 1
        return ((m(b[0]) - b[1]) ** 2).mean()

    def build():
        torch.manual_seed(0)
        model = Block()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step(m, b):
            counts["step"] += 1
            opt.zero_grad()
            for x, y in zip(b[0].chunk(k), b[1].chunk(k), strict=True):
                (loss_fn(m, (x, y)) / k).backward()
            opt.step()
        return model, step

    g = torch.Generator().manual_seed(1)
    batch = torch.randn(8, 6, 16, generator=g), torch.randn(8, 1, generator=g)

    def run(with_step: bool) -> tuple[float, dict, bool]:
        model, step = build()
        for key in counts:
            counts[key] = 0
        t = time.process_time()
        report = audit(model, loss_fn, batch, backend="torch",
                       train_step=TrainStep(step, steps=args.steps, micro_batches=k)
                       if with_step else None)
        return time.process_time() - t, dict(counts), report.passed

    full = [run(True) for _ in range(args.reps)]
    flow = [run(False) for _ in range(args.reps)]
    model, step = build()
    t = time.process_time()
    for _ in range(5):
        step(model, batch)
    one = (time.process_time() - t) / 5
    n_params = sum(p.numel() for p in model.parameters())
    c_full, c_flow = full[0][1], flow[0][1]
    print(f"model: TransformerEncoderLayer(16, 2, 32) + Linear(16, 1), {n_params} parameters, "
          f"float32, batch 8 x 6 x 16, K = {k} micro-batches, AdamW, {args.steps} audited steps")
    print(f"audit passed: {full[0][2]}")
    print(f"loss evaluations: {c_full['no_grad']} without gradient (FD), {c_full['grad']} with "
          f"a backward (of which {c_full['step'] * k} inside the user's steps), "
          f"{c_full['step']} calls of the user's step")
    print(f"  without the step: {c_flow['no_grad']} without gradient, {c_flow['grad']} with")
    print(f"CPU time (1 thread, fastest of {args.reps}): audit {min(r[0] for r in full):.2f} s, "
          f"flow check alone {min(r[0] for r in flow):.2f} s, one training step {one * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
