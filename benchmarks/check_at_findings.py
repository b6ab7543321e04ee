"""``gradcheck.check`` called by a user at the point of a real upstream bug (issue 35):

    python benchmarks/check_at_findings.py [--only T3 --only J5 ...] [--json PATH]

The table :data:`CASES` holds one case (or a few) per finding of ``docs/upstream/README.md``
(torch T1-T36, jax J1-J28; torch 2.13.0, jax 0.10.2, CPU): the engine function written the
way a user would (``lambda x: torch.asinh(x)``), the inputs at the reproducer's point in the
finding's dtype, and the arguments a user looking at that bug would pass (``order=2`` for a
second-derivative finding, the dtype of a low-precision one; otherwise the defaults: reverse
and forward mode, 3 probes).  Each case has a correct **twin** a user could write at the same
point (the same math written stably, or computed in float32 and rounded, or the op on a path
that is right there), which must pass.

Each case runs ``gradcheck.check`` in this process with ``timeout=120`` s.  A finding's verdict:
``flagged`` (the report is not passed and has a failed result; its failed kinds and whether the
failures carry a known mark, ``result.known``, are recorded), ``missed`` (the report passed),
``nothing decided`` (no comparison reached a verdict), ``error`` (only error results),
``timeout``.  A twin's: ``pass``, ``false alarm`` (a failed result), ``nothing decided``,
``error``, ``timeout``.  Findings whose derivative is right and only the forward value is wrong
(J2/J3 gammainc, T14 ndtr, the low-precision kernels of T22-T36 and J20-J28 that are about the
value) are ``value-only`` and counted apart: ``check`` compares derivatives, and whether it
flags them is informative, not a claim.  Findings that hang (J4, J19) are listed as skipped and
never run.

The table is importable (``tests/numeric/test_check_at_findings.py`` runs a subset); the
functions import their engine only when called.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TIMEOUT_S = 120.0
SQRT2 = math.sqrt(2.0)


# -- the engines, imported when a function is first called --------------------------------------

def _t() -> Any:
    import torch

    return torch


def _F() -> Any:
    import torch.nn.functional as F

    return F


def _jnp() -> Any:
    import jax.numpy as jnp

    return jnp


def _jss() -> Any:
    import jax.scipy.special as jss

    return jss


def _jax() -> Any:
    import jax

    return jax


def _arr(values: Any) -> np.ndarray:
    """The table's points are float64 arrays; :func:`run_case` rounds them to the case's dtype
    (each value here is one of that dtype, so the rounding leaves the reproducer's point)."""
    return np.asarray(values, dtype=np.float64)


def _full(n: int, value: float) -> np.ndarray:
    """``n`` copies of ``value`` (rounded to the case's dtype by :func:`run_case`; 64 torch
    elements take the vectorized path, one element the scalar path)."""
    return np.full(n, value, dtype=np.float64)


def cast(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` in ``dtype`` (bfloat16 through ml_dtypes)."""
    from gradcheck.core.dtypes import numpy_dtype

    return x.astype(numpy_dtype(dtype))


# -- twins that the same math written stably gives ---------------------------------------------

def _t_up(op: Callable, via: str = "float32") -> Callable:
    """torch ``op`` computed in ``via`` and rounded once to the input's dtype, where the input
    is narrower than ``via`` (the float64 evaluations of ``check`` run ``op`` itself: computing
    a float64 input in float32 is a different function, whose forward and reverse derivatives
    differ at float32 rounding)."""
    def f(*xs: Any) -> Any:
        t = _t()
        wide = getattr(t, via)
        if xs[0].dtype.itemsize >= wide.itemsize:
            return op(*xs)
        return op(*(x.to(wide) for x in xs)).to(xs[0].dtype)
    return f


def _t_up64(op: Callable) -> Callable:
    return _t_up(op, "float64")


def _j_up(op: Callable, via: str = "float32") -> Callable:
    """jax ``op`` computed in ``via`` and rounded once to the input's dtype, where the input is
    narrower than ``via`` (as :func:`_t_up`)."""
    def f(*xs: Any) -> Any:
        if xs[0].dtype.itemsize >= np.dtype(via).itemsize:
            return op(*xs)
        return op(*(x.astype(via) for x in xs)).astype(xs[0].dtype)
    return f


def _t_scaled(op: Callable) -> Callable:
    """A torch function of degree ``k`` in all its inputs, evaluated on inputs divided by their
    largest magnitude (held constant): ``op`` itself for atan2 (degree 0), ``m * op`` for a
    norm or hypot (degree 1)."""
    def f(*xs: Any) -> Any:
        t = _t()
        m = t.stack([x.detach().abs().max() for x in xs]).max()
        return op(*(x / m for x in xs)), m
    return f


def _t_atan2_scaled(y: Any, x: Any) -> Any:
    out, _ = _t_scaled(_t().atan2)(y, x)
    return out


def _t_norm_scaled(x: Any) -> Any:
    out, m = _t_scaled(_t().linalg.vector_norm)(x)
    return m * out


def _j_scaled(op: Callable, degree: int) -> Callable:
    def f(*xs: Any) -> Any:
        jnp, jax = _jnp(), _jax()
        m = jax.lax.stop_gradient(jnp.max(jnp.stack([jnp.max(jnp.abs(x)) for x in xs])))
        return m ** degree * op(*(x / m for x in xs))
    return f


def _t_det3(a: Any) -> Any:
    """The 3x3 determinant by cofactors (a cubic polynomial: every derivative exact)."""
    return (a[0, 0] * (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1])
            - a[0, 1] * (a[1, 0] * a[2, 2] - a[1, 2] * a[2, 0])
            + a[0, 2] * (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]))


def _t_cumprod_explicit(v: Any) -> Any:
    t = _t()
    outs, acc = [], None
    for k in range(v.shape[0]):
        acc = v[k] if acc is None else acc * v[k]
        outs.append(acc)
    return t.stack(outs)


def _sinc_series(x: Any) -> Any:
    """sinc(x) = sin(pi x)/(pi x) by its Taylor series (exact to rounding for |x| < 1e-2)."""
    u = (math.pi * x) ** 2
    return 1 - u / 6 + u * u / 120 - u * u * u / 5040


def _i0_series(x: Any) -> Any:
    u = x * x / 4
    return 1 + u + u * u / 4 + u * u * u / 36


def _i1_series(x: Any) -> Any:
    u = x * x / 4
    return x / 2 * (1 + u / 2 + u * u / 12 + u * u * u / 144)


def _log2x(x: Any) -> Any:
    """asinh(x) and acosh(x) for x > 1e20: log(2x) (the rest is below 1e-40 relative)."""
    return x.log() + math.log(2.0) if hasattr(x, "log") else _jnp().log(x) + math.log(2.0)


# -- the table ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One finding at its point: the buggy call and its correct twin, and ``check``'s
    arguments."""

    id: str  # the finding id, with a letter for a second case of the same finding (T24b)
    engine: str  # "torch" or "jax"
    op: str
    point: str
    fn: Callable | None  # None: skipped (never run)
    inputs: tuple[np.ndarray, ...] = ()
    twin: Callable | None = None
    twin_inputs: tuple[np.ndarray, ...] | None = None  # None: the same inputs
    twin_note: str = ""
    dtype: str = "float64"
    order: int = 1
    modes: tuple[str, ...] = ("rev", "fwd")
    value_only: bool = False  # the finding is a wrong forward value, its derivative is right
    skip: str = ""  # why the case is never run

    @property
    def finding(self) -> str:
        return self.id.rstrip("abcdefgh")


def _torch_cases() -> list[Case]:
    t, F, sp = _t, _F, lambda: _t().special
    up = _t_up
    c = [
        Case("T1", "torch", "torch.asinh", "x = 1e200", lambda x: t().asinh(x),
             (_arr([1e200]),), twin=_log2x, twin_note="log(x) + log 2"),
        Case("T1b", "torch", "torch.asinh", "x = 1.4e154", lambda x: t().asinh(x),
             (_arr([1.4e154]),), twin=_log2x, twin_note="log(x) + log 2"),
        Case("T2", "torch", "torch.acosh", "x = 1e200", lambda x: t().acosh(x),
             (_arr([1e200]),), twin=_log2x, twin_note="log(x) + log 2"),
        Case("T3", "torch", "torch.addcdiv(1, t1, t2)", "t1 = 1e-300, t2 = 3e-300",
             lambda a, b: t().addcdiv(t().ones_like(a), a, b), (_arr([1e-300]), _arr([3e-300])),
             twin=lambda a, b: 1 + a / b, twin_note="1 + t1 / t2"),
        Case("T4", "torch", "F.hardsigmoid", "x = [0.3, -1.2, 2.0]",
             lambda x: F().hardsigmoid(x), (_arr([0.3, -1.2, 2.0]),),
             twin=lambda x: (x + 3) / 6, twin_note="(x + 3) / 6"),
        Case("T5", "torch", "a ** b", "a = 2, b = 0", lambda a, b: a ** b,
             (_arr([2.0]), _arr([0.0])), twin=lambda a, b: t().exp(b * t().log(a)),
             twin_note="exp(b log a)", order=2),
        Case("T6", "torch", "torch.atan2", "(y, x) = (1e200, -3e200)",
             lambda y, x: t().atan2(y, x), (_arr([1e200]), _arr([-3e200])),
             twin=_t_atan2_scaled, twin_note="atan2 of inputs / max |input| (held)"),
        Case("T7", "torch", "torch.atan2", "(y, x) = (1e-200, 3e-200)",
             lambda y, x: t().atan2(y, x), (_arr([1e-200]), _arr([3e-200])),
             twin=_t_atan2_scaled, twin_note="atan2 of inputs / max |input| (held)"),
        Case("T8", "torch", "torch.special.digamma (trigamma)", "x = 1",
             lambda x: t().special.digamma(x), (_arr([1.0]),),
             twin=lambda x: t().special.digamma(x), twin_inputs=(_arr([50.0]),),
             twin_note="digamma at x = 50 (trigamma is 3e-16 off there; 2.8e-10 at 2.5)"),
        Case("T9", "torch", "torch.linalg.det", "zero 3x3", lambda a: t().linalg.det(a),
             (np.zeros((3, 3)),), twin=_t_det3, twin_note="cofactor expansion", order=2),
        Case("T10", "torch", "torch.special.erfcx", "x = 1e10",
             lambda x: t().special.erfcx(x), (_arr([1e10]),),
             twin=lambda x: (1 - 0.5 / (x * x)) / (x * math.sqrt(math.pi)),
             twin_note="asymptotic (1 - 1/(2x^2)) / (x sqrt pi)"),
        Case("T10b", "torch", "torch.special.erfcx", "x = 1e10", lambda x: t().special.erfcx(x),
             (_arr([1e10]),), twin=lambda x: (1 - 0.5 / (x * x)) / (x * math.sqrt(math.pi)),
             twin_note="asymptotic (1 - 1/(2x^2)) / (x sqrt pi)", order=2),
        Case("T11", "torch", "torch.linalg.vector_norm", "[1e200, 1e200]",
             lambda x: t().linalg.vector_norm(x), (_arr([1e200, 1e200]),),
             twin=_t_norm_scaled, twin_note="m * norm(x / m), m = max |x| held"),
        Case("T12", "torch", "torch.linalg.vector_norm", "[1e-200, 3e-200]",
             lambda x: t().linalg.vector_norm(x), (_arr([1e-200, 3e-200]),),
             twin=_t_norm_scaled, twin_note="m * norm(x / m), m = max |x| held"),
        Case("T13", "torch", "F.gelu", "x = -10", lambda x: F().gelu(x), (_arr([-10.0]),),
             twin=lambda x: 0.5 * x * t().special.erfc(-x / SQRT2),
             twin_note="0.5 x erfc(-x/sqrt 2)"),
        Case("T14", "torch", "torch.special.ndtr", "x = [-20, -10]",
             lambda x: sp().ndtr(x), (_arr([-20.0, -10.0]),),
             twin=lambda x: 0.5 * t().special.erfc(-x / SQRT2),
             twin_note="0.5 erfc(-x/sqrt 2)", value_only=True),
        Case("T15", "torch", "torch.sinc", "x = 0", lambda x: t().sinc(x), (_arr([0.0]),),
             twin=_sinc_series, twin_note="Taylor series", order=2),
        Case("T16", "torch", "F.logsigmoid", "x = 40", lambda x: F().logsigmoid(x),
             (_arr([40.0]),), twin=lambda x: -t().log1p(t().exp(-x)),
             twin_note="-log1p(exp(-x))", order=2),
        Case("T17", "torch", "torch.logaddexp", "(a, b) = (800, -5)",
             lambda a, b: t().logaddexp(a, b), (_arr([800.0]), _arr([-5.0])),
             twin=lambda a, b: t().maximum(a, b) + t().log1p(t().exp(-(a - b).abs())),
             twin_note="max + log1p(exp(-|a - b|))", order=2),
        Case("T18", "torch", "torch.cumprod", "[0.7, 0, -1.3, 1.1]",
             lambda v: t().cumprod(v, 0), (_arr([0.7, 0.0, -1.3, 1.1]),),
             twin=_t_cumprod_explicit, twin_note="running products", order=2),
        Case("T19", "torch", "torch.linalg.det", "rank-2 3x3 (two equal rows)",
             lambda a: t().linalg.det(a),
             (_arr([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.5, 1.0, 7.0]]),),
             twin=_t_det3, twin_note="cofactor expansion"),
        Case("T20", "torch", "torch.expm1", "x = -100", lambda x: t().expm1(x),
             (_arr([-100.0]),), twin=lambda x: t().exp(x) - 1, twin_note="exp(x) - 1"),
        Case("T21", "torch", "torch.cholesky_inverse", "4x4 factor (seed 0)",
             lambda m: t().cholesky_inverse(m), (_arr(_T21_L),),
             twin=lambda m: t().linalg.inv(t().tril(m) @ t().tril(m).T),
             twin_note="inv(L L^T)"),
        # low precision: the kernels measured off (kernel_ulp); 64 elements take the
        # vectorized path, one element the scalar path, as in each reproducer
        Case("T22", "torch", "torch.rsqrt (1 element)", "x = 4.75", lambda x: t().rsqrt(x),
             (_full(1, 4.75),), twin=lambda x: t().rsqrt(x),
             twin_inputs=(_full(32, 4.75),), twin_note="32 elements (vectorized)",
             dtype="bfloat16", value_only=True),
        Case("T23", "torch", "torch.erf", "x = 1.2666e-6", lambda x: t().erf(x),
             (_full(64, 1.2665987014770508e-06),), twin=up(lambda x: t().erf(x)),
             twin_note="in float32, rounded", dtype="bfloat16", value_only=True),
        Case("T24", "torch", "F.gelu", "x = -5.5", lambda x: F().gelu(x),
             (_full(64, -5.5),),
             twin=lambda x: 0.5 * x * t().special.erfc(-x / SQRT2),
             twin_note="0.5 x erfc(-x/sqrt 2)", dtype="float32"),
        Case("T24b", "torch", "F.gelu", "x = -6", lambda x: F().gelu(x),
             (_full(64, -6.0),),
             twin=up(lambda x: 0.5 * x * t().special.erfc(-x / SQRT2)),
             twin_note="0.5 x erfc(-x/sqrt 2) in float32, rounded", dtype="bfloat16"),
        Case("T25", "torch", "F.gelu(approximate='tanh')", "x = float32(-3.84)",
             lambda x: F().gelu(x, approximate="tanh"), (_full(64, -3.84),),
             twin=lambda x: x * t().sigmoid(2 * math.sqrt(2 / math.pi)
                                            * (x + 0.044715 * x ** 3)),
             twin_note="x sigmoid(2u)", dtype="float32"),
        Case("T25b", "torch", "F.gelu(approximate='tanh')", "x = -5.0625",
             lambda x: F().gelu(x, approximate="tanh"), (_full(64, -5.0625),),
             twin=up(lambda x: x * t().sigmoid(2 * math.sqrt(2 / math.pi)
                                               * (x + 0.044715 * x ** 3))),
             twin_note="x sigmoid(2u) in float32, rounded", dtype="float16"),
        Case("T26", "torch", "torch.logit", "x = 0.498046875", lambda x: t().logit(x),
             (_full(64, 0.498046875),), twin=up(lambda x: t().logit(x)),
             twin_note="in float32, rounded", dtype="bfloat16"),
        Case("T27", "torch", "x ** 3", "x = 728", lambda x: x ** 3,
             (_full(64, 728.0),), twin=up(lambda x: x ** 3),
             twin_note="in float32, rounded", dtype="bfloat16", value_only=True),
        Case("T28", "torch", "torch.rsqrt (1 element)", "x = 7.8142e-05",
             lambda x: t().rsqrt(x), (_full(1, 7.814168930053711e-05),),
             # not torch.rsqrt on 32 elements: its float16 backward, -0.5 g y^3, overflows
             # in y^3 (1.45e6) and returns inf where the gradient is -4552 (check flags it)
             twin=lambda x: 1 / t().sqrt(x),
             twin_inputs=(_full(32, 7.814168930053711e-05),),
             twin_note="1 / sqrt, 32 elements", dtype="float16", value_only=True),
        Case("T29", "torch", "torch.special.i0e (1 element)", "x = 0.0078735",
             lambda x: sp().i0e(x), (_full(1, 0.00787353515625),),
             twin=lambda x: t().special.i0e(x),
             twin_inputs=(_full(64, 0.00787353515625),),
             twin_note="64 elements (vectorized)", dtype="bfloat16", value_only=True),
        Case("T30", "torch", "torch.special.entr", "x = 8896", lambda x: sp().entr(x),
             (_full(64, 8896.0),), twin=up(lambda x: t().special.entr(x)),
             twin_note="in float32, rounded", dtype="bfloat16", value_only=True),
        Case("T31", "torch", "torch.xlogy", "(x, y) = (-23.125, 7392)",
             lambda x, y: t().xlogy(x, y),
             (_full(64, -23.125), _full(64, 7392.0)),
             twin=up(lambda x, y: t().xlogy(x, y)), twin_note="in float32, rounded",
             dtype="bfloat16", value_only=True),
        Case("T32", "torch", "torch.special.xlog1py", "(x, y) = (-1880, 4800)",
             lambda x, y: sp().xlog1py(x, y),
             (_full(64, -1880.0), _full(64, 4800.0)),
             twin=up(lambda x, y: t().special.xlog1py(x, y)), twin_note="in float32, rounded",
             dtype="bfloat16", value_only=True),
        Case("T33", "torch", "torch.sigmoid (backward)", "x = -0.0009765625 (y = 0.49976)",
             lambda x: t().sigmoid(x), (_full(64, -0.0009765625),),
             twin=up(lambda x: t().sigmoid(x)), twin_note="in float32, rounded",
             dtype="float16"),
        Case("T34", "torch", "torch.polygamma(5, .)", "x = 12.4765625",
             lambda x: t().polygamma(5, x), (_full(64, 12.4765625),),
             twin=up(lambda x: t().polygamma(5, x)), twin_note="in float32, rounded",
             dtype="float16", value_only=True),
        Case("T35", "torch", "torch.mvlgamma(., 3)", "x = 52.25",
             lambda x: t().mvlgamma(x, 3), (_full(64, 52.25),),
             twin=up(lambda x: t().mvlgamma(x, 3)), twin_note="in float32, rounded",
             dtype="bfloat16", value_only=True),
        Case("T36", "torch", "torch.special.i1e", "x = 7.8062940",
             lambda x: sp().i1e(x), (_full(64, 7.806293964385986),),
             twin=_t_up64(lambda x: t().special.i1e(x)), twin_note="in float64, rounded",
             dtype="float32", value_only=True),
    ]
    return c


_T21_L = [[1.689588199765824, 0.0, 0.0, 0.0],
          [-0.8840250045832653, 2.724453069785195, 0.0, 0.0],
          [-1.2956271403277857, 1.52363162310635, 4.323660566498374, 0.0],
          [1.1357423400213507, -1.226881339001083, 0.07138847120511693, 4.3380174030507375]]
# torch.manual_seed(0); torch.tril(torch.randn(4, 4, dtype=float64)) + 4 I: the reproducer's L


def _jax_cases() -> list[Case]:
    jnp, jss, jax = _jnp, _jss, _jax
    up = _j_up
    hyp, a2 = (lambda a, b: jnp().hypot(a, b)), (lambda y, x: jnp().arctan2(y, x))
    norm = lambda x: jnp().linalg.norm(x)  # noqa: E731
    return [
        Case("J1", "jax", "jss.spence", "x = 1e-17", lambda x: jss().spence(x),
             (_arr([1e-17]),), twin=lambda x: math.pi ** 2 / 6 + x * jnp().log(x) - x,
             twin_note="pi^2/6 + x log x - x (series)"),
        Case("J2", "jax", "jss.gammainc(1e12, x)", "x = 1e12",
             lambda x: jss().gammainc(1e12, x), (_arr([1e12]),),
             twin=lambda x: jss().gammainc(100.0, x), twin_inputs=(_arr([100.0]),),
             twin_note="gammainc(100, x) at x = 100", value_only=True),
        Case("J3", "jax", "jss.gammaincc(1e12, x)", "x = 1e12",
             lambda x: jss().gammaincc(1e12, x), (_arr([1e12]),),
             twin=lambda x: jss().gammaincc(100.0, x), twin_inputs=(_arr([100.0]),),
             twin_note="gammaincc(100, x) at x = 100", value_only=True),
        Case("J4", "jax", "jss.gammainc", "(1e17, 1e17)", None,
             skip="hangs: gammainc(1e17, 1e17) does not return (J4)"),
        Case("J5", "jax", "jnp.hypot", "(a, b) = (1e200, 3e200)", hyp,
             (_arr([1e200]), _arr([3e200])), twin=_j_scaled(hyp, 1),
             twin_note="m * hypot(a/m, b/m), m = max held"),
        Case("J6", "jax", "jnp.hypot", "(a, b) = (1e-200, 3e-200)", hyp,
             (_arr([1e-200]), _arr([3e-200])), twin=_j_scaled(hyp, 1),
             twin_note="m * hypot(a/m, b/m), m = max held"),
        Case("J7", "jax", "jnp.hypot", "(a, b) = (1e200, 3e200)", hyp,
             (_arr([1e200]), _arr([3e200])), twin=hyp, twin_inputs=(_arr([1.0]), _arr([3.0])),
             twin_note="at (1, 3): the scaled form's second tangents (t/m)^2 underflow",
             order=2),
        Case("J8", "jax", "jnp.arctan2", "(y, x) = (1e200, -3e200)", a2,
             (_arr([1e200]), _arr([-3e200])), twin=_j_scaled(a2, 0),
             twin_note="arctan2 of inputs / max (held)"),
        Case("J9", "jax", "jnp.arctan2", "(y, x) = (1e200, -3e200)", a2,
             (_arr([1e200]), _arr([-3e200])), twin=a2, twin_inputs=(_arr([1.0]), _arr([-3.0])),
             twin_note="at (1, -3): the scaled form's second tangents (t/m)^2 underflow",
             order=2),
        Case("J10", "jax", "jss.log_ndtr", "x = -30", lambda x: jss().log_ndtr(x),
             (_arr([-30.0]),), twin=lambda x: jnp().log(jss().erfc(-x / SQRT2) / 2),
             twin_note="log(erfc(-x/sqrt 2) / 2)"),
        Case("J11", "jax", "jnp.linalg.norm", "[1e200, 1e200]", norm,
             (_arr([1e200, 1e200]),), twin=_j_scaled(norm, 1),
             twin_note="m * norm(x / m), m = max held"),
        Case("J12", "jax", "jnp.linalg.norm", "[1e-200, 3e-200]", norm,
             (_arr([1e-200, 3e-200]),), twin=_j_scaled(norm, 1),
             twin_note="m * norm(x / m), m = max held"),
        Case("J13", "jax", "jss.i0", "x = 0", lambda x: jss().i0(x), (_arr([0.0]),),
             twin=_i0_series, twin_note="Taylor series"),
        Case("J14", "jax", "jax.lax.cumlogsumexp", "[-inf, -inf, 0]",
             lambda v: jax().lax.cumlogsumexp(v), (_arr([-np.inf, -np.inf, 0.0]),),
             twin=lambda v: jax().lax.cumlogsumexp(v), twin_inputs=(_arr([-30.0, -30.0, 0.0]),),
             twin_note="at [-30, -30, 0]"),
        Case("J15", "jax", "jss.i0", "x = 0", lambda x: jss().i0(x), (_arr([0.0]),),
             twin=_i0_series, twin_note="Taylor series", order=2),
        Case("J15b", "jax", "jss.i1", "x = 0", lambda x: jss().i1(x), (_arr([0.0]),),
             twin=_i1_series, twin_note="Taylor series", order=2),
        Case("J16", "jax", "jnp.sinc", "x = 1e-10", lambda x: jnp().sinc(x), (_arr([1e-10]),),
             twin=_sinc_series, twin_note="Taylor series"),
        Case("J17", "jax", "jnp.expm1", "x = -100", lambda x: jnp().expm1(x),
             (_arr([-100.0]),), twin=lambda x: jnp().exp(x) - 1, twin_note="exp(x) - 1"),
        Case("J17b", "jax", "jax.nn.elu", "x = -100", lambda x: jax().nn.elu(x),
             (_arr([-100.0]),), twin=lambda x: jnp().exp(x) - 1, twin_note="exp(x) - 1"),
        Case("J17c", "jax", "jax.nn.selu", "x = -100", lambda x: jax().nn.selu(x),
             (_arr([-100.0]),),
             twin=lambda x: 1.0507009873554805 * 1.6732632423543772 * (jnp().exp(x) - 1),
             twin_note="scale alpha (exp(x) - 1)"),
        Case("J18", "jax", "jnp.arcsinh", "x = 1e200", lambda x: jnp().arcsinh(x),
             (_arr([1e200]),), twin=_log2x, twin_note="log(x) + log 2"),
        Case("J18b", "jax", "jnp.arccosh", "x = 1e200", lambda x: jnp().arccosh(x),
             (_arr([1e200]),), twin=_log2x, twin_note="log(x) + log 2"),
        Case("J19", "jax", "jss.expi", "[-1e-10, 1.0]", None,
             skip="hangs: the forward does not return on [-1e-10, 1.0] (J19)"),
        Case("J20", "jax", "jnp.exp2", "x = 117.5", lambda x: jnp().exp2(x),
             (_full(4, 117.5),), twin=up(lambda x: jnp().exp2(x)),
             twin_note="in float32, rounded", dtype="bfloat16", value_only=True),
        Case("J21", "jax", "jnp.arcsinh", "x = 1.046875", lambda x: jnp().arcsinh(x),
             (_full(4, 1.046875),), twin=up(lambda x: jnp().arcsinh(x)),
             twin_note="in float32, rounded", dtype="bfloat16", value_only=True),
        Case("J21b", "jax", "jnp.arccosh", "x = 1.447265625", lambda x: jnp().arccosh(x),
             (_full(4, 1.447265625),), twin=up(lambda x: jnp().arccosh(x)),
             twin_note="in float32, rounded", dtype="float16", value_only=True),
        Case("J22", "jax", "jax.nn.sigmoid", "x = -5.59375", lambda x: jax().nn.sigmoid(x),
             (_full(4, -5.59375),), twin=up(lambda x: jax().nn.sigmoid(x)),
             twin_note="in float32, rounded", dtype="bfloat16", value_only=True),
        Case("J22b", "jax", "jax.nn.sigmoid", "x = -11.09375", lambda x: jax().nn.sigmoid(x),
             (_full(4, -11.09375),), twin=up(lambda x: jax().nn.sigmoid(x)),
             twin_note="in float32, rounded", dtype="float16"),
        Case("J23", "jax", "x ** -2", "x = 256", lambda x: x ** -2,
             (_full(4, 256.0),), twin=up(lambda x: x ** -2),
             twin_note="in float32, rounded", dtype="float16"),
        Case("J23b", "jax", "x ** -2", "x = 0.5546875", lambda x: x ** -2,
             (_full(4, 0.5546875),), twin=up(lambda x: x ** -2),
             twin_note="in float32, rounded", dtype="bfloat16", value_only=True),
        Case("J24", "jax", "x / 6", "x = 1.5009765625", lambda x: x / 6,
             (_full(4, 1.5009765625),), twin=up(lambda x: x / 6),
             twin_note="in float32, rounded", dtype="float16", value_only=True),
        Case("J25", "jax", "jnp.expm1", "x = 0.22216796875", lambda x: jnp().expm1(x),
             (_full(4, 0.22216796875),), twin=up(lambda x: jnp().expm1(x)),
             twin_note="in float32, rounded", dtype="float16", value_only=True),
        Case("J26", "jax", "jss.gammaln", "x = 1", lambda x: jss().gammaln(x),
             (_full(4, 1.0),), twin=up(lambda x: jss().gammaln(x), "float64"),
             twin_note="in float64, rounded", dtype="float32", value_only=True),
        Case("J26b", "jax", "jss.gammaln", "x = -2.6100488", lambda x: jss().gammaln(x),
             (_full(4, -2.610048770904541),),
             twin=up(lambda x: jss().gammaln(x), "float64"),
             twin_note="in float64, rounded", dtype="float32", value_only=True),
        Case("J27", "jax", "jss.digamma", "x = 1.5654526", lambda x: jss().digamma(x),
             (_full(4, 1.5654525756835938),),
             twin=up(lambda x: jss().digamma(x), "float64"),
             twin_note="in float64, rounded", dtype="float32", value_only=True),
        Case("J28", "jax", "jss.i1e", "x = -7.8062940", lambda x: jss().i1e(x),
             (_full(4, -7.806293964385986),),
             twin=up(lambda x: jss().i1e(x), "float64"),
             twin_note="in float64, rounded", dtype="float32", value_only=True),
    ]


CASES: list[Case] = _torch_cases() + _jax_cases()


def select(only: Sequence[str] | None) -> list[Case]:
    """The cases whose id or finding is in ``only`` (every case without it)."""
    if not only:
        return list(CASES)
    want = set(only)
    return [c for c in CASES if c.id in want or c.finding in want]


# -- running one case --------------------------------------------------------------------------

@dataclass
class Row:
    """What ``check`` said on one side (the finding, or its twin) of one case."""

    id: str
    finding: str
    side: str  # "finding" or "twin"
    engine: str
    op: str
    point: str
    dtype: str
    order: int
    value_only: bool
    verdict: str
    failed_kinds: list[str] = field(default_factory=list)
    known: bool = False  # every failed result carries a known mark
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    detail: str = ""  # the failures (or, for a miss, what was compared)


def engine_available(engine: str) -> bool:
    try:
        __import__(engine)
    except ImportError:
        return False
    return True


def _verdict(report: Any, twin: bool) -> str:
    from gradcheck.core.results import Status

    if any(r.status is Status.ERROR and "did not finish within timeout" in r.message
           for r in report.results):
        return "timeout"
    failed = [r for r in report.results if r.status is Status.FAILED]
    errors = [r for r in report.results if r.status is Status.ERROR]
    if twin:
        return ("false alarm" if failed else "error" if errors
                else "nothing decided" if not report.decided else "pass")
    if failed and not report.passed:
        return "flagged"
    if errors:
        return "error"
    return "nothing decided" if not report.decided else "missed"


def _detail(report: Any, verdict: str, width: int = 400) -> str:
    from gradcheck.core.results import Status

    if verdict in ("flagged", "false alarm"):
        shown = [r for r in report.results if r.status is Status.FAILED]
    elif verdict in ("error", "timeout"):
        shown = [r for r in report.results if r.status is Status.ERROR]
    else:  # a miss, a pass, nothing decided: what was compared and how it came out
        shown = list(report.results)
    return "\n".join(f"[{r.kind.value} {r.status.value}] {r.message[:width]}" for r in shown)


def run_case(case: Case, side: str = "finding", timeout: float = TIMEOUT_S) -> Row:
    """Run ``gradcheck.check`` on one side of ``case`` and classify the report."""
    import gradcheck

    twin = side == "twin"
    row = Row(case.id, case.finding, side, case.engine, case.op, case.point, case.dtype,
              case.order, case.value_only, "skipped")
    fn = case.twin if twin else case.fn
    if case.skip or fn is None:
        row.detail = case.skip or "no twin"
        return row
    if not engine_available(case.engine):
        row.detail = f"{case.engine} is not installed"
        return row
    inputs = case.twin_inputs if twin and case.twin_inputs is not None else case.inputs
    inputs = tuple(cast(x, case.dtype) for x in inputs)
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = gradcheck.check(fn, *inputs, backend=case.engine, dtype=case.dtype,
                                 order=case.order, modes=case.modes, timeout=timeout,
                                 name=f"{case.id} {side}")
    row.seconds = time.perf_counter() - began
    row.verdict = _verdict(report, twin)
    failed = [r for r in report.results if r.status.value == "failed"]
    row.failed_kinds = sorted({r.kind.value for r in failed})
    row.known = bool(failed) and all(r.known for r in failed)
    row.counts = {k: v for k, v in report.counts().items() if v}
    row.detail = _detail(report, row.verdict)
    return row


# -- the table and the totals ------------------------------------------------------------------

def _totals(rows: list[Row]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {"findings": {}, "value-only findings": {}, "twins": {}}
    for r in rows:
        key = ("twins" if r.side == "twin"
               else "value-only findings" if r.value_only else "findings")
        out[key][r.verdict] = out[key].get(r.verdict, 0) + 1
    return out


_RANK = ("flagged", "timeout", "error", "missed", "nothing decided", "skipped")


def per_finding(rows: list[Row]) -> dict[str, dict[str, int]]:
    """The totals per finding (T1, J5, ...), not per case: a finding with several cases takes
    its best verdict (flagged when any case is flagged); value-only when all its cases are."""
    verdicts: dict[str, list[str]] = {}
    value_only: dict[str, bool] = {}
    for r in rows:
        if r.side == "finding":
            verdicts.setdefault(r.finding, []).append(r.verdict)
            value_only[r.finding] = value_only.get(r.finding, True) and r.value_only
    out: dict[str, dict[str, int]] = {"findings": {}, "value-only findings": {}}
    for finding, seen in verdicts.items():
        best = min(seen, key=lambda v: _RANK.index(v) if v in _RANK else len(_RANK))
        key = "value-only findings" if value_only[finding] else "findings"
        out[key][best] = out[key].get(best, 0) + 1
    return out


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def print_table(rows: list[Row]) -> None:
    by_case: dict[str, dict[str, Row]] = {}
    for r in rows:
        by_case.setdefault(r.id, {})[r.side] = r
    widths = [5, 34, 32, 14, 44, 14]
    print(_line(["case", "op", "point", "dtype/order", "verdict (failing kinds)", "twin"],
                widths))
    for cid, sides in by_case.items():
        f, tw = sides.get("finding"), sides.get("twin")
        base = f or tw
        assert base is not None
        verdict = ""
        if f is not None:
            verdict = f.verdict + (" value-only" if f.value_only else "")
            if f.failed_kinds:
                verdict += f" ({', '.join(f.failed_kinds)}{'; known' if f.known else ''})"
        print(_line([cid, base.op[:34], base.point[:32], f"{base.dtype}/{base.order}",
                     verdict, tw.verdict if tw else ""], widths))


def report_rows(rows: list[Row]) -> None:
    print_table(rows)
    print()
    print("per case:")
    for key, counts in _totals(rows).items():
        print(f"  {key}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    print("per finding:")
    for key, counts in per_finding(rows).items():
        print(f"  {key}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    odd = [r for r in rows if r.verdict in ("missed", "nothing decided", "error", "timeout")
           or (r.side == "twin" and r.verdict != "pass")]
    for r in odd:
        print(f"\n-- {r.id} {r.side} ({r.op} at {r.point}, {r.dtype}, order {r.order}): "
              f"{r.verdict}")
        print(r.detail)


def main(argv: Sequence[str] | None = None) -> list[Row]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", help="a case or finding id (repeatable)")
    p.add_argument("--json", help="write the rows to this path")
    p.add_argument("--timeout", type=float, default=TIMEOUT_S)
    a = p.parse_args(argv)
    rows: list[Row] = []
    for case in select(a.only):
        for side in ("finding", "twin"):
            row = run_case(case, side, a.timeout)
            rows.append(row)
            print(f"{case.id:5} {side:7} {row.verdict:16} {row.seconds:6.1f} s", flush=True)
    print()
    report_rows(rows)
    if a.json:
        with open(a.json, "w") as out:
            json.dump([asdict(r) for r in rows], out, indent=1)
    return rows


if __name__ == "__main__":
    main()
