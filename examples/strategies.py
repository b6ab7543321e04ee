"""Property-based gradient tests of your own op with ``gradcheck.strategies`` (torch).

A leaky ReLU written as a ``torch.autograd.Function``, its correct backward and a mutant whose
negative slope is wrong.  ``gst.arrays(..., avoid=[0.0])`` keeps every value away from the kink
at 0 (where no derivative exists and the check would be inconclusive), and mixes in the
catalog's special values (zero excepted here, integers, values next to +-1, ties...).  The
correct op passes every example; the mutant is caught and Hypothesis shrinks it to a small
falsifying input.

Run ``python -m examples.strategies``.
"""

from __future__ import annotations

import torch
from hypothesis import given, settings

import gradcheck
from gradcheck import GradientMismatch
from gradcheck import strategies as gst


def leaky_relu(slope_in_backward: float):
    class LeakyRelu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.where(x > 0, x, 0.01 * x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            # full_like: a Python float in torch.where would be a float32 constant (its rounding
            # is 1e-8 relative, which a float64 check sees)
            return g * torch.where(x > 0, torch.ones_like(x), torch.full_like(x, slope_in_backward))

    return LeakyRelu.apply


def property_test(op):
    @settings(max_examples=25, derandomize=True, deadline=None, database=None)
    @given(gst.arrays(gst.shapes(max_dims=2), "float64", avoid=[0.0]))
    def test_gradients(x):
        gradcheck.assert_gradients(op, x, backend="torch", modes=("rev",))
    return test_gradients


def main() -> None:
    pool = gst.special_values("float64", min_value=-1.5, max_value=1.5, avoid=[0.0])
    print(f"{len(pool)} special values in [-1.5, 1.5] away from 0, e.g. "
          + ", ".join(repr(v) for v in pool[::12]))
    for label, slope in (("correct (slope 0.01)", 0.01), ("mutant (slope 0.02)", 0.02)):
        try:
            property_test(leaky_relu(slope))()
            print(f"{label}: 25 examples passed")
        except GradientMismatch as exc:
            notes = [n for n in getattr(exc, "__notes__", []) if "Falsifying" in n or "x=" in n]
            print(f"{label}: caught: {str(exc).splitlines()[0]}")
            print("  " + "\n  ".join(notes))


if __name__ == "__main__":
    main()
