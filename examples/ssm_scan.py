"""A small state-space model run with ``jax.lax.scan``, parameters registered under names.

Two diagonal SSM layers (``ssm_0``, ``ssm_1``: ``A`` decay rates, input ``B``, output ``C``,
step ``delta``) and a readout live in one parameter pytree, so every parameter has a registry
name, JAX's key path (``"ssm_0.A"``, ...), the same name the audit reports.  The recurrence per
layer is ``h_t = exp(-delta * softplus(A)) * h_{t-1} + delta * B * x_t``, ``y_t = sum(C * h_t)``.

``frozen_decay_loss`` wraps the first layer's ``A`` in ``lax.stop_gradient`` "to keep the decay
stable" without declaring it: the audit finds ``ssm_0.A`` blocked unintentionally (a detach in
the input path) and points at the ``stop_gradient`` in the traced program.

Run ``python -m examples.ssm_scan`` to print both audits.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

import gradcheck
from gradcheck.model_audit.flow import audit

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402


def init_params(seed: int = 0, state: int = 4) -> dict[str, Any]:
    rng = np.random.default_rng(seed)

    def layer() -> dict[str, Any]:
        return {"A": jnp.asarray(rng.uniform(-1.0, 1.0, state)),
                "B": jnp.asarray(rng.normal(0.0, 0.5, state)),
                "C": jnp.asarray(rng.normal(0.0, 0.5, state)),
                "delta": jnp.asarray(0.5)}

    return {"ssm_0": layer(), "ssm_1": layer(),
            "readout": {"w": jnp.asarray(rng.normal(0.0, 1.0, 2)), "b": jnp.asarray(0.0)}}


def ssm_layer(p: dict[str, Any], x: Any, freeze_a: bool = False) -> Any:
    a = jax.lax.stop_gradient(p["A"]) if freeze_a else p["A"]
    decay = jnp.exp(-p["delta"] * jax.nn.softplus(a))

    def step(h: Any, x_t: Any) -> tuple[Any, Any]:
        h = decay * h + p["delta"] * p["B"] * x_t
        return h, jnp.sum(p["C"] * h)

    _, ys = jax.lax.scan(step, jnp.zeros_like(p["A"]), x)
    return ys


def forward(params: dict[str, Any], x: Any, freeze_a: bool = False) -> Any:
    y0 = ssm_layer(params["ssm_0"], x, freeze_a)
    y1 = ssm_layer(params["ssm_1"], jnp.tanh(y0))
    r = params["readout"]
    return r["w"][0] * y0 + r["w"][1] * y1 + r["b"]


def make_batch(seed: int = 4, steps: int = 20) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(0.0, 1.0, steps))
    return x, jnp.asarray(np.cumsum(rng.normal(0.0, 0.3, steps)))


def loss(params: dict[str, Any], batch: tuple[Any, Any]) -> Any:
    x, y = batch
    return jnp.mean((forward(params, x) - y) ** 2)


def frozen_decay_loss(params: dict[str, Any], batch: tuple[Any, Any]) -> Any:
    x, y = batch
    return jnp.mean((forward(params, x, freeze_a=True) - y) ** 2)


def run(loss_fn=loss) -> gradcheck.Report:
    return audit(init_params(), loss_fn, make_batch(), backend="jax")


def main() -> None:
    for title, fn in (("SSM", loss), ("SSM with an undeclared stop_gradient", frozen_decay_loss)):
        report = run(fn)
        print(f"== {title}: {report.summary()}")
        print(report.table())
        for r in report.failures:
            print(f"  FAILED {r.name}: {r.message}")
        print()


if __name__ == "__main__":
    main()
