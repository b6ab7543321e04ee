"""The gradient's rounding level in the step comparison: no false alarm on accumulation over
attention and transformer blocks (float32/float64, K = 2 and 4, SGD and AdamW), parameters
that cannot learn reported, and the allowance still tight enough to catch a real bug."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck import TrainStep, audit
from gradcheck.core.results import Status
from gradcheck.model_audit import step_noise

torch = pytest.importorskip("torch")
nn = torch.nn


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


class _Attn(nn.Module):
    def __init__(self, block: str) -> None:
        super().__init__()
        self.block = (nn.MultiheadAttention(8, 2, batch_first=True) if block == "mha" else
                      nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True))
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        h = self.block(x, x, x, need_weights=False)[0] if isinstance(
            self.block, nn.MultiheadAttention) else self.block(x)
        return self.out(h.mean(1))


def _mse(m, b):
    return ((m(b[0]) - b[1]) ** 2).mean()


def _audit(block, dtype, k, opt_name, divide=True):
    torch.manual_seed(0)
    model = _Attn(block).to(dtype)
    g = torch.Generator().manual_seed(1)
    batch = (torch.randn(8, 4, 8, generator=g).to(dtype), torch.randn(8, 1, generator=g).to(dtype))
    opt = (torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9) if opt_name == "sgd"
           else torch.optim.AdamW(model.parameters(), lr=1e-3))

    def step(m, b):
        opt.zero_grad()
        for x, y in zip(b[0].chunk(k), b[1].chunk(k), strict=True):
            (_mse(m, (x, y)) / (k if divide else 1)).backward()  # BUG when not divided
        opt.step()
    return audit(model, _mse, batch, backend="torch",
                 train_step=TrainStep(step, steps=2, micro_batches=k))


@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("block", ["mha", "encoder"])
def test_accumulation_is_not_a_false_alarm(block, dtype, k, opt_name):
    report = _audit(block, dtype, k, opt_name)
    assert report.passed, [r.message for r in report.failures]
    step = next(r for r in report.results if r.name == "train_step.effective_step")
    # the key third of in_proj_bias: softmax ignores a constant shift, its gradient is zero
    below = step.details["below_rounding_level"]
    key = "block.in_proj_bias" if block == "mha" else "block.self_attn.in_proj_bias"
    assert below.get(key, [0])[0] >= 8, below
    assert "cannot learn" in step.message


@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_undivided_accumulation_still_caught(opt_name):
    report = _audit("mha", torch.float32, 2, opt_name, divide=False)
    bad = [r for r in report.results if r.status is Status.FAILED]
    assert any(r.details.get("bug_class") == "micro-batch gradients summed, not averaged"
               for r in bad), [r.message for r in bad]


def test_shifted_propagated_unresolved():
    noise = step_noise.GradientNoise({"a": 0.1}, {"a": np.array([0.5, 0.5])},
                                     {"a": np.array([True, False])}, 2)
    g = {"a": np.array([0.1, 3.0])}
    np.testing.assert_allclose(step_noise.shifted(g, noise, -1.0)["a"], [-0.4, 2.5])
    slack = step_noise.propagated({"a": np.zeros(2)}, {"a": np.array([1.0, -1.0])},
                                  {"a": np.array([-3.0, 0.5])})
    np.testing.assert_allclose(slack["a"], [6.0, 2.0])
    found = step_noise.unresolved([{"a": np.array([True, True])},
                                   {"a": np.array([True, False])}])
    assert found == {"a": (1, 2)}
    assert "a 1 of 2 elements" in step_noise.describe_unresolved(found)
    assert step_noise.describe_unresolved({}) == ""
