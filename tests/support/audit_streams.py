"""Real model audits written to a result stream and read back, for the report's tests (the
flow map must draw every audited parameter; none of them is an op of the matrix)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gradcheck import TrainStep, audit, stream
from gradcheck.stream import StreamData, read_streams


def audited_streams(tmp: Path) -> tuple[StreamData, dict[str, set[str]]]:
    """A torch audit (flowing, frozen, declared-stopped and unused parameters, a training
    step) and, where JAX is installed, a JAX audit of a nested parameter tree, in one stream;
    the stream read back and each backend's audited parameter names."""
    import torch

    torch.manual_seed(0)
    net = torch.nn.ModuleDict({"body": torch.nn.Linear(3, 4), "head": torch.nn.Linear(4, 1),
                               "target": torch.nn.Linear(4, 1),
                               "spare": torch.nn.Linear(2, 2)})
    net["body"].bias.requires_grad_(False)
    x, y = torch.randn(6, 3), torch.randn(6, 1)

    def loss(m, b):
        h = torch.tanh(m["body"](b[0]))
        with torch.no_grad():
            t = m["target"](h)
        return ((m["head"](h) - b[1] - 0.1 * t) ** 2).mean()

    opt = torch.optim.SGD([p for n, p in net.named_parameters() if n.startswith("head")],
                          lr=0.1)

    def step(m, b):
        opt.zero_grad()
        loss(m, b).backward()
        opt.step()

    names: dict[str, set[str]] = {}
    path = tmp / "audits.jsonl"
    with stream.using(path):
        rep = audit(net, loss, (x, y), backend="torch", stop_gradient=("target",),
                    train_step=TrainStep(step, optimizer=opt))
        names["torch"] = {p.name for p in rep.parameters}
        try:
            import jax.numpy as jnp
        except ImportError:
            pass
        else:
            r = np.random.default_rng(0)
            params = {"params": {"Dense_0": {"kernel": jnp.asarray(r.normal(size=(3, 2))),
                                             "bias": jnp.zeros(2)},
                                 "Dense_1": {"kernel": jnp.asarray(r.normal(size=(2, 1)))}}}

            def jloss(p, b):
                q = p["params"]
                h = jnp.tanh(b[0] @ q["Dense_0"]["kernel"] + q["Dense_0"]["bias"])
                return jnp.mean((h @ q["Dense_1"]["kernel"] - b[1]) ** 2)

            rep = audit(params, jloss, (r.normal(size=(6, 3)), r.normal(size=(6, 1))),
                        backend="jax")
            names["jax"] = {p.name for p in rep.parameters}
    return read_streams([path]), names
