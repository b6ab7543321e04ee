"""Reductions and scans: sum, mean, prod (with zeros), logsumexp (with ``-inf`` entries),
var/std, the L2 norm (the zero vector is a kink; tiny and huge vectors test scaling),
max/min (ties are kinks), cumsum, cumprod (with zeros), logcumsumexp.

``_axis1`` ops reduce/scan along the last axis of a ``(3, 4)`` array; the others reduce all.
"""

from __future__ import annotations

import numpy as np

from gradcheck.core.taxonomy import SECOND_ORDER_KINDS
from gradcheck.ops.spec import OpSpec, SpecialPoint, known, normal, point, with_cross_backend_known

S = (3, 4)
_A = np.array([[0.3, -1.2, 2.0, 0.4], [1.5, -0.7, 0.9, -2.2], [0.1, 1.1, -0.4, 0.6]])
_NEG_INF = np.where(np.array([[1, 0, 1, 1], [1, 1, 0, 0], [1, 0, 0, 1]]) == 1, _A, -np.inf)
_ZEROS_ROWS = np.array([[0.7, 0.0, -1.3, 1.1], [0.0, 0.9, 0.0, -0.6], [1.2, -0.8, 0.5, 1.4]])


_NORMAL = normal(S)


def _signed(low: float, high: float, shape: tuple[int, ...]):
    """Magnitudes in ``[low, high)`` with random signs (keeps products well scaled)."""

    def sample(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return (rng.choice([-1.0, 1.0], shape) * rng.uniform(low, high, shape),)

    return sample


_NORM_WHY = ("the L2 norm is computed as sqrt(sum x^2) without scaling: it overflows to inf for "
             "|x| > 1e154 (true value 3.7e200 here), so value and gradient are lost")
_NORM = known("torch", "torch.linalg.vector_norm: " + _NORM_WHY,
              checks=("vjp", "jvp", "fwd_rev", "eager_func", "reference"), dtypes=("float64",),
              points=("huge",), link="docs/known-discrepancies.md") + known(
    "jax", "jnp.linalg.norm: " + _NORM_WHY, checks=("vjp", "jvp", "fwd_rev", "reference"),
    dtypes=("float64",), points=("huge",), link="docs/known-discrepancies.md") + tuple(
    k for b in ("torch", "jax") for k in known(
        b, "order 2 at 1e200 entries: the forward overflows to inf (see norm@huge), so the "
        "order-2 checks have no finite point to differentiate at and produce no result",
        checks=SECOND_ORDER_KINDS, dtypes=("float64",),
        points=("huge",), link="docs/known-discrepancies.md"))


_NORM_TINY = tuple(k for b in ("torch", "jax") for k in known(
    b, "the unscaled sum of squares underflows to 0 for |x| < 1e-154: the norm of a 1e-200 "
    "vector comes out 0 and its gradient 0 or nan (true: x / ||x||, entries ~0.1-0.6)",
    checks=("reference",), dtypes=("float64",), points=("tiny",),
    link="docs/known-discrepancies.md"))


def _distinct(shape: tuple[int, ...]):
    """Entries at least 0.3 apart (a shuffled ladder plus small noise): the extremum cannot
    switch within the oracle's steps, so max/min are smooth around the sample."""

    def sample(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        n = int(np.prod(shape))
        ladder = 0.4 * rng.permutation(n) - 0.2 * n + rng.uniform(-0.05, 0.05, n)
        return (ladder.reshape(shape),)

    return sample


def _r(name: str, sample=_NORMAL, special: tuple[SpecialPoint, ...] = (), **kw) -> OpSpec:
    return OpSpec(name, "reduction", 1, sample, special=special, **kw)


def _tie(a: np.ndarray, where: tuple, value: float) -> SpecialPoint:
    b = a.copy()
    b[where] = value
    return point("tie", b, expect="inconclusive")


SPECS: tuple[OpSpec, ...] = (
    _r("sum", special=(point("mixed_scale", _A * np.logspace(-8, 8, 12).reshape(S)),)),
    _r("sum_axis1"),
    _r("mean"),
    _r("mean_axis0"),
    _r("prod", _signed(0.5, 1.5, (6,)), (
        point("one_zero", np.array([0.7, 0.0, -1.3, 1.1, 0.9, -0.6])),
        point("two_zeros", np.array([0.7, 0.0, -1.3, 0.0, 0.9, -0.6])))),
    _r("prod_axis1", _signed(0.5, 1.5, S), (point("zeros", _ZEROS_ROWS),)),
    _r("logsumexp", special=(point("minus_inf", _NEG_INF), point("large", _A + 1000.0, fd=False))),
    _r("logsumexp_axis1", special=(point("minus_inf", _NEG_INF),)),
    _r("var", known=known(
        "jax", "oracle limitation, not a wrong jax derivative: the search reaches a constant "
        "array, where the exact gradient 2 (x - mean) / n is 0 and jax's jitted VJP returns "
        "~1e-20 (the mean off by 1 ulp: backward stable), which the rounding bound, relative "
        "to the compared terms, calls a failure (tests/oracle/test_oracle_limitations.py)",
        checks=("search",), dtypes=("float32",), points=("random",),
        link="docs/known-discrepancies.md")),
    _r("var_axis1"),
    _r("std", special=(point("constant", np.full(S, 0.7), expect="inconclusive"),)),
    _r("norm", special=(
        point("zero", np.zeros(S), expect="inconclusive"),
        point("tiny", _A * 1e-200, fd=False), point("huge", _A * 1e200)),
       known=_NORM + _NORM_TINY),
    _r("norm_axis1", special=(point("tiny", _A * 1e-200, fd=False),), known=_NORM_TINY),
    _r("max", _distinct(S), special=(_tie(_A, (1, 2), 2.0),)),
    _r("min", _distinct(S), special=(_tie(_A, (0, 0), -2.2),)),
    _r("max_axis1", _distinct(S), special=(_tie(_A, (0, 3), 2.0),)),
    _r("cumsum_axis1"),
    _r("cumprod_axis1", _signed(0.5, 1.5, S), (point("zeros", _ZEROS_ROWS),), known=known(
        "torch", "forward over forward at rows with zeros: torch's cumprod JVP is not "
        "differentiable in forward mode there, the Hessian of torch.cumprod comes out "
        "asymmetric (row [0.7, 0, -1.3, 1.1], last output: d2/dx0 dx1 0 instead of -1.43, "
        "which reverse mode gives)", checks=("jvp_of_jvp",), points=("zeros",),
        link="docs/known-discrepancies.md")),
    _r("logcumsumexp_axis1", special=(point("minus_inf", _NEG_INF),), known=known(
        "torch", "torch's forward-mode rule of logcumsumexp has relative error ~1e-13 (500 eps; "
        "e.g. at x = 0 the JVP is cumsum(t) / k off by 1e-13), its reverse mode is exact: "
        "forward and reverse disagree", checks=("fwd_rev", "search"),
        points=("random", "minus_inf"), link="docs/known-discrepancies.md") + known(
        "jax", "jax.lax.cumlogsumexp returns nan derivatives for rows with trailing -inf "
        "entries (true: 0 there, softmax-like weights elsewhere)",
        checks=("vjp", "jvp", "fwd_rev", "reference", "rounding", *SECOND_ORDER_KINDS),
        points=("minus_inf",),
        link="docs/known-discrepancies.md")),
)

# the ops of the quick profile (every plain `pytest` run)
QUICK: tuple[str, ...] = ("prod", "logsumexp")


SPECS = with_cross_backend_known(SPECS, {
    ("norm", "tiny"): "torch",
    ("norm_axis1", "tiny"): "torch",
    ("logcumsumexp_axis1", "minus_inf"): "jax",
}, "docs/known-discrepancies.md")
