"""The pure pieces of the step judge (gradcheck.model_audit.step_judge); the verdicts
themselves are exercised end to end in test_remote_step.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gradcheck.model_audit.step_answers import StepRecord, TensorStep
from gradcheck.model_audit.step_judge import clip_scale, clip_scales, growth, judge_applied
from gradcheck.oracle.error_model import ErrorModel


def _rec(grad: np.ndarray, applied: np.ndarray) -> StepRecord:
    g, a = grad.ravel(), applied.ravel()
    t = TensorStep("w", grad.shape, float(g @ g), True, float(a @ a), float(a @ g), 0.0, 0.0,
                   0.0, np.arange(g.size), np.zeros(g.size), g, a, np.zeros(g.size))
    return StepRecord(None, "pre_clip", {"w": t})


def test_clip_scale():
    assert clip_scale(None, 3.0) == 1.0
    assert clip_scale(1.0, 0.5) == 1.0
    assert clip_scale(1.0, 4.0) == 0.25
    assert clip_scale(1.0, 4.0, 1e-6) < 0.25


def test_growth_is_the_probabilistic_bound_of_a_recursive_sum():
    assert growth(1) == 1.0 and growth(0) == 1.0
    assert growth(10_000) == 100.0


def test_clip_scales_accept_any_epsilon_between_none_and_torchs():
    g = np.array([3.0, 4.0])  # ||g|| = 5
    s_mid = 1.0 / (5.0 + 5e-7)
    scales = clip_scales(_rec(g, s_mid * g), 1.0)
    assert scales[:2] == [0.2, 1.0 / (5.0 + 1e-6)]
    assert math.isclose(scales[2], s_mid, rel_tol=1e-15)
    # a fitted scale outside that window is not offered
    assert len(clip_scales(_rec(g, 0.5 * g), 1.0)) == 2
    assert clip_scales(_rec(g, g), 10.0) == [1.0]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_an_element_that_cancels_keeps_its_terms_rounding(dtype):
    """A received gradient from the user's own backward (the two-pass clip's ``(s L)``) rounds
    differently from the library's: at an element far below the tensor's size (a cancelling
    sum) the difference is its terms' rounding, a few eps of the tensor's RMS.  Measured on
    Candle: ``|diff| 1.01e-17`` at ``-8.4e-5`` in float64.  That passes; a factor 2 does not."""
    eps = float(np.finfo(dtype).eps)
    grad = np.array([0.3, -0.5, -8.4e-5, 0.2])
    rms = float(np.sqrt(grad @ grad / grad.size))
    rounded = grad.copy()
    rounded[2] += 3 * eps * rms          # the cancelling element's own rounding
    rounded[0] *= 1 + eps                # one ulp elsewhere
    model = ErrorModel()
    ok = judge_applied(list(_rec(grad, rounded).tensors.values()), _rec(grad, rounded), None,
                       max_norm=None, n_elements=grad.size, dtype=dtype, model=model)
    assert ok.ok, ok.assessment.message("applied")
    doubled = _rec(grad, 2 * grad)
    bad = judge_applied(list(doubled.tensors.values()), doubled, None, max_norm=None,
                        n_elements=grad.size, dtype=dtype, model=model)
    assert not bad.ok
    off = grad.copy()
    off[2] += 1e-3 * rms                 # a wrong element far beyond rounding is still caught
    wrong = _rec(grad, off)
    assert not judge_applied(list(wrong.tensors.values()), wrong, None, max_norm=None,
                             n_elements=grad.size, dtype=dtype, model=model).ok
