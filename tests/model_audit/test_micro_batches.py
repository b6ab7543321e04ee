"""Micro-batches as the step forms them, and the accumulation bugs' gradients."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.model_audit import micro_batches as mb
from gradcheck.semantics.context import BugClass

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(("n", "k"), [(8, 2), (10, 4), (20, 8), (7, 2), (32, 16)])
def test_chunks_cut_like_torch_chunk(n, k):
    x, y = torch.arange(n * 3.0).reshape(n, 3), torch.arange(float(n))
    ours = mb.chunks((x, y), k)
    theirs = list(zip(x.chunk(k), y.chunk(k), strict=True))
    assert len(ours) == len(theirs)
    for (a, b), (c, d) in zip(ours, theirs, strict=True):
        assert torch.equal(a, c) and torch.equal(b, d)


def test_chunks_of_nested_batches_and_numpy():
    batch = {"x": np.arange(10.0), "meta": [np.ones((10, 2))], "k": 3}
    parts = mb.chunks(batch, 4)
    assert [len(p["x"]) for p in parts] == [3, 3, 3, 1]
    assert parts[0]["k"] == 3 and parts[-1]["meta"][0].shape == (1, 2)
    with pytest.raises(ValueError):
        mb.chunks(5.0, 2)


def test_split_declared_by_the_user_is_used():
    parts = mb.split_batch(np.arange(6.0), 2, lambda b, k: [b[:1], b[1:]])
    assert [len(p) for p in parts] == [1, 5]


def _parts():
    return [{"w": np.array([1.0, 0.0])}, {"w": np.array([0.0, 2.0])},
            {"w": np.array([4.0, 4.0])}]


def test_variants_even_micro_batches_offer_no_uneven_cause():
    causes = [v.bug for v in mb.variants(_parts(), [2, 2, 2], None)]
    assert BugClass.UNEVEN_MICRO_BATCHES not in causes
    assert BugClass.CLIP_BEFORE_LAST_MICRO_BATCH not in causes  # no clip declared
    assert causes.count(BugClass.ZERO_GRAD_IN_ACCUMULATION) == 2


def test_variants_values():
    vs = mb.variants(_parts(), [3, 3, 1], 1.0)
    uneven = next(v for v in vs if v.bug is BugClass.UNEVEN_MICRO_BATCHES)
    np.testing.assert_allclose(uneven.grads["w"], [5 / 3, 2.0])
    last = [v for v in vs if v.bug is BugClass.ZERO_GRAD_IN_ACCUMULATION]
    np.testing.assert_allclose(sorted(float(v.grads["w"][0]) for v in last), [4 / 3, 4.0])
    clip = next(v for v in vs if v.bug is BugClass.CLIP_BEFORE_LAST_MICRO_BATCH)
    head = np.array([1.0, 2.0]) / 3  # norm 0.745 < 1: not clipped
    np.testing.assert_allclose(clip.grads["w"], head + np.array([4.0, 4.0]) / 3)
    assert not clip.clipped_after


def test_one_micro_batch_has_no_variants():
    assert mb.variants(_parts()[:1], [2], 1.0) == []
