"""The model.step answers read into typed records (gradcheck.model_audit.step_answers):
strict, a malformed answer is a ProtocolError (the model could not be answered), never a
finding."""

from __future__ import annotations

import pytest

from gradcheck.backends.wire import ProtocolError
from gradcheck.model_audit.step_answers import parse_steps
from tests.model_audit.remote_step_fake import FakeModel

SGD = {"kind": "sgd", "lr": 0.1}


def _answer(steps: int = 2):
    peer = FakeModel(optimizer=SGD)
    ans = peer.request("model.step", {"dtype": "float64", "knobs": {}, "steps": steps,
                                      "experiment": "run", "sample": 16})
    return ans, [(k, tuple(v)) for k, v in peer.shapes.items()]


def test_records_carry_sums_and_samples_at_their_places():
    ans, reg = _answer()
    recs = parse_steps(ans, reg, 2)
    w = recs[0].tensors["fc1.weight"]
    assert w.sampled and w.index.size == 16 and w.theta.size == 16
    assert w.labels()[0].startswith("fc1.weight[") and w.applied is not None
    b = recs[0].tensors["fc1.bias"]
    assert not b.sampled and b.index.tolist() == list(range(6))
    assert recs[0].grad_norm > 0 and recs[0].logged is not None


@pytest.mark.parametrize("spoil,match", [
    (lambda a: a["steps"].pop(), "1 steps, 2 were asked"),
    (lambda a: a["steps"][0].update(logged=3.0), "logged is not an object"),
    (lambda a: a["steps"][0]["logged"].update(which="after"), "not pre_clip or post_clip"),
    (lambda a: a["steps"][0]["tensors"]["fc1.weight"].update(index=[3, 2]), "not ascending"),
    (lambda a: a["steps"][0]["tensors"]["fc1.weight"].update(index=[99]), "positions below"),
    (lambda a: a["steps"][0]["tensors"]["fc1.weight"].update(applied_present=1), "boolean"),
])
def test_parse_steps_rejects_malformed_answers(spoil, match):
    ans, reg = _answer()
    assert len(parse_steps(ans, reg, 2)) == 2
    spoil(ans)
    with pytest.raises(ProtocolError, match=match):
        parse_steps(ans, reg, 2)
