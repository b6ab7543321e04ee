"""PyTorch adapter: ``torch.func`` (functional vjp/jvp/vmap) plus the eager ``.backward()`` path.

Imported only when the ``torch`` backend is asked for; ``import gradcheck`` never imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from gradcheck.backends._cache import FunctionCache, missing
from gradcheck.backends.base import (
    Accumulation,
    Backend,
    Gradients,
    Outputs,
    Semantics,
    flatten_outputs,
)
from gradcheck.core import pytree

_DEVICE_NAMES = {"cpu": "cpu", "cuda": "cuda", "gpu": "cuda"}


def _as_tuple(out: Any) -> tuple[Any, ...]:
    """The outputs flattened (dicts, lists and tuples nest: :func:`flatten_outputs`)."""
    return tuple(flatten_outputs(out)[0])


_UNSUPPORTED = ("setup_context", "jvp", "not implemented", "forward AD", "forward-mode",
                "functorch transform")


def _stack_rows(rows: Any, count: int) -> list[Any]:
    """``torch.stack`` of each position of ``count`` rows (tuples of tensors, ``None`` where
    the first row has ``None``), consumed one row at a time: each row is copied into the
    result and dropped before the next is computed (``torch.stack`` of a list holds every row
    and the result at once: twice the memory of the result), and one row is a view."""
    it = iter(rows)
    row = next(it)
    if count == 1:
        return [None if t is None else t.unsqueeze(0) for t in row]
    out = [None if t is None else t.new_empty((count,) + tuple(t.shape)) for t in row]
    for b in range(count):
        if b:
            row = next(it)  # the previous row is dropped here
        for o, t in zip(out, row, strict=True):
            if o is not None:
                if t is None or t.shape != o.shape[1:]:  # as torch.stack would refuse it
                    raise RuntimeError(f"row {b} has shape {None if t is None else t.shape}, "
                                       f"row 0 {tuple(o.shape[1:])}")
                o[b].copy_(t)
    return out


def _raise_if_unsupported(exc: RuntimeError, what: str) -> None:
    """Turn torch's "this function does not support X" errors into NotImplementedError (a skip)."""
    text = str(exc)
    if any(key in text for key in _UNSUPPORTED):
        raise NotImplementedError(f"{what} is not available for this function: "
                                  f"{text.splitlines()[0]}") from exc


def _differentiable(t: Any) -> bool:
    return not isinstance(t, torch.Tensor) or t.is_floating_point() or t.is_complex()


def _differentiable_part(g: Callable) -> tuple[Callable, list[int]]:
    """``g`` returning only its floating (and complex) outputs, and the indices of those in
    ``g``'s outputs (filled by the first call): ``torch.func.vjp`` refuses a function with an
    integer or boolean output (an argmax, a mask), which has no derivative."""
    kept: list[int] = []

    def h(*xs: torch.Tensor) -> tuple[Any, ...]:
        outs = g(*xs)
        kept[:] = [k for k, o in enumerate(outs) if _differentiable(o)]
        return tuple(outs[k] for k in kept)

    return h, kept


def _tape_vjp(fn: Callable, args: list, diff: Sequence[int], cts: Sequence) -> tuple:
    with torch.enable_grad():
        for k in diff:
            if not args[k].requires_grad:
                args[k] = args[k].detach().requires_grad_(True)
        outs = _as_tuple(fn(*args))
        pairs = [(o, c) for o, c in zip(outs, cts, strict=True) if o.requires_grad]
        grads = torch.autograd.grad([p[0] for p in pairs], [args[k] for k in diff],
                                    [p[1] for p in pairs], create_graph=True, allow_unused=True)
    return tuple(torch.zeros_like(args[k]) if gr is None else gr
                 for k, gr in zip(diff, grads, strict=True))


class TorchBackend(Backend):
    """PyTorch: reverse mode through the autograd tape (``torch.autograd.grad``) cross-checked
    against ``torch.func.vjp``; forward mode through ``torch.func.jvp``; order 2 by composing
    them (``create_graph=True``)."""

    name = "torch"
    semantics = Semantics(
        Accumulation.ACCUMULATE,
        stop_gradient="detach",
        forward_mode_respects_no_grad=False,
        notes=".backward() adds into .grad; zero_grad() resets; forward AD ignores no_grad",
    )
    supports_jvp = True
    supports_order2 = True
    vjp_gives_primal = True  # vjp_batch: the taped forward's outputs (Gradients.primal)
    zero_hints: ClassVar[dict[str, str]] = {"jvp_of_jvp": (
        "forward mode gave exactly 0: torch returns zeros, without an error, for the "
        "forward-mode derivative of a torch.autograd.Function's jvp staticmethod (forward over "
        "forward does not differentiate it). If fn uses an autograd.Function with a jvp, this "
        "0 is torch's and says nothing about your rule: check its order 2 with "
        "modes=(\"rev\",) (VJP of VJP)")}
    dtypes = ("float64", "float32", "float16", "bfloat16")
    complex_convention = (
        "torch (conjugate Wirtinger): for a real loss L of z = x + iy the gradient torch "
        "returns is dL/dx + i dL/dy (2 dL/dconj(z)), and a backward maps an output's gradient "
        "g to g * conj(df/dz) + conj(g) * df/dconj(z)")

    def version(self) -> str:
        return str(torch.__version__)

    def tree_flatten(self, value: Any) -> tuple[list[tuple[str, Any]], Any, Any]:
        """``torch.utils._pytree``'s flattening (the containers registered with torch
        included); gradcheck's own where torch leaves a container (a plain dataclass) as a
        leaf."""
        from torch.utils import _pytree

        pairs, spec = _pytree.tree_flatten_with_path(value)
        if any(pytree.is_container(leaf) for _, leaf in pairs):
            return pytree.flatten(value)
        return ([(_pytree.keystr(path), leaf) for path, leaf in pairs],
                lambda leaves: _pytree.tree_unflatten(list(leaves), spec), spec)

    def devices(self) -> list[str]:
        out = ["cpu"]
        if torch.cuda.is_available():
            out.append("cuda")
        return out

    def native_to_numpy(self, value: Any) -> np.ndarray | None:
        if isinstance(value, torch.Tensor):
            if value._is_zerotensor():  # efficient zeros (e.g. abs'' ) refuse .numpy()
                value = torch.zeros(value.shape, dtype=value.dtype)
            t = value.detach().cpu().resolve_conj().resolve_neg()  # lazy conj/neg views
            if t.dtype == torch.bfloat16:  # as ml_dtypes' bfloat16 (exact), so that the dtype
                import ml_dtypes  # under test is inferred as bfloat16

                return t.float().numpy().astype(ml_dtypes.bfloat16)
            return t.numpy()
        return None

    def array_namespace(self) -> Any:
        return torch

    def op(self, name: str) -> Callable | None:
        """Catalog op ``name`` written for torch (``gradcheck.engines.torch.ops``)."""
        from gradcheck.engines.torch.ops import get_op

        return get_op(name)

    # -- conversions ------------------------------------------------------------------------
    def _dev(self, device: str) -> torch.device:
        return torch.device(_DEVICE_NAMES.get(device, device))

    def to_native(self, a: np.ndarray, device: str) -> torch.Tensor:
        a = np.asarray(a)
        if a.dtype.name == "bfloat16":  # ml_dtypes' bfloat16: torch cannot read it directly
            return torch.as_tensor(a.astype(np.float32), device=self._dev(device)).to(
                torch.bfloat16)
        # (ascontiguousarray alone would turn a 0-d array into shape (1,))
        return torch.as_tensor(np.ascontiguousarray(a).reshape(a.shape), device=self._dev(device))

    def _to_np(self, t: Any) -> np.ndarray:
        if isinstance(t, torch.Tensor):  # results keep the dtype under test, bfloat16 included
            return self.native_to_numpy(t)  # type: ignore[return-value]
        return np.asarray(t)

    # -- calculus ---------------------------------------------------------------------------
    def evaluate(self, fn: Callable, args: Sequence[np.ndarray], device: str) -> list[np.ndarray]:
        with torch.no_grad():
            out = fn(*[self.to_native(a, device) for a in args])
        leaves, paths = flatten_outputs(out)
        return Outputs.of([self._to_np(o) for o in leaves], paths)

    def __init__(self) -> None:
        # functions known not to vectorize, per transform: later checks go straight to the loop
        self._no_vmap = FunctionCache()
        # (function, which arguments are batched) whose vmapped evaluation was verified
        self._vmap_checked = FunctionCache()

    def _vectorized(self, fn: Callable, what: str, batched: Callable, loop: Callable) -> Any:
        """``batched()`` unless it failed for ``fn`` before; on failure remember and ``loop()``."""
        if missing(self._no_vmap.peek(fn, what)):
            try:
                return batched()
            except Exception:  # not vmappable (data-dependent control flow, .item(), ...)
                self._no_vmap.put(fn, what, True)
        return loop()

    def evaluate_batch(self, fn, args, batched, device):
        def vectorized():
            targs = [self.to_native(a, device) for a in args]
            in_dims = tuple(0 if b else None for b in batched)
            with torch.no_grad():
                out = torch.func.vmap(fn, in_dims=in_dims)(*targs)
            rows = [self._to_np(o) for o in _as_tuple(out)]
            size = next(len(a) for a, b in zip(args, batched, strict=True) if b)
            if size > 1 and missing(self._vmap_checked.peek(fn, tuple(batched))):
                self._check_vmap_row(fn, args, batched, device, rows)
            return rows

        return self._vectorized(fn, "evaluate", vectorized,
                                lambda: super(TorchBackend, self).evaluate_batch(
                                    fn, args, batched, device))

    def _check_vmap_row(self, fn: Callable, args: Sequence[np.ndarray], batched: Sequence[bool],
                        device: str, rows: list[np.ndarray]) -> None:
        """The first vmapped evaluation of ``fn`` over several rows, per pattern of batched
        arguments, must reproduce ``fn`` at its first row; if it does not (beyond rounding),
        raise so that :meth:`_vectorized` loops from then on.

        A batching rule can be wrong: ``torch.vmap`` of ``index_fill`` with a batched
        ``value`` returns the last row's value in every row (torch 2.13), which made the
        finite differences of such a function 0.  The comparison is a sanity bound for such
        gross errors (``1e-6`` relative to the row's largest element), not an accuracy claim:
        vmapped kernels may round differently."""
        one = self.evaluate(fn, [a[0] if b else a for a, b in zip(args, batched, strict=True)],
                            device)
        for got, want in zip(rows, one, strict=True):
            got, want = _as_number_array(got[0]), _as_number_array(want)
            finite = np.isfinite(want)
            scale = float(np.max(np.abs(want[finite]), initial=0.0))
            if got.shape != want.shape or not np.array_equal(np.isfinite(got), finite) or \
                    np.any(np.abs(got[finite] - want[finite]) > 1e-6 * scale):
                raise ValueError("torch.vmap changed the function's values at the first row")
        self._vmap_checked.put(fn, tuple(batched), True)

    def _partial(self, fn: Callable, targs: list[torch.Tensor], diff: Sequence[int]) -> Callable:
        def g(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            full = list(targs)
            for k, x in zip(diff, xs, strict=True):
                full[k] = x
            return _as_tuple(fn(*full))

        return g

    def _taped_forward(self, fn, args, diff, cotangents, device, keep=False):
        """One forward pass recording the tape: the fresh leaves of the ``diff`` inputs, and
        (output, cotangent) for every output that depends on them; with ``keep``, also every
        output (detached)."""
        targs = [self.to_native(a, device) for a in args]
        leaves = []
        for k in diff:
            targs[k] = targs[k].detach().clone().requires_grad_(True)
            leaves.append(targs[k])
        outs = _as_tuple(fn(*targs))
        pairs = [(o, self.to_native(c, device).to(o.dtype))
                 for o, c in zip(outs, cotangents, strict=True)
                 if isinstance(o, torch.Tensor) and o.requires_grad]
        if keep:
            return leaves, pairs, [o.detach() if isinstance(o, torch.Tensor) else o
                                   for o in outs]
        return leaves, pairs

    def vjp(self, fn, args, diff, cotangents, device):
        """Tape-based reverse mode (``torch.autograd.grad``): works for every function, including
        old-style ``autograd.Function`` subclasses without ``setup_context``."""
        leaves, pairs = self._taped_forward(fn, args, diff, cotangents, device)
        if not pairs:
            return [np.zeros(args[k].shape, dtype=args[k].dtype) for k in diff]
        grads = torch.autograd.grad([p[0] for p in pairs], leaves, [p[1] for p in pairs],
                                    allow_unused=True)
        return [self._to_np(g) if g is not None else np.zeros(args[k].shape, dtype=args[k].dtype)
                for k, g in zip(diff, grads, strict=True)]

    def vjp_batch(self, fn, args, diff, cotangents, device, vectorize=False):
        """One forward pass, then one tape backward per cotangent on the retained graph; with
        ``vectorize`` all ``B`` at once (``autograd.grad(is_grads_batched=True)``, a vmap over
        the backward pass) where the backward vectorizes."""
        leaves, pairs, outs = self._taped_forward(fn, args, diff, cotangents, device,
                                                  keep=True)
        # the outputs of this forward pass: f evaluated at the point once more (with the
        # tape recording), which the determinism check reads instead of evaluating f again
        primal = [self._to_np(o) for o in outs]
        del outs
        B = len(cotangents[0])
        if not pairs:
            return Gradients.of([np.zeros((B,) + args[k].shape, dtype=args[k].dtype)
                                 for k in diff], primal)
        outs_, cts = [p[0] for p in pairs], [p[1] for p in pairs]

        def batched():
            return torch.autograd.grad(outs_, leaves, cts, allow_unused=True, retain_graph=True,
                                       is_grads_batched=True)

        def loop():
            return _stack_rows((torch.autograd.grad(outs_, leaves, [c[b] for c in cts],
                                                    allow_unused=True, retain_graph=True)
                                for b in range(B)), B)

        grads = self._vectorized(fn, "vjp", batched, loop) if vectorize else loop()
        return Gradients.of([self._to_np(g) if g is not None
                             else np.zeros((B,) + args[k].shape, dtype=args[k].dtype)
                             for k, g in zip(diff, grads, strict=True)], primal)

    def jvp_batch(self, fn, args, diff, tangents, device, vectorize=False):
        """``torch.func.jvp`` per tangent; with ``vectorize`` vmapped over the ``B`` tangents
        (a loop where it cannot be)."""
        targs = [self.to_native(a, device) for a in args]
        g = self._partial(fn, targs, diff)
        primals = tuple(targs[k] for k in diff)
        tans = tuple(self.to_native(t, device).to(p.dtype)
                     for t, p in zip(tangents, primals, strict=True))

        def one(*t: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return _as_tuple(torch.func.jvp(g, primals, t)[1])

        def loop():
            return _stack_rows((one(*[t[b] for t in tans]) for b in range(len(tangents[0]))),
                               len(tangents[0]))

        try:
            out = (self._vectorized(fn, "jvp", lambda: torch.func.vmap(one)(*tans), loop)
                   if vectorize else loop())
        except RuntimeError as exc:
            _raise_if_unsupported(exc, "forward mode")
            raise
        return [self._to_np(o) for o in _as_tuple(out)]

    def jvp(self, fn, args, diff, tangents, device):
        targs = [self.to_native(a, device) for a in args]
        g = self._partial(fn, targs, diff)
        primals = tuple(targs[k] for k in diff)
        tans = tuple(self.to_native(t, device).to(p.dtype) for t, p in zip(tangents, primals,
                                                                           strict=True))
        try:
            _, out_t = torch.func.jvp(g, primals, tans)
        except RuntimeError as exc:
            _raise_if_unsupported(exc, "forward mode")
            raise
        return [self._to_np(o) for o in _as_tuple(out_t)]

    def alternative_vjps(self, fn, args, diff, cotangents, device):
        """The functional path, ``torch.func.vjp``, which must agree with the tape."""
        targs = [self.to_native(a, device) for a in args]
        g, kept = _differentiable_part(self._partial(fn, targs, diff))
        try:
            outs, pullback = torch.func.vjp(g, *[targs[k] for k in diff])
        except RuntimeError as exc:
            _raise_if_unsupported(exc, "torch.func.vjp")
            raise
        cts = tuple(self.to_native(cotangents[k], device).to(o.dtype)
                    for k, o in zip(kept, outs, strict=True))
        return {"torch.func.vjp": [self._to_np(r) for r in pullback(cts)]}

    def alternative_vjps_batch(self, fn, args, diff, cotangents, device):
        """``torch.func.vjp``: one forward pass, its pullback applied to each cotangent (not
        vmapped: see :meth:`Backend.vjp_batch`)."""
        targs = [self.to_native(a, device) for a in args]
        g, kept = _differentiable_part(self._partial(fn, targs, diff))
        try:
            outs, pullback = torch.func.vjp(g, *[targs[k] for k in diff])
        except RuntimeError as exc:
            _raise_if_unsupported(exc, "torch.func.vjp")
            raise
        cts = tuple(self.to_native(cotangents[k], device).to(o.dtype)
                    for k, o in zip(kept, outs, strict=True))

        def loop():
            return _stack_rows((pullback(tuple(c[b] for c in cts))
                                for b in range(len(cotangents[0]))), len(cotangents[0]))

        return {"torch.func.vjp": [self._to_np(r) for r in loop()]}

    def vjp_function(self, fn, diff, n_args):
        """``torch.func.vjp`` (composes with every transform); old-style ``autograd.Function``
        subclasses fall back to ``autograd.grad(create_graph=True)``, which composes with the
        tape but not with ``torch.func`` transforms."""

        def g(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            args, cts = list(xs[:n_args]), xs[n_args:]
            h, kept = _differentiable_part(self._partial(fn, args, diff))
            try:
                _, pullback = torch.func.vjp(h, *[args[k] for k in diff])  # type: ignore[misc]
            except RuntimeError as exc:
                if "setup_context" not in str(exc):
                    raise
                return _tape_vjp(fn, args, diff, cts)
            return tuple(pullback(tuple(cts[k] for k in kept)))

        return g

    def jvp_function(self, fn, diff, n_args):
        def g(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            args, tans = list(xs[:n_args]), xs[n_args:]
            h = self._partial(fn, args, diff)
            try:
                _, out_t = torch.func.jvp(  # type: ignore[misc]  # no has_aux: a pair
                    h, tuple(args[k] for k in diff), tuple(tans))
            except RuntimeError as exc:
                _raise_if_unsupported(exc, "forward mode")
                raise
            return _as_tuple(out_t)

        return g

    def trace_kernels(self, run: Callable[[], Any]) -> Any:
        """Every pointwise aten kernel ``run()`` calls below float64, judged against float64
        (:mod:`gradcheck.engines.torch.kernels`)."""
        from gradcheck.engines.torch.kernels import trace

        return trace(run)

    def training(self, device: str, dtype: str) -> Any:
        from gradcheck.engines.torch.training import TorchTraining

        return TorchTraining(self, device, dtype)


def _as_number_array(a: Any) -> np.ndarray:
    """``a`` as float64 (complex128 if complex): bool, integer and bfloat16 outputs compare."""
    return np.asarray(a, dtype=np.complex128 if np.iscomplexobj(a) else np.float64)
