"""Hand-written torch rules shared by tests: ``sin`` whose forward-mode rule is scaled (a
forward-mode mutant, or its twin at scale 1), usable by the numeric pipeline (batched with
``vmap``) and by the sweep."""

from __future__ import annotations

from typing import Any


def sin_with_jvp(scale: float = 1.0) -> Any:
    """``torch.sin`` with its own backward (right) and forward-mode rule (times ``scale``)."""
    import torch

    class Sin(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return torch.sin(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * torch.cos(x)

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return t * torch.cos(x) * scale

    return Sin.apply


def backward_wrong_at(f: Any, element: int, factor: float) -> Any:
    """``f`` (torch ops) as a custom function whose backward is ``f``'s own pullback with
    gradient element ``element`` (last axis) times ``factor``: a boundary bug in a backward
    that torch can differentiate again."""
    import torch

    class WrongAt(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return f(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            grad = torch.func.vjp(f, x)[1](g)[0]
            at = torch.arange(grad.shape[-1], device=grad.device) == element
            return torch.where(at, grad * factor, grad)

    return WrongAt.apply
