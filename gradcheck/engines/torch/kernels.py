"""Tracing torch's elementwise kernels (the adapter's ``trace_kernels``,
:mod:`gradcheck.backends.kernels`).

A ``TorchDispatchMode`` sees every aten op the traced call runs, the backward pass's included
(and forward mode's, ``torch.func.jvp``).  Each op tagged ``torch.Tag.pointwise`` (a custom op
declared with that tag included) with a floating output below float64 is run again in float64 on
its inputs upcast (exactly: float32 holds every float16 and bfloat16 value), after the op's own
call; its partial derivatives come from two more float64 runs per floating input at
``x (1 +- 2^-20)``.  Ops whose meaning depends on the dtype (``nextafter``, ``nan_to_num``'s
dtype-wide defaults), random ops and ``out=`` variants are not traced as kernels, nor are ops
without the tag (reductions, matrix products, copies): they are counted by name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from gradcheck.backends.kernels import (
    ELEMENT_BUDGET,
    ETA,
    OVER_BUDGET,
    KernelCall,
    KernelTrace,
    KnownKernel,
    differences,
)

_PT = "https://github.com/pytorch/pytorch/issues/"
#: the dtypes whose kernels are traced
LOW = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
#: pointwise ops whose result depends on the dtype by definition: the float64 run is another
#: function (the next float64 number, float64's largest value)
DTYPE_DEPENDENT = ("nextafter", "nan_to_num", "frexp", "_to_copy", "copy", "clone", "lift_fresh")
#: ops that move or make values without computing them (not counted as untraced kernels)
MOVES = ("detach", "alias", "clone", "_to_copy", "copy", "lift_fresh", "empty_like", "ones_like",
         "zeros_like", "full_like", "fill", "new_empty", "new_zeros", "new_ones", "new_full",
         "empty", "zeros", "ones", "full", "scalar_tensor", "_local_scalar_dense", "cat",
         "stack", "index", "select_scatter", "slice_scatter", "index_put", "flip", "roll")
#: torch's CPU kernels measured off the correctly rounded value beyond one rounding of a
#: float32 computation, per output dtype (every finite float16 and bfloat16 value of magnitude
#: 1e-6..1e4 through each unary op and its backward, and the catalog's points:
#: ``benchmarks/kernel_ulps.py --exhaustive``, torch 2.13.0; docs/error-model.md section 4c).
#: They compute with low-precision intermediates (``logit`` 1024 ulps off near 0.5 in float16,
#: ``erf`` 32 ulps near 1e-6 in bfloat16, ``sigmoid_backward`` 1-2 ulps in float16).  They are
#: judged like every kernel; a failure on one is reported as the engine's known defect
#: (:class:`~gradcheck.backends.kernels.KnownKernel`), so a user's code that calls them is
#: told what is off and where it is recorded.
_GELU = _PT + "187806"
_TABLE: dict[str, dict[str, tuple[str, str, str | None]]] = {
    # the two half precisions: each finding's docs/upstream row gives the worst points
    **{dtype: {
        "erf": ("T23", "a float32 approximation with an absolute error: 0 for 0 < x < 1.8e-7 "
                "in bfloat16", None),
        "gelu": ("T24", "1 + erf cancels left of about -4", _GELU),
        "gelu_backward": ("T24", "1 + erf cancels left of about -4", _GELU),
        "gelu:tanh": ("T25", "1 + tanh cancels left of about -3", None),
        "gelu_backward:tanh": ("T25", "1 + tanh cancels left of about -3", None),
        "logit": ("T26", "1 - x rounded to the dtype first: 128 (bfloat16) and 1024 (float16) "
                  "ulps near 0.5", _PT + "140252"),
        "logit_backward": ("T26", "every step rounded to the dtype: 2 ulps", _PT + "140252"),
        "special_entr": ("T30", "the log rounded to the dtype before the product",
                         _PT + "137968"),
        "special_i0e": ("T29", "the one-element (tail) path", _PT + "140348"),
        "xlogy": ("T31", "the log rounded to the dtype before the product", _PT + "140892"),
        "special_xlog1py": ("T32", "log1p rounded to the dtype before the product",
                            _PT + "140796"),
        "polygamma": ("T34", "zeta(n + 1, x) rounded to the dtype before the factorial", None),
        "mvlgamma": ("T35", "a composite computed in the dtype", None),
    } for dtype in ("bfloat16", "float16")},
}
_TABLE["bfloat16"].update({
    "pow": ("T27", "x * x rounded before the next step (integer exponents; x ** -0.5 on one "
            "element is T22's rsqrt path)", None),
    "rsqrt": ("T22", "the one-element path: 0.4609375 at 4.75", None)})
_TABLE["float16"].update({
    "rsqrt": ("T28", "the one-element path: 113.0625 where 113.125", None),
    "sigmoid_backward": ("T33", "y (1 - y) rounded step by step: 1-2 ulps", None)})
_TABLE["float32"] = {
    "special_i1e": ("T36", "up to 10 ulps for |x| <= 8", None),
    "gelu": ("T24", "1 + erf cancels left of about -4: 57% off at -5.5", _GELU),
    "gelu_backward": ("T24", "1 + erf cancels left of about -4", _GELU),
    "gelu:tanh": ("T25", "1 + tanh cancels left of about -3: 2927 ulps at -3.84", None),
    "gelu_backward:tanh": ("T25", "1 + tanh cancels left of about -3", None)}
KNOWN: dict[str, dict[str, KnownKernel]] = {
    dtype: {op: KnownKernel(*entry) for op, entry in ops.items()}
    for dtype, ops in _TABLE.items()}


def known_kernel(name: str, dtype: str, approximate: str = "none") -> KnownKernel | None:
    """The finding of torch's kernel ``name`` (``"erf"``, ``"gelu_backward"``; an in-place
    variant's trailing ``_`` dropped) in ``dtype``, or None; ``approximate``: gelu's argument
    (its tanh form is another finding than its erf form)."""
    table = KNOWN.get(dtype, {})
    name = name.rstrip("_")
    return table.get(f"{name}:{approximate}") or table.get(name)


def _traced(func: Any) -> bool:
    if torch.Tag.pointwise not in func.tags or torch.Tag.nondeterministic_seeded in func.tags:
        return False
    name = func._schema.name.split("::")[-1]
    return func._overloadname != "out" and name.rstrip("_") not in DTYPE_DEPENDENT


def _low_outputs(out: Any) -> list[tuple[int, torch.Tensor]]:
    leaves, _ = tree_flatten(out)
    return [(k, t) for k, t in enumerate(leaves)
            if isinstance(t, torch.Tensor) and t.dtype in LOW and not t.is_complex()]


def _wide(tree: Any) -> Any:
    def up(a: Any) -> Any:
        if isinstance(a, torch.Tensor) and a.dtype in LOW:
            return a.detach().to(torch.float64).clone()
        if isinstance(a, torch.dtype) and a in LOW:
            return torch.float64
        return a

    return tree_map(up, tree)


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[KernelCall] = []
        self.untraced: Counter[str] = Counter()
        self.elements = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        traced = _traced(func)
        if traced and self.elements > ELEMENT_BUDGET:
            self.untraced[OVER_BUDGET] += 1
            traced = False
        # the inputs before the call (an in-place op overwrites its first)
        wide = _wide((args, kwargs)) if traced else None
        dtypes = [str(a.dtype).replace("torch.", "") if isinstance(a, torch.Tensor) else None
                  for a in tree_flatten((args, kwargs))[0]]
        out = func(*args, **kwargs)
        lows = _low_outputs(out)
        name = func._schema.name.split("::")[-1].rstrip("_")
        if lows and not traced and not func.is_view and name not in MOVES:
            self.untraced[str(func)] += 1
        elif lows and wide is not None:
            try:
                self._record(func, wide, dtypes, lows)
            except Exception:  # the op has no float64 kernel here: not judged
                self.untraced[str(func)] += 1
        return out

    def _record(self, func: Any, wide: Any, dtypes: list[str | None],
                lows: list[tuple[int, torch.Tensor]]) -> None:
        node = torch._C._current_autograd_node()
        where = "forward" if node is None else type(node).__name__

        def run64(scale: int | None = None, factor: float = 1.0,
                  cast: torch.dtype | None = None) -> list[torch.Tensor]:
            fresh = tree_map(lambda a: a.clone() if isinstance(a, torch.Tensor) else a, wide)
            leaves, spec = tree_flatten(fresh)
            if scale is not None:
                leaves[scale] = leaves[scale] * factor
            if cast is not None:  # the inputs wider than ``cast`` rounded to it first
                leaves = [x.to(cast).to(torch.float64) if _wider(d, cast)
                          else float(torch.tensor(x, dtype=cast)) if isinstance(x, float)
                          else x for x, d in zip(leaves, dtypes, strict=True)]
            a, k = spec.unflatten(leaves)
            leaves_out, _ = tree_flatten(func(*a, **k))
            return leaves_out

        exact = run64()
        inputs = [(i, t) for i, t in enumerate(tree_flatten(wide)[0])
                  if isinstance(t, torch.Tensor) and t.dtype == torch.float64]
        moved = [(run64(i, 1 + ETA), run64(i, 1 - ETA)) for i, _ in inputs]
        for k, t in lows:
            e = _np(exact[k])
            shape = e.shape
            terms, first, second = differences(
                e, [(_np(up[k]), _np(down[k])) for up, down in moved])
            operands = tuple(np.broadcast_to(_np(x), shape) for _, x in inputs)
            scalars = any(isinstance(x, float) for x in tree_flatten(wide)[0])
            cast = (_np(run64(cast=t.dtype)[k])
                    if scalars or any(_wider(d, t.dtype) for d in dtypes) else None)
            self.elements += e.size
            self.calls.append(KernelCall(
                str(func), where, LOW[t.dtype], _np(t), e, terms, first, second, cast, operands,
                _reproducer(func, wide, dtypes, shape),
                known_kernel(func._schema.name.split("::")[-1], LOW[t.dtype],
                             str(wide[1].get("approximate", "none")))))


def _wider(dtype: str | None, than: torch.dtype) -> bool:
    d = getattr(torch, dtype) if dtype is not None else None
    return (isinstance(d, torch.dtype) and d.is_floating_point
            and d.itemsize > than.itemsize)


def _np(t: Any) -> np.ndarray:
    return np.asarray(t.detach().to(torch.float64).cpu().numpy(), dtype=np.float64)


def _reproducer(func: Any, wide: Any, dtypes: list[str | None], shape: tuple[int, ...]
                ) -> Callable[[int], str]:
    """The op on element ``k`` of each tensor input (broadcast to the output), in its dtype."""
    leaves, spec = tree_flatten(wide)

    def line(k: int) -> str:
        def one(a: Any, dtype: str | None) -> Any:
            if not isinstance(a, torch.Tensor):
                return a
            v = np.broadcast_to(_np(a), shape).ravel()[k] if a.numel() > 1 else _np(a).ravel()[0]
            return _Literal(f"torch.tensor({float(v)!r}, dtype=torch.{dtype})")

        a, kw = spec.unflatten([one(x, d) for x, d in zip(leaves, dtypes, strict=True)])
        parts = [repr(x) for x in a] + [f"{n}={v!r}" for n, v in kw.items()]
        return f"torch.ops.{func}({', '.join(parts)})"

    return line


class _Literal(str):
    def __repr__(self) -> str:
        return str(self)


def trace(run: Callable[[], Any]) -> KernelTrace:
    """``run()`` under the recorder (module docstring)."""
    rec = _Recorder()
    with rec:
        run()
    return KernelTrace(tuple(rec.calls), tuple(sorted(rec.untraced.items())))
