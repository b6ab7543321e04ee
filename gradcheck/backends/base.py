"""The adapter contract every backend implements.

An adapter wraps one autodiff engine.  The harness talks to it with NumPy arrays at the boundary
(``args`` arrive already cast to the dtype under test) and the adapter converts to and from its
own arrays on the requested device.  ``fn`` is always a function written *for that engine*: it
takes the engine's arrays and returns one array or a tuple of arrays (the torch and jax adapters
also take dicts, nested lists/tuples and pytrees: they flatten the output and name each leaf by
its path, :func:`flatten_outputs`; an adapter whose :meth:`Backend.evaluate` returns
:class:`Outputs` with ``paths`` gets results naming outputs that way).

Required: :meth:`Backend.version`, :meth:`Backend.devices`, :meth:`Backend.evaluate`,
:meth:`Backend.vjp`.  Optional (declared by class attributes): :meth:`Backend.jvp`
(``supports_jvp``), :meth:`Backend.vjp_function` / :meth:`Backend.jvp_function` for order 2
(``supports_order2``), batched evaluation (:meth:`Backend.evaluate_batch` falls back to a loop),
alternative derivative paths (:meth:`Backend.alternative_vjps`), batched derivatives
(:meth:`Backend.vjp_batch`, :meth:`Backend.jvp_batch`, :meth:`Backend.alternative_vjps_batch`,
which fall back to loops) and the stateful training hooks used by the semantic checks
(:meth:`Backend.training`).

Semantics are *declared* (:class:`Semantics`) and *measured* by the semantic checks.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from gradcheck.core import pytree

# the dtype helpers live in gradcheck.core.dtypes; still importable from here (adapters use them)
from gradcheck.core.dtypes import float_bits, is_complex, is_floating, widest_dtype  # noqa: F401


class Accumulation(str, enum.Enum):
    """What a second backward pass without a reset does to stored gradients."""

    ACCUMULATE = "accumulate"  # adds into stored gradients (PyTorch .grad, tinygrad)
    FUNCTIONAL = "functional"  # returns fresh gradients each time (JAX, Candle GradStore)


@dataclass(frozen=True)
class Semantics:
    """Training-step behaviour a backend declares; the semantic checks measure it."""

    accumulation: Accumulation
    stop_gradient: str | None  # name of the primitive, e.g. "detach", "stop_gradient"
    forward_mode_respects_no_grad: bool = True
    notes: str = ""


class Backend(ABC):
    """Base class of an autodiff adapter.  Subclass it and register it (see docs/adapters.md)."""

    name: ClassVar[str] = "abstract"
    semantics: ClassVar[Semantics] = Semantics(Accumulation.FUNCTIONAL, None)
    supports_jvp: ClassVar[bool] = False
    supports_order2: ClassVar[bool] = False
    #: whether :meth:`vjp_batch` returns :class:`Gradients` with the outputs of its forward
    #: pass (the default check then takes its determinism check's second evaluation from it)
    vjp_gives_primal: ClassVar[bool] = False
    dtypes: ClassVar[tuple[str, ...]] = ("float64", "float32")
    #: check kind (its value, e.g. ``"jvp_of_jvp"``) -> what an AD value of exactly 0 in a
    #: failed check of that kind may mean on this engine (a known silent zero), shown in the
    #: failure (``details["hint"]``)
    zero_hints: ClassVar[dict[str, str]] = {}
    # the engine's documented convention for the derivatives of complex functions, in words
    # (shown in every result of a check with complex inputs or outputs); None: the adapter
    # does not check complex functions (docs/complex.md)
    complex_convention: ClassVar[str | None] = None

    # -- identity ---------------------------------------------------------------------------
    @abstractmethod
    def version(self) -> str:
        """Version string of the wrapped engine."""

    @abstractmethod
    def devices(self) -> list[str]:
        """Devices usable right now, e.g. ``["cpu"]`` or ``["cpu", "cuda"]``."""

    def native_to_numpy(self, value: Any) -> np.ndarray | None:
        """Convert one of the engine's arrays to NumPy, or return None if ``value`` is not one."""
        return None

    def tree_flatten(self, value: Any) -> tuple[list[tuple[str, Any]], pytree.Rebuild, Any]:
        """A nested input or output (a pytree) as ``(path, leaf)`` pairs, a function that
        rebuilds the structure from new leaves, and a hashable description of the structure.

        Paths are written ``['w']``, ``[0]``, ``.field``.  The default is gradcheck's own
        flattener (:mod:`gradcheck.core.pytree`: dicts, lists, tuples, NamedTuples,
        dataclasses); an engine with a pytree utility overrides it with that one, so that the
        containers registered with the engine flatten as the engine flattens them."""
        return pytree.flatten(value)

    def array_namespace(self) -> Any:  # pragma: no cover - documentation hook
        """The module whose functions ``fn`` is written with (used by op catalogs)."""
        return None

    def op(self, name: str) -> Callable | None:
        """This engine's implementation of catalog op ``name``, or None if it lacks it (the
        suites then skip the op with a reason)."""
        return None

    def oracle_forward(self, fn: Callable) -> Callable | None:
        """A NumPy float64 forward of ``fn`` for the finite-difference oracle.

        Only consulted for engines that cannot compute in float64 (``"float64"`` not in
        :attr:`dtypes`, e.g. TensorFlow.js): finite differences of a float32 function are not
        a reliable oracle, so such an engine's derivatives are compared against FD of this
        float64 forward, with a rounding bound in the engine's widest dtype.  None (the
        default): the checks are skipped with that reason for such an engine.
        """
        return None

    # -- calculus (NumPy in, NumPy out) -----------------------------------------------------
    @abstractmethod
    def evaluate(self, fn: Callable, args: Sequence[np.ndarray], device: str) -> list[np.ndarray]:
        """Call ``fn`` on ``args`` placed on ``device``; return every output as NumPy."""

    def evaluate_batch(
        self, fn: Callable, args: Sequence[np.ndarray], batched: Sequence[bool], device: str
    ) -> list[np.ndarray]:
        """Evaluate ``fn`` for a batch: ``args[k]`` has a leading batch axis where ``batched[k]``.

        Returns each output stacked along a new leading axis.  The default loops; engines with
        ``vmap`` override it.
        """
        size = next(len(a) for a, b in zip(args, batched, strict=True) if b)
        pairs = list(zip(args, batched, strict=True))
        rows = [self.evaluate(fn, [a[i] if b else a for a, b in pairs], device)
                for i in range(size)]
        return [np.stack([r[k] for r in rows]) for k in range(len(rows[0]))]

    @abstractmethod
    def vjp(
        self,
        fn: Callable,
        args: Sequence[np.ndarray],
        diff: Sequence[int],
        cotangents: Sequence[np.ndarray],
        device: str,
    ) -> list[np.ndarray]:
        """Reverse mode: ``J^T v`` for each input index in ``diff`` (zeros where unconnected)."""

    def jvp(
        self,
        fn: Callable,
        args: Sequence[np.ndarray],
        diff: Sequence[int],
        tangents: Sequence[np.ndarray],
        device: str,
    ) -> list[np.ndarray]:
        """Forward mode: ``J u`` for every output, with ``tangents`` for the inputs in ``diff``."""
        raise NotImplementedError(f"backend {self.name!r} has no forward mode")

    def supports_order2_for(self, fn: Callable) -> bool:
        """Whether :meth:`vjp_function` works for ``fn`` (then the order-2 checks run on it).

        The class-wide :attr:`supports_order2` unless an adapter's order-2 support depends on
        how ``fn`` was written (numpy: only a :class:`~gradcheck.NumpyFunction` whose ``vjp`` is
        itself one carries second-order rules); where it returns False, :meth:`vjp_function`
        must raise ``NotImplementedError`` (the conformance kit checks both ways)."""
        return self.supports_order2

    def vjp_function(self, fn: Callable, diff: Sequence[int], n_args: int) -> Callable:
        """A function ``g(*args, *cotangents) -> tuple(J^T v)`` written for this engine that the
        engine can differentiate again (order 2)."""
        raise NotImplementedError(f"backend {self.name!r} has no order-2 support")

    def jvp_function(self, fn: Callable, diff: Sequence[int], n_args: int) -> Callable:
        """A function ``g(*args, *tangents) -> tuple(J u)`` differentiable again (order 2)."""
        raise NotImplementedError(f"backend {self.name!r} has no order-2 support")

    def alternative_vjps(
        self,
        fn: Callable,
        args: Sequence[np.ndarray],
        diff: Sequence[int],
        cotangents: Sequence[np.ndarray],
        device: str,
    ) -> dict[str, list[np.ndarray]]:
        """Other reverse-mode paths of the same engine (e.g. eager ``.backward()``), by name.

        Each must agree with :meth:`vjp` up to rounding; the EAGER_FUNC check compares them.
        """
        return {}

    # -- batched derivatives (performance hooks; the defaults loop) ---------------------------
    def vjp_batch(
        self,
        fn: Callable,
        args: Sequence[np.ndarray],
        diff: Sequence[int],
        cotangents: Sequence[np.ndarray],
        device: str,
        vectorize: bool = False,
    ) -> list[np.ndarray]:
        """:meth:`vjp` for ``B`` cotangents at once: ``cotangents[k]`` has a leading axis of
        length ``B``; returns, for each input in ``diff``, the ``B`` gradients stacked along a
        leading axis.  The default loops over :meth:`vjp`.

        With ``vectorize=False`` every row must come from the very path :meth:`vjp` takes (an
        engine may share one forward pass between the rows); the projected checks use this,
        so that a failure is the rule's, not a batching rule's (``vmap`` of PyTorch's
        ``cdist`` pullback is wrong for every row but the first).  ``vectorize=True`` allows
        the engine's ``vmap`` over the rows: for the many unit cotangents of a localization.
        An adapter may return a :class:`Gradients` with the outputs of the forward pass it
        differentiated (the determinism check then needs no evaluation of its own)."""
        rows = [self.vjp(fn, args, diff, [c[b] for c in cotangents], device)
                for b in range(len(cotangents[0]))]
        return _stack_rows(rows, len(diff))

    def jvp_batch(
        self,
        fn: Callable,
        args: Sequence[np.ndarray],
        diff: Sequence[int],
        tangents: Sequence[np.ndarray],
        device: str,
        vectorize: bool = False,
    ) -> list[np.ndarray]:
        """:meth:`jvp` for ``B`` tangents at once (leading axis ``B`` on each tangent); returns
        every output's ``B`` tangents stacked.  The default loops over :meth:`jvp`;
        ``vectorize`` as in :meth:`vjp_batch`."""
        rows = [self.jvp(fn, args, diff, [t[b] for t in tangents], device)
                for b in range(len(tangents[0]))]
        return _stack_rows(rows, len(rows[0]) if rows else 0)

    def alternative_vjps_batch(
        self,
        fn: Callable,
        args: Sequence[np.ndarray],
        diff: Sequence[int],
        cotangents: Sequence[np.ndarray],
        device: str,
    ) -> dict[str, list[np.ndarray]]:
        """:meth:`alternative_vjps` for ``B`` cotangents at once, stacked like
        :meth:`vjp_batch` (never vectorized: each row comes from the alternative path
        itself).  The default loops over :meth:`alternative_vjps`."""
        rows = [self.alternative_vjps(fn, args, diff, [c[b] for c in cotangents], device)
                for b in range(len(cotangents[0]))]
        if not rows or not rows[0]:
            return {}
        return {name: _stack_rows([r[name] for r in rows], len(diff)) for name in rows[0]}

    def user_function(self, fn: Callable) -> Callable:
        """Wrap a user's function so that it runs as this adapter runs its own (JAX: with 64-bit
        mode on, the caller's setting restored afterwards).  The default returns ``fn``: the
        utilities checks and the model audit call a user's helper through this."""
        return fn

    def trace_kernels(self, run: Callable[[], Any]) -> Any:
        """Call ``run()`` (which calls this adapter's :meth:`evaluate`, :meth:`vjp` or
        :meth:`jvp`) and return a :class:`gradcheck.backends.kernels.KernelTrace` of the
        elementwise kernels it ran with floating outputs below float64, or ``None`` where this
        adapter cannot trace its engine's kernels (the default: then ``check`` does not judge
        kernels one by one, docs/error-model.md section 4c, class d)."""
        return None

    # -- stateful training hooks (semantic checks) -----------------------------------------
    def training(self, device: str, dtype: str) -> Any:
        """Return a :class:`gradcheck.backends.training.TrainingHooks` for this engine, or raise
        ``NotImplementedError`` if the engine has no stateful training API."""
        raise NotImplementedError(f"backend {self.name!r} declares no training hooks")

    def __repr__(self) -> str:
        return f"<gradcheck backend {self.name!r}>"


class Outputs(list):
    """The outputs of one evaluation, flattened; ``paths`` names each by its place in the
    function's output structure (``"['a']"``, ``"['b'][0]"``) where that structure is more than
    one array or a flat tuple of arrays (None otherwise: outputs are named by position)."""

    paths: tuple[str, ...] | None = None

    @classmethod
    def of(cls, leaves: Sequence[Any], paths: Sequence[str] | None) -> Outputs:
        out = cls(leaves)
        out.paths = None if paths is None else tuple(paths)
        return out


class Gradients(list):
    """What :meth:`Backend.vjp_batch` may return instead of a plain list (optional): the
    gradients, and in ``primal`` the function's outputs at the point as the forward pass that
    was differentiated computed them (flattened like :meth:`Backend.evaluate`'s), or None.

    The check uses ``primal`` as a second evaluation of ``f`` at the point for its
    determinism check (``docs/error-model.md`` 3b) instead of evaluating ``f`` once more; an
    adapter gives it only where that forward pass is an evaluation of ``f`` itself at the
    point (not a cached or compiled variant of it that may round differently: then the check
    falls back to evaluating ``f`` again where the two differ)."""

    primal: list[Any] | None = None

    @classmethod
    def of(cls, grads: Sequence[Any], primal: Sequence[Any] | None) -> Gradients:
        out = cls(grads)
        out.primal = None if primal is None else list(primal)
        return out


def flatten_outputs(out: Any) -> tuple[list[Any], tuple[str, ...] | None]:
    """A function's output as a flat list of leaves, depth first, with their paths: dicts (in
    insertion order), lists and tuples nest; anything else is a leaf.  Paths are None where the
    output is one leaf or a flat tuple/list (see :class:`Outputs`)."""
    if not isinstance(out, (dict, list, tuple)):
        return [out], None
    leaves: list[Any] = []
    paths: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}[{key!r}]")
        elif isinstance(node, (list, tuple)):
            for k, value in enumerate(node):
                walk(value, f"{path}[{k}]")
        else:
            leaves.append(node)
            paths.append(path)

    walk(out, "")
    flat = not isinstance(out, dict) and not any(isinstance(v, (dict, list, tuple)) for v in out)
    return leaves, None if flat else tuple(paths)


def _stack_rows(rows: Sequence[Sequence[Any]], width: int) -> list[np.ndarray]:
    """``rows[b][k]`` -> ``[stack_b rows[b][k] for k]``, every array a row returned (``width``
    is what a row should hold: a row holding more or fewer arrays is stacked as it came, for
    the adapter boundary to report, never cut to ``width``)."""
    rows = [list(r) for r in rows]
    widths = sorted({len(r) for r in rows})
    if len(widths) > 1:
        raise ValueError(f"the rows returned {widths} arrays (expected {width} each)")
    return [np.stack([np.asarray(r[k]) for r in rows]) for k in range(widths[0] if rows else 0)]
