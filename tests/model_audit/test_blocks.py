"""Standard torch blocks in train mode (dropout on, BatchNorm statistics updating) pass the
audit with a momentum-SGD step, and are left bitwise as found (examples/blocks.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["TransformerEncoderLayer(8, 2, dropout=0.1)",
                                  "LSTM(4, 6) + Linear", "MultiheadAttention(8, 2)",
                                  "BatchNorm MLP (4-8-1)"])
def test_block_passes_and_is_left_as_found(name):
    from examples import blocks

    report, cost, same = blocks.run(name)
    assert report.passed, [r.message for r in report.failures]
    assert same
    assert [r.status.value for r in report.results if r.name.startswith("train_step")] == \
        ["passed"] * 3
    if "dropout" in name:
        assert report.stochastic
