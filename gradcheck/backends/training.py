"""The stateful training-hooks contract used by the semantic checks and the model audit.

Numeric checks see a function; training sees *state*: named parameters, gradients stored between
calls, a reset, a clip, an optimizer step.  :class:`TrainingHooks` is the small vocabulary the
semantic probes (:mod:`gradcheck.semantics.check`) and :func:`gradcheck.audit` speak to every
engine, with NumPy arrays at the boundary:

* parameters: :meth:`~TrainingHooks.create_parameters` (from NumPy, for probes) or
  :meth:`~TrainingHooks.adopt` (a user's model, named as the framework's own registry names it);
* :meth:`~TrainingHooks.backward` into *stored* gradients, :meth:`~TrainingHooks.gradients`,
  :meth:`~TrainingHooks.zero_grad`, :meth:`~TrainingHooks.clip_grad_norm` (returns the norm as
  the engine reports it), :meth:`~TrainingHooks.sgd_step`;
* :meth:`~TrainingHooks.stop_gradient` (the engine's primitive) and
  :meth:`~TrainingHooks.no_grad_region`;
* :meth:`~TrainingHooks.compile`: a taped/jitted/compiled gradient runner for re-run checks.

"Stored gradients" follow the engine: PyTorch adds into ``.grad``; JAX is functional, so its stored
gradients are whatever the user's step keeps, i.e. the arrays the *last* gradient call returned
(each call returns fresh ones).  The NumPy reference behaves like JAX with hand-derived gradients.

A loss is ``loss_fn(model, *inputs) -> scalar`` written for the engine, where ``model`` is what
holds the parameters in that engine's idiom (:attr:`TrainingHooks.model`: a ``dict`` of
parameters for created ones, the adopted ``nn.Module`` or pytree otherwise).  Probes that must
run on every engine write the loss once against an array namespace (``torch``, ``jax.numpy``,
``numpy``) through :meth:`TrainingHooks.make_loss`.

The torch and JAX implementations live in their own modules and are imported on first use
(``import gradcheck`` imports neither engine).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from gradcheck.backends.base import Backend, Semantics

Runner = Callable[..., dict[str, np.ndarray]]


@dataclass(frozen=True)
class ClipSemantics:
    """What an engine's clip-by-global-norm documents.

    ``reports``: which norm the clip returns, ``"pre_clip"`` (the norm before clipping, as
    ``torch.nn.utils.clip_grad_norm_`` documents) or ``"post_clip"``.  ``epsilon``: the constant
    added to the norm in the denominator of the clip coefficient (``max_norm / (norm + eps)``),
    so the clipped norm is ``max_norm * norm / (norm + eps)``.  ``source`` cites the definition.
    """

    reports: str = "pre_clip"
    epsilon: float = 0.0
    source: str = ""


@dataclass(frozen=True)
class NumpyLoss:
    """A loss for the NumPy reference hooks: ``value(params, *inputs) -> float`` and its
    hand-derived ``grad(params, *inputs) -> {name: array}`` (``params`` is a name -> array dict)."""

    value: Callable[..., Any]
    grad: Callable[..., Mapping[str, np.ndarray]]
    name: str = ""


@dataclass(frozen=True)
class CutPoint:
    """A place where a loss leaves the gradient graph: ``what`` (e.g. ``"host round trip:
    Tensor.item()"``), ``where`` (``file:line``), ``host`` (a host round trip rather than a
    detach / stop-gradient / no-grad region) and ``params``: the parameters upstream of the cut
    (empty where the engine cannot attribute it)."""

    what: str
    where: str
    host: bool = False
    params: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.what if self.where == "?" else f"{self.what} at {self.where}"


def validate_max_norm(max_norm: float) -> float:
    """Reject a negative or NaN clip threshold (a negative one would reverse the gradient)."""
    value = float(max_norm)
    if not value >= 0.0:  # also catches NaN
        raise ValueError(f"max_norm={max_norm!r} must be a number >= 0 (a negative threshold "
                         "would reverse the gradient; NaN would poison it)")
    return value


class TrainingHooks(ABC):
    """Stateful training operations of one engine on one device and dtype (see module doc)."""

    #: what :meth:`clip_grad_norm` returns and its epsilon: a class default that an instance may
    #: replace (the op-protocol hooks take their engine session's own)
    clip_semantics: ClipSemantics = ClipSemantics()
    #: the engine's own public clip functions (``module.qualname``) that :attr:`clip_semantics`
    #: documents: ``check_clip_function`` holds them to that definition
    own_clips: ClassVar[tuple[str, ...]] = ()
    #: how :meth:`compile` runs a gradient (shown in messages)
    runner_kind: ClassVar[str] = "plain call"
    #: False where the engine differentiates only op-protocol losses (:mod:`._training_ops`)
    python_losses: ClassVar[bool] = True

    def __init__(self, backend: Backend, device: str, dtype: str) -> None:
        self.backend = backend
        self.device = device
        self.dtype = dtype
        #: evaluate and differentiate losses through the engine's compiler where it has one
        #: (JAX: ``jax.jit``, falling back to eager for losses that cannot be traced).  The audit
        #: turns it on (one loss, evaluated many times); the probes leave it off (many one-off
        #: losses, whose primitives eager mode compiles once and caches).
        self.compile_losses = False
        #: when set, every evaluation of a user's loss, step or monitor runs under
        #: :func:`~gradcheck.backends._seeding.controlled_rng` with this seed (the audit sets it)
        self.rng_seed: int | None = None

    def seeded(self, offset: int = 0) -> Any:
        """The RNG context of one evaluation: identical seeds each time (:attr:`rng_seed`), or
        nothing where no seed is set."""
        if self.rng_seed is None:
            return nullcontext()
        from gradcheck.backends._seeding import controlled_rng

        return controlled_rng(self.rng_seed + offset)

    def snapshot(self) -> Any:
        """Everything an audit may change on the adopted model, to put back bitwise with
        :meth:`restore`: parameter values and stored gradients here; engines with buffers or
        modes (torch) add them."""
        return {k: v.copy() for k, v in self.parameter_values().items()}, self.gradients()

    def restore(self, snap: Any) -> None:
        """Put back a :meth:`snapshot`."""
        values, grads = snap
        self.assign(values)
        self.zero_grad()
        if any(g is not None for g in grads.values()):
            self.set_gradients({k: np.zeros(np.shape(values[k])) if g is None else g
                                for k, g in grads.items()})

    @property
    def name(self) -> str:
        """The backend's name."""
        return self.backend.name

    @property
    def semantics(self) -> Semantics:
        """What the backend declares (the probes measure it)."""
        return self.backend.semantics

    @property
    @abstractmethod
    def xp(self) -> Any:
        """The array namespace losses are written with (``torch``, ``jax.numpy``, ``numpy``)."""

    # -- parameters ------------------------------------------------------------------------
    @abstractmethod
    def create_parameters(self, values: Mapping[str, np.ndarray]) -> None:
        """Create trainable parameters named by ``values``' keys (in this dtype and device)."""

    @abstractmethod
    def adopt(self, model: Any) -> None:
        """Take over a user's model; parameters keep the framework's own registry names."""

    @property
    @abstractmethod
    def model(self) -> Any:
        """The object ``loss_fn`` receives: holds the current parameters in the engine's idiom."""

    @abstractmethod
    def parameter_names(self) -> tuple[str, ...]:
        """Registry names of every parameter, in registry order."""

    @abstractmethod
    def parameter_values(self) -> dict[str, np.ndarray]:
        """Current values as float64 NumPy copies."""

    @abstractmethod
    def assign(self, values: Mapping[str, np.ndarray]) -> None:
        """Rebind parameters to new values (in place where the engine mutates)."""

    def trainable(self, name: str) -> bool:
        """False where the engine marks the parameter frozen (``requires_grad=False``)."""
        return True

    # -- conversions -----------------------------------------------------------------------
    @abstractmethod
    def to_native(self, a: np.ndarray) -> Any:
        """A NumPy array as this engine's array (this dtype, this device)."""

    def cast_tree(self, obj: Any, dtype: str) -> Any:
        """``obj`` with every floating native array cast to ``dtype`` (tuples, lists, dicts)."""
        return obj

    def model_copy(self, dtype: str) -> Any:
        """A copy of the adopted model with floating parameters in ``dtype``."""
        raise NotImplementedError(f"{self.name} hooks cannot copy a model")

    # -- gradients -------------------------------------------------------------------------
    def make_loss(self, forward: Callable[..., Any],
                  grad: Callable[..., Mapping[str, np.ndarray]] | None = None) -> Callable:
        """A loss for this engine from ``forward(xp, model, *inputs)`` written against an array
        namespace.  ``grad`` (NumPy, hand-derived) is needed only by engines without AD."""
        xp = self.xp

        def loss(model: Any, *inputs: Any) -> Any:
            return forward(xp, model, *inputs)

        loss.__name__ = getattr(forward, "__name__", "loss")
        return loss

    @abstractmethod
    def loss_value(self, loss_fn: Callable, *inputs: Any) -> float:
        """The loss at the current parameters, without recording gradients."""

    def loss_batch(self, loss_fn: Callable, name: str, rows: np.ndarray, *inputs: Any
                   ) -> np.ndarray:
        """The loss with parameter ``name`` set to each of ``rows`` (shape ``(B, *shape)``), the
        others at their current values; the parameter is restored.  Engines that can vectorize
        override this (the finite differences of the audit call it)."""
        base = self.parameter_values()[name]
        out = np.empty(len(rows))
        try:
            for i, row in enumerate(rows):
                self.assign({name: row})
                out[i] = self.loss_value(loss_fn, *inputs)
        finally:
            self.assign({name: base})
        return out

    @abstractmethod
    def backward(self, loss_fn: Callable, *inputs: Any, scale: float = 1.0,
                 retain: bool = False) -> float:
        """Differentiate ``scale * loss`` into the stored gradients (the engine's way: added for
        accumulating engines, replaced for functional ones); return the unscaled loss.
        ``retain`` keeps the graph / pullback for :meth:`backward_again`."""

    @abstractmethod
    def backward_again(self) -> None:
        """Run the retained graph (pullback) of the last ``backward(retain=True)`` once more."""

    @abstractmethod
    def gradients(self) -> dict[str, np.ndarray | None]:
        """Stored gradients by parameter name (None where the engine stores none)."""

    @abstractmethod
    def set_gradients(self, values: Mapping[str, np.ndarray]) -> None:
        """Load stored gradients (as an optimizer would find them) in this dtype."""

    @abstractmethod
    def zero_grad(self) -> None:
        """Reset stored gradients the engine's usual way."""

    @abstractmethod
    def clip_grad_norm(self, max_norm: float) -> float:
        """Clip stored gradients by their global L2 norm; return the norm the engine reports
        (see :attr:`clip_semantics`)."""

    @abstractmethod
    def sgd_step(self, lr: float) -> None:
        """Plain SGD with the stored gradients: ``p -= lr * g``."""

    def evaluate_eagerly(self, loss_fn: Callable, *inputs: Any) -> Any:
        """``loss_fn(model, *inputs)`` called directly (no compilation, no gradient recording),
        under :meth:`seeded`: the audit records intent markers' concrete values this way."""
        with self.seeded():
            fn = getattr(loss_fn, "value", loss_fn)  # NumpyLoss: its value function
            return fn(self.model, *inputs)

    def monitor_argument(self) -> Any:
        """What a monitor written for a training loop reads after a backward: the model (torch:
        its ``.grad``) or, for functional engines, the stored gradients in the model's
        structure."""
        return self.model

    # -- stop points, runners, user steps --------------------------------------------------
    def stop_gradient(self, x: Any) -> Any:
        """The engine's stop-gradient primitive (``Semantics.stop_gradient`` names it)."""
        raise NotImplementedError(f"backend {self.name!r} declares no stop-gradient primitive")

    def no_grad_region(self, fn: Callable) -> Callable:
        """``fn`` run as the engine's no-gradient region (``torch.no_grad()``; JAX: the outputs
        pass through ``stop_gradient``)."""
        raise NotImplementedError(f"backend {self.name!r} has no no-gradient region")

    @abstractmethod
    def compile(self, loss_fn: Callable) -> Runner:
        """A re-runnable gradient function ``run(*inputs) -> {name: grad}`` at the *current*
        parameter values, built the engine's compiled way (:attr:`runner_kind`)."""

    @abstractmethod
    def run_user_step(self, step: Callable, *inputs: Any) -> None:
        """Run a user's training step on the current parameters and keep the result
        (mutating engines: ``step(model, *inputs)``; functional: ``params = step(model, ...)``)."""

    def find_cut_points(self, loss_fn: Callable, *inputs: Any) -> list[CutPoint]:
        """Places where the loss leaves the gradient graph (host round trips, detach, no-grad
        regions, stop-gradient); empty where the engine cannot trace them."""
        return []

    @property
    def views_inplace_loss(self) -> Callable[[Any, Any], Any] | None:
        """The fan-out probe's views-and-in-place loss ``loss(model, x)`` (``model["a"]`` a
        vector of 4, read through a product, a slice multiplied in place, an in-place add and a
        transposed view; :mod:`gradcheck.semantics.fanout`) spelled in this engine's idiom, or
        None where the engine has no such spelling (the probe is then skipped)."""
        return None

    def gradient_at_zeros(self, f: Callable[[list[Any]], Any], bases: Sequence[Any]
                          ) -> list[Any]:
        """The gradient of the scalar ``f(zs)`` at ``zs`` = zeros like each of ``bases`` (this
        engine's arrays): one array per base, zeros where ``f`` does not depend on it.  The
        model audit takes the cotangent reaching each marked value this way
        (:func:`gradcheck.model_audit.intent.capture_cotangents`); an engine without it raises
        ``NotImplementedError`` and those cotangents stay unset."""
        raise NotImplementedError(f"{self.name} hooks take no gradient at zeros")
