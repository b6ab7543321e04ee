"""The torch inventory: every op of OpInfo's ``op_db`` (PyTorch's own op database) that declares
autograd support, with one of its own sample inputs as the template.

Names: OpInfo's ``nn.functional.silu`` becomes ``torch.nn.functional.silu``; an op that exists
only as a tensor method becomes ``torch.Tensor.<name>``; a variant test name is appended
(``torch.max.binary``).  Declared dtypes are OpInfo's ``supported_backward_dtypes("cpu")``
(the four real floating ones), forward mode its ``supports_forward_ad`` and order 2 its
``supports_gradgrad``.

Importing ``torch.testing._internal.common_methods_invocations`` needs ``expecttest``; it also
imports pytest and hypothesis (their modules, not their plugins).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from gradcheck.sweep.inventory.records import Inventory, LeftOut, Op, family_of, matches

_DTYPES = ("float64", "float32", "float16", "bfloat16")
_NAMESPACES = ("nn.functional.", "special.", "linalg.", "fft.", "signal.", "masked.",
               "sparse.", "nn.")
#: the largest template the sweep takes (elements over all differentiable inputs)
MAX_ELEMENTS = 256
#: where no sample fits, the smallest one up to this size is taken
FALLBACK_ELEMENTS = 4096
SAMPLES_LOOKED_AT = 12


def qualified_name(op: Any) -> str:
    import torch

    base = op.name.removeprefix("torch.")
    if base.startswith(_NAMESPACES):
        name = f"torch.{base}"
    elif hasattr(torch, base):
        name = f"torch.{base}"
    elif hasattr(torch.Tensor, base):
        name = f"torch.Tensor.{base}"
    else:
        name = f"torch.{base}"
    return f"{name}.{op.variant_test_name}" if op.variant_test_name else name


def inventory(names: Sequence[str] | None = None) -> Inventory:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    ops: list[Op] = []
    left: list[LeftOut] = []
    seen: set[str] = set()
    for info in op_db:
        name = qualified_name(info)
        if name in seen or (names and not matches(name, names)):
            continue
        seen.add(name)
        if not info.supports_autograd:
            left.append(LeftOut(name, "torch", "OpInfo declares no autograd support"))
            continue
        dtypes = tuple(d for d in _DTYPES
                       if getattr(torch, d) in info.supported_backward_dtypes("cpu"))
        if "float64" not in dtypes:
            left.append(LeftOut(name, "torch", "no float64 backward dtype on CPU (OpInfo)"))
            continue
        try:
            built = _build(info, name, dtypes)
        except Exception as exc:  # OpInfo's sample generator itself failed
            built = f"its sample inputs raised {type(exc).__name__}: {str(exc)[:120]}"
        if isinstance(built, str):
            left.append(LeftOut(name, "torch", built))
        else:
            ops.append(built)
    return Inventory("torch", tuple(ops), tuple(left))


def leaves_of(sample: Any) -> list[Any]:
    import torch

    inp = sample.input if isinstance(sample.input, (list, tuple)) else [sample.input]
    pool = list(inp) + list(sample.args) + list(sample.kwargs.values())
    return [t for t in pool if isinstance(t, torch.Tensor) and t.requires_grad]


def _usable(sample: Any) -> list[Any] | None:
    import torch

    leaves = leaves_of(sample)
    if not leaves or any(t.is_complex() or t.layout != torch.strided or t.numel() == 0
                         for t in leaves):
        return None
    return leaves


def _pick(info: Any) -> tuple[Any, list[Any]] | None:
    """The sample with the most elements (at most :data:`MAX_ELEMENTS`) among the first few:
    more elements hold more edge values per check."""
    import torch

    best = None
    small = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = info.sample_inputs("cpu", torch.float64, requires_grad=True)
        for k, sample in enumerate(samples):
            if k >= SAMPLES_LOOKED_AT:
                break
            leaves = _usable(sample)
            if leaves is None:
                continue
            size = sum(t.numel() for t in leaves)
            if size <= MAX_ELEMENTS and (best is None or size > best[0]):
                best = (size, sample, leaves)
            elif size <= FALLBACK_ELEMENTS and (small is None or size < small[0]):
                small = (size, sample, leaves)
    best = best or small
    return None if best is None else (best[1], best[2])


_GRAD_TESTS = ("test_fn_grad", "test_fn_gradgrad", "test_fn_fwgrad_bwgrad", "test_forward_mode_AD")


def skipped_grad_tests(info: Any, tests: Sequence[str] = _GRAD_TESTS) -> tuple[str, ...]:
    """The gradient tests PyTorch's own suite skips or xfails for this op on CPU float64
    (OpInfo's ``skips`` and ``decorators`` naming a test of TestBwdGradients/TestFwdGradients)."""
    import torch

    found: list[str] = []
    for d in list(info.skips) + list(info.decorators):
        test = getattr(d, "test_name", None)
        if not isinstance(test, str) or test not in tests or d.device_type not in (None, "cpu"):
            continue
        if d.dtypes is not None and torch.float64 not in d.dtypes:
            continue
        if getattr(d, "cls_name", None) not in (None, "TestBwdGradients", "TestFwdGradients",
                                                "TestGradients"):
            continue
        found.append(test)
    return tuple(sorted(set(found)))


def _build(info: Any, name: str, dtypes: tuple[str, ...]) -> Op | str:
    picked = _pick(info)
    if picked is None:
        return ("no sample input with real floating differentiable tensors of 1 to "
                f"{FALLBACK_ELEMENTS} elements among OpInfo's first {SAMPLES_LOOKED_AT}")
    sample, leaves = picked
    fn = function(info, sample, leaves, name)
    template = tuple(t.detach().numpy().copy() for t in leaves)
    try:
        import torch

        out = fn(*[torch.from_numpy(a.copy()) for a in template])
    except Exception as exc:
        return f"the op raised at its own sample: {type(exc).__name__}: {str(exc)[:120]}"
    outs = out if isinstance(out, tuple) else (out,)
    if not outs or not all(o.is_floating_point() for o in outs):
        return "no floating output to differentiate"
    again = fn(*[torch.from_numpy(a.copy()) for a in template])
    again = again if isinstance(again, tuple) else (again,)
    if any(a.shape != b.shape or not torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)
           for a, b in zip(outs, again, strict=False)):
        return "nondeterministic forward (two calls at the sample differ: random sampling)"
    leaf = info.name.rsplit(".", 1)[-1]
    return Op(name, "torch", fn, template, dtypes, fwd=bool(info.supports_forward_ad),
              order2=bool(info.supports_gradgrad),
              family=family_of(name, template, [tuple(o.shape) for o in outs]), leaf=leaf,
              call=_call_text(sample), upstream_skips=skipped_grad_tests(info))


def _call_text(sample: Any) -> str:
    """The sample's fixed arguments, written out for the reproducer (best effort)."""
    import torch

    def text(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            return (f"torch.tensor({v.detach().tolist()!r}, dtype={v.dtype})" if v.numel() <= 16
                    else f"<tensor {tuple(v.shape)} {v.dtype}>")
        return repr(v)

    args = ", ".join(text(a) for a in sample.args)
    kwargs = ", ".join(f"{k}={text(v)}" for k, v in sample.kwargs.items())
    return ", ".join(p for p in (args, kwargs) if p)


def function(info: Any, sample: Any, leaves: list[Any], name: str) -> Any:
    """``fn(*diff_tensors)``: the sample rebuilt around them (fixed floating tensors cast to the
    dtype under test), the op's ``gradcheck_wrapper`` and ``output_process_fn_grad`` applied,
    outputs torch declares non-differentiable dropped, complex outputs as real pairs."""
    import torch
    from torch.utils import _pytree

    ids = {id(t): k for k, t in enumerate(leaves)}
    variant = info.get_op()

    def swap(v: Any, xs: Sequence[Any]) -> Any:
        if isinstance(v, torch.Tensor):
            if id(v) in ids:
                return xs[ids[id(v)]]
            if v.is_floating_point() and v.dtype != xs[0].dtype:
                return v.detach().to(xs[0].dtype)
            return v
        if isinstance(v, (list, tuple)) and v and all(isinstance(e, torch.Tensor) for e in v):
            return type(v)(swap(e, xs) for e in v)
        return v

    def outputs(xs: Sequence[Any]) -> list[Any]:
        out = info.gradcheck_wrapper(variant, swap(sample.input, xs),
                                     *[swap(a, xs) for a in sample.args],
                                     **{k: swap(v, xs) for k, v in sample.kwargs.items()})
        if sample.output_process_fn_grad is not None:
            out = sample.output_process_fn_grad(out)
        return [o for o in _pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]

    keep: list[bool] | None
    try:
        with torch.enable_grad():
            probe = outputs(leaves)
        keep = [not (o.is_floating_point() or o.is_complex()) or o.requires_grad for o in probe]
        if not any(k and (o.is_floating_point() or o.is_complex())
                   for k, o in zip(keep, probe, strict=True)):
            keep = [True] * len(probe)
    except Exception:
        keep = None

    def fn(*xs: Any) -> Any:
        flat = outputs(xs)
        if keep is not None and len(keep) == len(flat):
            flat = [o for o, k in zip(flat, keep, strict=True) if k]
        flat = [torch.view_as_real(o.resolve_conj()) if o.is_complex() else o for o in flat]
        flat = [o for o in flat if o.is_floating_point()]
        return tuple(flat) if len(flat) != 1 else flat[0]

    fn.__name__ = name
    fn.__qualname__ = name
    return fn

