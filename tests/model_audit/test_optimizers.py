"""The declared optimizers' rules (gradcheck.model_audit.optimizers): Gorgonia's VanillaSolver
and the model protocol's declarations."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.model_audit.optimizers import describe_declaration, from_declaration, update


def test_vanilla_follows_solvers_go_order():
    h = from_declaration({"kind": "vanilla", "lr": 0.5, "batch": 2, "clip": 0.3, "l1": 0.1,
                          "l2": 0.2})
    p = np.array([1.0, -2.0, 0.0, 4.0])
    g = np.array([0.2, 0.4, -0.1, -3.0])
    new, st, mag = update(h, p, g, {})
    # g + l1 sign(p) + l2 p, then / batch, then clamp to [-0.3, 0.3], then p -= lr g
    d = np.array([0.2 + 0.1 + 0.2, 0.4 - 0.1 - 0.4, -0.1, -3.0 + 0.1 + 0.8]) / 2
    d = np.clip(d, -0.3, 0.3)
    np.testing.assert_array_equal(new, p - 0.5 * d)
    assert st == {} and np.all(mag >= np.abs(p))


def test_vanilla_without_options_is_plain_sgd():
    h = from_declaration({"kind": "vanilla", "lr": 0.1, "batch": 1, "clip": None, "l1": 0,
                          "l2": 0})
    p, g = np.array([1.0, 2.0]), np.array([3.0, -4.0])
    np.testing.assert_array_equal(update(h, p, g, {})[0], p - 0.1 * g)


def test_declarations():
    h = from_declaration({"kind": "adamw", "lr": 1e-3, "beta1": 0.9, "beta2": 0.999,
                          "eps": 1e-8, "weight_decay": 0.01})
    assert h["decoupled"] and h["betas"] == (0.9, 0.999)
    assert describe_declaration(h).startswith("AdamW(lr=0.001")
    assert not from_declaration({"kind": "adam", "lr": 1e-3, "beta1": 0.9, "beta2": 0.999,
                                 "eps": 1e-8})["decoupled"]
    assert describe_declaration(from_declaration({"kind": "sgd", "lr": 0.1})) == "SGD(lr=0.1)"
    with pytest.raises(NotImplementedError, match="rmsprop"):
        from_declaration({"kind": "rmsprop", "lr": 1.0})
    with pytest.raises(ValueError, match="lacks a field"):
        from_declaration({"kind": "sgd"})
