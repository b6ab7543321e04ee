"""The model protocol's seeded directions: the contract's test vectors (docs/protocol-model.md)."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.model_audit import directions as d

VECTORS = [  # S, N, fnv1a64(N), key, signs of j = 0..15, sum of the first 1000
    (0, "fc1.weight", 0x0FC5AB63896269ED, 0x97A85473B1AC470B, "+-+-+++++--+++--", -12),
    (1, "fc1.weight", 0x0FC5AB63896269ED, 0x0C0DEE666185DAC9, "+--++++---+---++", 30),
    (0, "fc2.bias", 0x9025E524E4887E83, 0xAC97325035B8FACB, "+--++-+---+-+--+", -36),
    (12345, "w", 0xAF63EA4C86020456, 0xE35CEC8D4893E4E5, "-+-+-+---++--+++", -10),
    (9007199254740991, "layer.0.weight", 0x7B3E0C79A947673A, 0x2C31AA0D52257019,
     "--+-+-+++-+-++--", -14),
]


def _text(s: np.ndarray) -> str:
    return "".join("+" if v > 0 else "-" for v in s)


@pytest.mark.parametrize(("seed", "name", "fnv", "key", "first", "total"), VECTORS)
def test_contract_vectors(seed, name, fnv, key, first, total):
    assert d.fnv1a64(name) == fnv
    assert d.mix(seed ^ fnv) == key
    s = d.signs(seed, name, 0, 1000)
    assert _text(s[:16]) == first
    assert int(s.sum()) == total


def test_slice_is_the_same_elements():
    assert _text(d.signs(0, "fc1.weight", 1000, 1008)) == "--+++-++"
    whole = d.signs(7, "t", 0, 3_000_000)  # crosses generation blocks
    assert np.array_equal(d.signs(7, "t", 1_048_570, 2_100_000), whole[1_048_570:2_100_000])


def test_vectorised_mix_matches_the_scalar_one():
    xs = [0, 1, 2**63, 2**64 - 1, 0x9E3779B97F4A7C15]
    got = d.mix_array(np.array(xs, dtype=np.uint64))
    assert [int(v) for v in got] == [d.mix(x) for x in xs]


def test_values_and_scope():
    v = d.values(3, "w", 10, 2, 6, 0.25)
    assert np.all(v[:2] == 0) and np.all(v[6:] == 0)
    assert np.array_equal(np.abs(v[2:6]), np.full(4, 0.25))
    direction = d.Direction(3, (d.Scope("w", 0.25, 2, 6),))
    assert np.array_equal(direction.arrays({"w": 10})["w"], v)
    assert direction.wire() == {"seed": 3, "scope": [{"name": "w", "start": 2, "scale": 0.25,
                                                      "stop": 6}]}
    assert direction.size({"w": 10}) == 4


def test_sample_indices_rule():
    n, k = 100, 8
    got = d.sample_indices(n, k)
    for m in range(k):
        lo, hi = m * n // k, (m + 1) * n // k
        assert got[m] == lo + d.mix(m) % (hi - lo)
    assert list(d.sample_indices(5, 8)) == [0, 1, 2, 3, 4]
    assert np.all(np.diff(d.sample_indices(10**7, 64)) > 0)
