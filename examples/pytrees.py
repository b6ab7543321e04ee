"""Nested inputs and outputs (pytrees): a dict of parameters, checked as the user wrote it.

A layer whose custom backward spoils one element of one parameter's gradient is caught and the
element is named by its path (``params['w'][1, 0]``); its correct twin passes; ``wrt=`` checks
only the leaves asked for.  Then the same with JAX: a NamedTuple in, a dict out.

Run ``python -m examples.pytrees``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import torch

import gradcheck


class Scaled(torch.autograd.Function):
    """``w`` itself, with a backward that scales the gradient of ``w[1, 0]`` by ``factor``."""

    factor = 1.0

    @staticmethod
    def forward(ctx, w):
        return w * 1.0

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        g[1, 0] *= Scaled.factor
        return g


def loss(params, x):
    return torch.tanh(x @ Scaled.apply(params["w"]) + params["b"]).sum()


class Params(NamedTuple):
    w: jax.Array
    b: jax.Array


def layer(p: Params, x):
    h = jnp.tanh(x @ p.w + p.b)
    return {"out": h.sum(), "hidden": h}


def main() -> None:
    rng = np.random.default_rng(0)
    params = {"w": torch.tensor(rng.normal(size=(3, 2))), "b": torch.tensor(rng.normal(size=2)),
              "activation": "tanh"}  # a string among the arrays is a constant
    x = torch.tensor(rng.normal(size=(4, 3)))

    print("correct:", gradcheck.check(loss, params, x, backend="torch", modes=("rev",)).summary())
    Scaled.factor = 1.01  # a 1% wrong gradient at one element of params['w']
    try:
        gradcheck.assert_gradients(loss, params, x, backend="torch", modes=("rev",))
    except gradcheck.GradientMismatch as exc:
        text = str(exc)
        print("\n".join(text.splitlines()[:8]))  # the message, without the reproducer
    report = gradcheck.check(loss, params, x, backend="torch", wrt="params['b']")
    print("wrt=\"params['b']\":", report.summary(), sorted({r.input_path for r in report.results}))
    Scaled.factor = 1.0

    p = Params(jnp.asarray(rng.normal(size=(3, 2))), jnp.asarray(rng.normal(size=2)))
    report = gradcheck.check(layer, p, rng.normal(size=(4, 3)), backend="jax", modes=("rev",))
    print("jax:", report.summary())
    for r in report.results[:3]:
        print("   ", r.subject, r.status.value)


if __name__ == "__main__":
    main()
