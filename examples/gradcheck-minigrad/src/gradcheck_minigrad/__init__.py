"""minigrad: a tiny tape-based reverse-mode autodiff engine, and its gradcheck adapter."""

from .engine import Var, backward

__all__ = ["Var", "backward"]
