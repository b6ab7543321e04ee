"""Deliberately broken training hooks, one per bug class, for the semantic-probe tests.

Each mutant wraps a real implementation and breaks exactly one behaviour; ``backend_with``
builds an adapter whose ``training()`` returns the mutant (name and declared semantics of the
real backend unless overridden).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gradcheck.backends.base import Backend, Semantics
from gradcheck.backends.training import validate_max_norm
from gradcheck.engines.numpy.backend import NumpyBackend
from gradcheck.engines.numpy.training import NumpyTraining


def backend_with(base: type[Backend], hooks_cls: type, semantics: Semantics | None = None
                 ) -> Backend:
    attrs: dict[str, Any] = {"training": lambda self, device, dtype: hooks_cls(self, device,
                                                                                dtype)}
    if semantics is not None:
        attrs["semantics"] = semantics
    return type(f"Mutant{base.__name__}", (base,), attrs)()


# -- accumulation -----------------------------------------------------------------------------

class DoublingNumpy(NumpyTraining):
    """Declares functional gradients but adds each backward into the kept ones."""

    def backward(self, loss_fn, *inputs, scale=1.0, retain=False):
        old = self._grads
        value = super().backward(loss_fn, *inputs, scale=scale, retain=retain)
        if old is not None:
            self._grads = {k: old[k] + self._grads[k] for k in old}
        return value


def torch_mutants() -> dict[str, type]:
    """Torch mutants (imported lazily: torch is heavy)."""
    import torch

    from gradcheck.engines.torch.training import TorchTraining

    class NoReset(TorchTraining):
        """zero_grad() does nothing."""

        def zero_grad(self) -> None:
            pass

    class SetNotAdd(TorchTraining):
        """Every read of a parameter is its own tape node, and the stored gradient is *written*
        from each node in turn (last write wins) instead of being added."""

        @property
        def model(self) -> Any:
            self._reads: list[tuple[str, Any]] = []
            hooks = self

            class View(Mapping):
                def __getitem__(self, k: str) -> Any:
                    alias = hooks._params[k].detach().requires_grad_(True)
                    hooks._reads.append((k, alias))
                    return alias

                def __iter__(self):
                    return iter(hooks._params)

                def __len__(self) -> int:
                    return len(hooks._params)

            return View()

        def backward(self, loss_fn, *inputs, scale=1.0, retain=False):
            loss = loss_fn(self.model, *inputs)
            (loss * scale).backward(retain_graph=retain)
            for k, alias in self._reads:
                if alias.grad is not None:
                    self._params[k].grad = alias.grad.clone()  # set, not add
            return float(loss.detach())

        def compile(self, loss_fn):
            raise NotImplementedError("this mutant has no compiled runner")

    class LeakyStop(TorchTraining):
        """The stop-gradient primitive lets the gradient through."""

        def stop_gradient(self, x: Any) -> Any:
            return x * 1.0

        def no_grad_region(self, fn):
            return fn

    del torch
    return {"no_reset": NoReset, "set_not_add": SetNotAdd, "leaky_stop": LeakyStop}


def jax_mutants() -> dict[str, type]:
    import jax

    from gradcheck.engines.jax.training import JaxTraining

    class StaleJit(JaxTraining):
        """The compiled runner closes over the parameters it saw when compiled, so jit bakes them
        in as constants: rebinding the parameters has no effect."""

        def compile(self, loss_fn):
            frozen = dict(self._params)

            @jax.jit
            def grad_fn(*xs: Any) -> Any:
                return jax.grad(lambda p: loss_fn(self._view(p), *xs))(frozen)

            def run(*inputs: Any) -> dict[str, np.ndarray]:
                g = grad_fn(*inputs)
                return {k: np.asarray(g[k]).astype(np.float64) for k in self._params}

            return run

    class NaiveLowPrecisionNorm(JaxTraining):
        """Squares and sums gradients in their own dtype (float16 squares overflow above 256)."""

        def clip_grad_norm(self, max_norm: float) -> float:
            import jax.numpy as jnp

            norm = jnp.sqrt(sum(jnp.sum(g * g) for g in self._grads.values()))
            return float(norm)

    return {"stale_jit": StaleJit, "naive_norm": NaiveLowPrecisionNorm}


# -- clipping (NumPy: the cheapest engine to break) --------------------------------------------

class _ClipMutant(NumpyTraining):
    def _apply(self, coef_fn) -> float:
        g = {k: v.astype(np.float64) for k, v in self._grads.items()}
        with np.errstate(all="ignore"):
            norm = float(np.sqrt(sum(np.sum(v * v) for v in g.values())))
            self._grads = {k: coef_fn(v, norm).astype(self._np_dtype) for k, v in g.items()}
        return norm


class ElementwiseClip(_ClipMutant):
    """Clamps each element to [-max_norm, max_norm]: changes the direction."""

    def clip_grad_norm(self, max_norm: float) -> float:
        limit = validate_max_norm(max_norm)
        return self._apply(lambda v, n: np.clip(v, -limit, limit))


class UnitNormClip(_ClipMutant):
    """Normalizes to unit norm whatever the threshold."""

    def clip_grad_norm(self, max_norm: float) -> float:
        validate_max_norm(max_norm)
        return self._apply(lambda v, n: v / n)


class PostClipReport(NumpyTraining):
    """Clips correctly but returns the norm *after* clipping while documenting pre-clip."""

    def clip_grad_norm(self, max_norm: float) -> float:
        super().clip_grad_norm(max_norm)
        return float(np.sqrt(sum(np.sum(v.astype(np.float64) ** 2)
                                 for v in self._grads.values())))


class UnvalidatedClip(_ClipMutant):
    """Applies any threshold: a negative one reverses the gradient."""

    def clip_grad_norm(self, max_norm: float) -> float:
        return self._apply(lambda v, n: v * (max_norm / n) if not n < max_norm else v)


class SilentNonFinite(_ClipMutant):
    """Replaces non-finite gradient elements by zero and reports a finite norm."""

    def clip_grad_norm(self, max_norm: float) -> float:
        limit = validate_max_norm(max_norm)
        self._grads = {k: np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)
                       for k, v in self._grads.items()}
        return self._apply(lambda v, n: v * min(1.0, limit / n) if n else v)


class ScaleIgnoringBackward(NumpyTraining):
    """Ignores the loss scale (gradient of c*L is reported as grad L)."""

    def backward(self, loss_fn, *inputs, scale=1.0, retain=False):
        return super().backward(loss_fn, *inputs, scale=1.0, retain=retain)


def numpy_backend(hooks_cls: type) -> Backend:
    return backend_with(NumpyBackend, hooks_cls)
