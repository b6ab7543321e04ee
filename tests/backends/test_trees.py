"""Nested and complex inputs as real arrays: naming, selection (``wrt``), the flat call."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

from gradcheck.backends import trees
from gradcheck.core.errors import InvalidArgument
from gradcheck.engines.numpy.backend import NumpyBackend

NP = NumpyBackend()


class Pair(NamedTuple):
    a: object
    b: object


def test_inputs_are_named_by_parameter_else_by_position():
    def loss(params, x, *rest):
        return x

    assert trees.input_names(loss, 3) == ("params", "x", "inputs[2]")
    assert trees.input_names(print, 1) == ("inputs[0]",)  # no signature


def test_leaves_are_named_by_path_and_complex_ones_split_in_two():
    params = {"w": np.ones((2, 2)), "z": np.array([1 + 2j]), "act": "tanh", "n": 3}
    flat = trees.flatten_inputs(NP, lambda params, x: x, [params, np.zeros(2)],
                                ("params", "x"))
    assert flat.paths == ("params['w']", "params['z'].real", "params['z'].imag", "x")
    assert [a.dtype.name for a in flat.arrays] == ["float64"] * 4
    assert flat.arrays[1][0] == 1.0 and flat.arrays[2][0] == 2.0
    assert flat.call.complex_parts


def test_the_flat_call_rebuilds_the_structure_and_keeps_the_constants():
    seen = []

    def fn(params, x):
        seen.append(params)
        return {"y": params["w"] * x, "z": params["z"]}

    params = {"w": np.ones(2), "z": np.array([1 + 2j]), "act": "tanh"}
    flat = trees.flatten_inputs(NP, fn, [params, np.full(2, 3.0)], ("params", "x"))
    out = flat.call(*flat.arrays)
    assert seen[0]["act"] == "tanh" and seen[0]["z"].dtype == np.complex128
    assert [np.asarray(o).tolist() for o in out] == [[3.0, 3.0], [1.0], [2.0]]
    assert flat.call.output_paths == ("['y']", "['z'].real", "['z'].imag")


def test_output_paths_are_none_for_one_array_or_a_flat_tuple():
    for out, paths in [(np.ones(2), None), ((np.ones(1), np.ones(1)), None),
                       (Pair(np.ones(1), np.ones(1)), (".a", ".b")),
                       (np.array([1j]), (".real", ".imag"))]:
        call = trees.realified(lambda x, out=out: out, NP)
        call(np.ones(1))
        assert call.output_paths == paths


def test_the_same_structure_gives_the_same_call_object():
    def fn(p):
        return p["w"]

    a = trees.flatten_inputs(NP, fn, [{"w": np.ones(2)}], ("p",)).call
    b = trees.flatten_inputs(NP, fn, [{"w": np.zeros(2)}], ("p",)).call
    c = trees.flatten_inputs(NP, fn, [{"v": np.zeros(2)}], ("p",)).call
    assert a is b and a is not c


def test_nested_or_complex_inputs_need_flattening_plain_arrays_do_not():
    assert not trees.needs_flattening(NP, [np.ones(2), np.ones(3)])
    assert trees.needs_flattening(NP, [{"w": np.ones(2)}])
    assert trees.needs_flattening(NP, [np.array([1j])])


PATHS = ("params['w']", "params['b']", "params['z'].real", "params['z'].imag", "x")


@pytest.mark.parametrize(("wrt", "chosen"), [
    (0, (0, 1, 2, 3)), (1, (4,)), ("x", (4,)), ("params['w']", (0,)),
    ('params["b"]', (1,)), ("params['z']", (2, 3)), ("params['z'].imag", (3,)),
    (["params['w']", 1], (0, 4)),
])
def test_wrt_chooses_by_position_or_by_path_prefix(wrt, chosen):
    assert trees.select(PATHS, ("params", "x"), wrt) == chosen


@pytest.mark.parametrize(("wrt", "match"), [
    (2, "there are 2 inputs"), ("params['v']", "names no input array; the arrays are: "
                                               "params\\['w'\\], params\\['b'\\]"),
    ("param", "names no input array"), ([], "selects nothing"), (1.0, "must be an input"),
    (True, "must be an input"),
])
def test_wrt_that_selects_nothing_is_refused_with_the_choices(wrt, match):
    with pytest.raises(InvalidArgument, match=match):
        trees.select(PATHS, ("params", "x"), wrt)


def test_complex_is_recognised_without_importing_an_engine():
    torch = pytest.importorskip("torch")
    assert trees.is_complex_value(torch.zeros(1, dtype=torch.complex64))
    assert not trees.is_complex_value(torch.zeros(1))
    assert trees.is_complex_value(np.zeros(1, complex)) and trees.is_complex_value(1j)
    assert not trees.is_complex_value("x")


def test_a_list_of_numbers_is_one_array_as_before():
    assert not trees.needs_flattening(NP, [[1.0, 2.0], [[1.0], [2.0]]])
    flat = trees.flatten_inputs(NP, lambda p, x: x, [{"w": np.ones(2)}, [1.0, 2.0]],
                                ("p", "x"))
    assert flat.paths == ("p['w']", "x") and flat.arrays[1].tolist() == [1.0, 2.0]
