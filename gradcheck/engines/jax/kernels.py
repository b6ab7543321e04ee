"""Tracing JAX's elementwise kernels (the adapter's ``trace_kernels``,
:mod:`gradcheck.backends.kernels`).

While a trace is on, the adapter's calls (``evaluate``, ``vjp``, ``jvp``: their function, its
``jax.vjp`` and pullback, its ``jax.jvp``) are not jitted: their jaxpr (``jax.make_jaxpr``) is
interpreted equation by equation (into ``pjit``, ``closed_call``, ``custom_jvp_call``,
``custom_vjp_call`` and ``remat`` bodies), each primitive bound on its own, as eager JAX runs it.
Each elementwise primitive of :data:`ELEMENTWISE` with a floating output below float64 is bound
again in float64 on its inputs upcast (exactly), and at ``x_i (1 +- 2^-20)`` per floating input
for its partial derivatives.  Other primitives with such outputs (reductions, dots, control
flow) are counted by name, not judged.  (Under ``jit`` XLA may fuse several elementwise
operations and round once for all; the interpretation judges each operation as eager JAX runs
it.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradcheck.backends.kernels import (
    ELEMENT_BUDGET,
    ETA,
    OVER_BUDGET,
    KernelCall,
    KnownKernel,
    differences,
)

#: lax primitives computed element by element whose result is a function of their inputs'
#: values alone (not of the dtype: ``nextafter`` and ``reduce_precision`` are left out)
ELEMENTWISE = frozenset({
    "abs", "acos", "acosh", "add", "add_any", "asin", "asinh", "atan", "atan2", "atanh",
    "bessel_i0e", "bessel_i1e", "cbrt", "ceil", "clamp", "convert_element_type", "cos", "cosh",
    "digamma", "div", "erf", "erf_inv", "erfc", "exp", "exp2", "expm1", "floor", "igamma",
    "igammac", "integer_pow", "lgamma", "log", "log1p", "logistic", "max", "min", "mul", "neg",
    "polygamma", "pow", "rem", "round", "rsqrt", "select_n", "sign", "sin", "sinh", "sqrt",
    "square", "sub", "tan", "tanh", "zeta",
})
#: XLA's CPU kernels measured off the correctly rounded value beyond one rounding of a float32
#: computation, per output dtype (every finite float16 and bfloat16 value of magnitude
#: 1e-6..1e4, 200000 float32 samples, through each unary op and its VJP, and the catalog's
#: points: ``benchmarks/kernel_ulps.py --backend jax``, jax 0.10.2; docs/error-model.md section
#: 4c).  In float16/bfloat16 they are expanded into operations in the dtype (``asinh`` 1 ulp,
#: ``integer_pow`` as products, ``x^-2`` of 256 is 0 in float16, ``exp2(117.5)`` 77 ulps low
#: in bfloat16, ``logistic(-11.1)`` 0 in float16); in float32 the special functions are
#: accurate to about 1e-5 (``lgamma`` 161 ulps at -2.61).  They are judged like every kernel;
#: a failure on one is reported as the engine's known defect
#: (:class:`~gradcheck.backends.kernels.KnownKernel`).
_INVERSE = "expanded into steps rounded to the dtype: 1-2 ulps"
_LGAMMA = ("J26", "lgamma(1) is 2^-21 where 0; 161 ulps at -2.61 in float32",
           "https://github.com/jax-ml/jax/issues/5418")
_TABLE: dict[str, dict[str, tuple[str, str, str | None]]] = {
    **{dtype: {
        **{op: ("J21", _INVERSE, None) for op in ("acos", "acosh", "asin", "asinh", "atanh")},
        "exp2": ("J20", "exp(log(2) x) with log(2) and the product rounded to the dtype", None),
        "integer_pow": ("J23", "repeated products in the dtype (x^-2 of 256 is 0 in float16)",
                        None),
        "lgamma": _LGAMMA,
        "logistic": ("J22", "1 / (1 + exp(-x)) in the dtype: 2 ulps; 0 below -11.09 in float16",
                     None),
    } for dtype in ("bfloat16", "float16")},
    "float32": {
        "bessel_i1e": ("J28", "up to 10 ulps for 4.7 <= |x| <= 8", None),
        "digamma": ("J27", "up to 127 ulps in [1.004, 3.34]", None),
        "lgamma": _LGAMMA},
}
_TABLE["float16"].update({
    "div": ("J24", "a product with the reciprocal rounded to float16: 1 ulp", None),
    "expm1": ("J25", "evaluated in float16: 2 ulps", None)})
KNOWN: dict[str, dict[str, KnownKernel]] = {
    dtype: {op: KnownKernel(*entry) for op, entry in ops.items()}
    for dtype, ops in _TABLE.items()}


def known_kernel(name: str, dtype: str) -> KnownKernel | None:
    """The finding of XLA's primitive ``name`` (``"asinh"``) in ``dtype``, or None."""
    return KNOWN.get(dtype, {}).get(name)


#: the subjaxpr parameters of the call-like primitives interpreted through
_BODIES = ("jaxpr", "call_jaxpr", "fun_jaxpr")
_CALLS = frozenset({"pjit", "jit", "closed_call", "core_call", "custom_jvp_call",
                    "custom_vjp_call", "custom_vjp_call_jaxpr", "remat", "remat2", "checkpoint",
                    "custom_lin"})
LOW = ("float32", "float16", "bfloat16")


class Recorder:
    """The kernels of one traced call (``calls``) and the untraced primitives by name."""

    def __init__(self) -> None:
        self.calls: list[KernelCall] = []
        self.untraced: Counter[str] = Counter()
        self.elements = 0

    def run(self, fn: Callable, *xs: Any) -> Any:
        """``fn(*xs)`` through its jaxpr, recording its kernels."""
        closed, shape = jax.make_jaxpr(fn, return_shape=True)(*xs)
        leaves = jax.tree_util.tree_leaves(xs)
        outs = self._eval(closed.jaxpr, closed.consts, leaves)
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shape), outs)

    def _eval(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
        env: dict[Any, Any] = {}

        def read(v: Any) -> Any:
            return v.val if type(v).__name__ == "Literal" else env[v]

        for v, c in zip(jaxpr.constvars, consts, strict=True):
            env[v] = c
        for v, a in zip(jaxpr.invars, args, strict=True):
            env[v] = a
        for n, eqn in enumerate(jaxpr.eqns):
            invals = [read(v) for v in eqn.invars]
            body = _body(eqn)
            if body is not None:
                outs = self._eval(body.jaxpr, body.consts, invals)
            else:
                out = eqn.primitive.bind(*invals, **eqn.params)
                outs = list(out) if eqn.primitive.multiple_results else [out]
                self._record(eqn, n, invals, outs)
            for v, o in zip(eqn.outvars, outs, strict=True):
                if type(v).__name__ != "DropVar":
                    env[v] = o
        return [read(v) for v in jaxpr.outvars]

    def _record(self, eqn: Any, n: int, invals: list[Any], outs: list[Any]) -> None:
        lows = [(k, o) for k, o in enumerate(outs) if _dtype(o) in LOW]
        if not lows:
            return
        name = eqn.primitive.name
        if name not in ELEMENTWISE:
            self.untraced[f"lax.{name}"] += 1
            return
        if self.elements > ELEMENT_BUDGET:
            self.untraced[OVER_BUDGET] += 1
            return
        try:
            self._judge(eqn, n, invals, lows)
        except Exception:  # no float64 kernel for it here: not judged
            self.untraced[f"lax.{name}"] += 1

    def _judge(self, eqn: Any, n: int, invals: list[Any], lows: list[tuple[int, Any]]) -> None:
        wide = [_up(x) for x in invals]
        params = {k: (jnp.float64 if k in ("new_dtype", "out_dtype") and v is not None
                      and str(np.dtype(v)) in LOW else v) for k, v in eqn.params.items()}

        def bind(xs: list[Any]) -> list[np.ndarray]:
            out = eqn.primitive.bind(*xs, **params)
            out = list(out) if eqn.primitive.multiple_results else [out]
            return [np.asarray(o, dtype=np.float64) for o in out]

        exact = bind(wide)
        floats = [i for i, x in enumerate(invals) if _dtype(x) in (*LOW, "float64")]
        moved = []
        for i in floats:
            pair = []
            for factor in (1 + ETA, 1 - ETA):
                xs = list(wide)
                xs[i] = xs[i] * factor
                pair.append(bind(xs))
            moved.append(pair)
        for k, o in lows:
            e = exact[k]
            shape = e.shape
            terms, first, second = differences(e, [(up[k], down[k]) for up, down in moved])
            operands = tuple(np.broadcast_to(np.asarray(wide[i], dtype=np.float64), shape)
                             for i in floats)
            dtypes = [_dtype(x) for x in invals]
            self.elements += e.size
            self.calls.append(KernelCall(
                f"lax.{eqn.primitive.name}", f"jaxpr equation {n}", _dtype(o),
                np.asarray(o, dtype=np.float64), e, terms, first, second, None, operands,
                _reproducer(eqn, wide, dtypes, shape), known_kernel(eqn.primitive.name,
                                                                    _dtype(o))))


def _body(eqn: Any) -> Any:
    if eqn.primitive.name not in _CALLS:
        return None
    for key in _BODIES:
        body = eqn.params.get(key)
        if body is not None and hasattr(body, "jaxpr") and hasattr(body, "consts"):
            return body
        if body is not None and hasattr(body, "eqns"):  # an open jaxpr (remat)
            return _Closed(body)
    return None


class _Closed:
    def __init__(self, jaxpr: Any) -> None:
        self.jaxpr, self.consts = jaxpr, ()


def _dtype(x: Any) -> str:
    return str(getattr(x, "dtype", np.asarray(x).dtype))


def _up(x: Any) -> Any:
    if _dtype(x) in LOW:
        return jnp.asarray(np.asarray(x, dtype=np.float64))
    return x


def _reproducer(eqn: Any, wide: list[Any], dtypes: list[str], shape: tuple[int, ...]
                ) -> Callable[[int], str]:
    def line(k: int) -> str:
        vals = []
        for x, d in zip(wide, dtypes, strict=True):
            a = np.asarray(x, dtype=np.float64)
            v = np.broadcast_to(a, shape).ravel()[k] if a.size > 1 else a.ravel()[0]
            vals.append(f"jnp.array({float(v)!r}, dtype=jnp.{d})")
        params = "".join(f", {p}={v!r}" for p, v in eqn.params.items())
        return f"jax.lax.{eqn.primitive.name}_p.bind({', '.join(vals)}{params})"

    return line
