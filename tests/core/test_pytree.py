"""gradcheck's own pytree flattener (the default of Backend.tree_flatten)."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from gradcheck.core import pytree


class Pair(NamedTuple):
    a: object
    b: object


@dataclasses.dataclass
class Layer:
    w: object
    b: object
    act: str = "tanh"


def test_paths_are_written_as_the_user_indexes():
    value = {"w": [np.zeros(2), np.ones(1)], "p": Pair(np.zeros(3), (np.ones(2), None)),
             "layer": Layer(np.zeros(1), np.ones(1))}
    pairs, _, _ = pytree.flatten(value)
    assert [p for p, _ in pairs] == ["['w'][0]", "['w'][1]", "['p'].a", "['p'].b[0]",
                                     "['layer'].w", "['layer'].b", "['layer'].act"]


def test_rebuild_gives_the_same_containers_with_new_leaves():
    value = {"p": Pair(1.0, [2.0, None]), "layer": Layer(3.0, 4.0, "relu")}
    pairs, rebuild, _ = pytree.flatten(value)
    out = rebuild([10 * leaf if isinstance(leaf, float) else leaf for _, leaf in pairs])
    assert out == {"p": Pair(10.0, [20.0, None]), "layer": Layer(30.0, 40.0, "relu")}
    assert type(out["p"]) is Pair and type(out["p"].b) is list


def test_a_leaf_is_its_own_tree_and_structures_compare_by_shape_not_values():
    pairs, rebuild, structure = pytree.flatten(np.zeros(2))
    assert [p for p, _ in pairs] == [""] and rebuild(["x"]) == "x"
    assert pytree.flatten({"a": 1.0})[2] == pytree.flatten({"a": 2.0})[2]
    assert pytree.flatten({"a": 1.0})[2] != pytree.flatten({"b": 1.0})[2]
    assert pytree.flatten([1.0])[2] != pytree.flatten((1.0,))[2]
    assert not pytree.is_container(Layer) and pytree.is_container(Layer(1, 2))
