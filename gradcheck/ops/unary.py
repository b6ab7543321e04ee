"""Elementwise unary ops: trigonometric, hyperbolic, exponential, logarithmic, activations,
special functions of one argument.

Samples are ``(3, 4)`` arrays inside each op's smooth domain; special points are where bugs
cluster: zeros, removable singularities, saturation (derivatives far below what finite
differences resolve: only the hand-derived reference sees them), reflection regions, the
neighbourhood of domain edges and kinks (``expect="inconclusive"``).
"""

from __future__ import annotations

import numpy as np

from gradcheck.core.taxonomy import SECOND_ORDER_KINDS
from gradcheck.ops.spec import (
    KnownDiscrepancy,
    OpSpec,
    SpecialPoint,
    known,
    normal,
    point,
    uniform,
    with_cross_backend_known,
)

S = (3, 4)
_MIXED = np.array([[-2.5, -1.0, -0.3, 0.2], [0.7, 1.1, 1.9, -0.8], [2.6, -1.7, 0.05, -0.05]])


_REFLECTION = np.linspace(-3.8, -0.2, 12).reshape(S) + 0.03  # negative non-integers


_NORMAL = normal(S)


def _saturated(level: float, fd: bool = True) -> SpecialPoint:
    """Half the elements at ``+level``, half at ``-level`` (signs interleaved)."""
    return point("saturated", np.where(np.arange(12).reshape(S) % 2 == 0, level, -level), fd=fd)


def _const(name: str, value: float, expect: str = "passed", fd: bool = True) -> SpecialPoint:
    return point(name, np.full(S, value), expect=expect, fd=fd)


def _away(gap: float):
    """Normal samples pushed at least ``gap`` away from 0 (a kink of the op): the FD steps of
    the oracle never straddle it."""

    def sample(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        x = rng.standard_normal(S)
        return (np.sign(x) * (gap + np.abs(x)),)

    return sample


def _u(name: str, sample=_NORMAL, special: tuple[SpecialPoint, ...] = (), *,
       order2: bool = True, known: tuple[KnownDiscrepancy, ...] = (), doc: str = "") -> OpSpec:
    return OpSpec(name, "unary", 1, sample, special=special, order2=order2, known=known, doc=doc)


F64 = ("float64",)
F64_32 = ("float64", "float32")
_DOC = "docs/known-discrepancies.md"
_FROM_OUTPUT = ("the rule reuses the rounded output y: at saturation y rounds to +-1 (or -1 for "
                "expm1) and the derivative cancels to exactly 0, while the true derivative is "
                "~4e-18 (mpmath); below what finite differences resolve")
#: the kinds these rules fail: the reference check (the hand-derived rule) and, where the
#: function is the engine's own by name, check's mpmath check of the VJP (the projections
#: cannot resolve 4e-18 beside 1)
_FAILS = ("reference", "vjp")
_TANH = known("torch", "tanh' computed as 1 - tanh^2: " + _FROM_OUTPUT, checks=_FAILS,
              dtypes=F64, points=("saturated",), link=_DOC) + known(
    "jax", "tanh' computed as (1 + y)(1 - y): " + _FROM_OUTPUT, checks=_FAILS,
    dtypes=F64, points=("saturated",), link=_DOC)
_SIGMOID = known("torch", "sigmoid' computed as y (1 - y): " + _FROM_OUTPUT,
                 checks=_FAILS, dtypes=F64, points=("saturated",), link=_DOC) + known(
    "jax", "sigmoid' computed as y (1 - y): " + _FROM_OUTPUT, checks=_FAILS, dtypes=F64,
    points=("saturated",), link=_DOC)
_EXPM1 = tuple(k for b in ("torch", "jax") for k in known(
    b, "expm1' computed as expm1(x) + 1: " + _FROM_OUTPUT, checks=_FAILS, dtypes=F64,
    points=("very_negative",), link=_DOC))
_ELU = known("jax", "jax.nn.elu differentiates through expm1, whose derivative expm1(x) + 1 "
             "cancels to 0 for x < -37 (true: exp(x) ~ 4e-18 at -40)", checks=_FAILS,
             dtypes=F64, points=("very_negative",), link=_DOC)
_SOFTPLUS = known("torch", "F.softplus(threshold=20) returns x and derivative exactly 1 for "
                  "x > 20 (documented); true derivative at 25 is 1 - 1.4e-11", checks=(
                      "reference",), dtypes=F64, points=("large",), link=_DOC)
_GELU = known("torch", "F.gelu computes x * 0.5 * (1 + erf(x / sqrt 2)): the forward cancels to "
              "0 for x < -5.9 (true -7.6e-23 at -10) and the backward drops the cdf term "
              "(1 % error), so the gradient disagrees with torch's own forward and the truth",
              checks=("vjp", "jvp", "reference", "rounding"), points=("very_negative",),
              link=_DOC) + known(
    "torch", "order 2 at -10: torch's second derivative is exact ((2 - x^2) phi(x) = -7.5407e-21, "
    "mpmath), but the order-2 checks differentiate torch's first derivative, which drops the "
    "cdf term (x phi(x)), by finite differences: (1 - x^2) phi(x), 1 % off",
    checks=SECOND_ORDER_KINDS, points=("very_negative",), link=_DOC)
_LOGSIGMOID = known("torch", "log_sigmoid's double backward computes (sigmoid(x) - 1) sigmoid(x): "
                    "sigmoid(x) rounds to 1 for x > 36.7 and the second derivative cancels to "
                    "exactly 0 (true -sigmoid(x) sigmoid(-x) = -4.248e-18 at 40, mpmath); the "
                    "first derivative sigmoid(-x) is exact", checks=SECOND_ORDER_KINDS,
                    points=("very_positive",), link=_DOC)
_I0 = known("jax", "jax.scipy.special.i0 = exp(|x|) i0e(x) differentiates |x| at 0 as +1: "
            "i0'(0) comes out 1 instead of i1(0) = 0", checks=("vjp", "jvp", "reference"),
            points=("zero",), link=_DOC) + known(
    "jax", "order 2 at x = 0: i0''(0) comes out 1.5 instead of 0.5, and the first derivative "
    "jumps there (1 at 0, i1(x) ~ x / 2 next to it), so finite differences of it do not resolve",
    checks=SECOND_ORDER_KINDS, points=("zero",), link=_DOC) + known(
    "jax", "the search reaches x = 0, where i0'(0) comes out 1 (see i0@zero)", checks=("search",),
    dtypes=F64_32, points=("random",), link=_DOC)
_SINC_WHY = ("sinc' at 1e-5 is computed as (cos(pi x) - sinc(x)) / x (or an equivalent form) "
             "that cancels: relative error ~3e-7 in float64")
_SINC_O2 = ("the second derivative at 1e-5 cancels the same way: relative error 7e-7 (torch) "
            "and 2e-7..8e-7 (jax, by mode) against -3.2898681327 (mpmath)")
_SINC_SEARCH = "the search reaches |x| << 1, where sinc' cancels (see sinc@near_zero)"
_SINC = known("torch", _SINC_WHY, checks=("vjp", "jvp", "reference", "cross_backend"),
              points=("near_zero",),
              link=_DOC) + known("jax", _SINC_WHY + "; forward and reverse mode cancel "
                                 "differently, so they also disagree with each other",
                                 checks=("vjp", "jvp", "fwd_rev", "reference"),
                                 points=("near_zero",), link=_DOC) + tuple(
    k for b in ("torch", "jax") for k in known(b, _SINC_O2, checks=SECOND_ORDER_KINDS,
                                                 points=("near_zero",), link=_DOC)) + known(
    "torch", "torch's sinc backward is where(x == 0, 0, ...): a constant at 0, so the second "
    "derivative there is nan (reverse over reverse) or 0 (forward mode) instead of "
    "-pi^2 / 3 = -3.29", checks=SECOND_ORDER_KINDS, points=("zero",),
    link="https://github.com/pytorch/pytorch/issues/89459") + known(
    "jax", _SINC_SEARCH, checks=("search",), dtypes=F64_32, points=("random",),
    link=_DOC) + known("torch", _SINC_SEARCH, checks=("search",), dtypes=("float32",),
                       points=("random",), link=_DOC) + known(
    "torch", _SINC_SEARCH + " (x ~ 6e-8: relative error 4e-3, the thorough profile's longer "
    "search), and tiny x, where torch's sinc' is 0 while -pi^2 x / 3 is a normal number "
    "(4.26e-263: -1.4e-262, check's mpmath check)", checks=("search",), dtypes=F64,
    points=("random",), link=_DOC)
_TRIGAMMA = ("torch's float64 trigamma (polygamma(1, x), the derivative of digamma and second "
             "derivative of lgamma) truncates its asymptotic series: relative error up to 5e-10 "
             "(mpmath), far above float64 rounding")
_DIGAMMA = known("torch", _TRIGAMMA, checks=("vjp", "jvp", "reference", *SECOND_ORDER_KINDS,
                                            "search"), dtypes=F64,
                 points=("random",),
                 link=_DOC) + known("torch", _TRIGAMMA,
                                    checks=("vjp", "jvp", *SECOND_ORDER_KINDS, "search"),
                                    dtypes=("float32",), points=("random",), link=_DOC) + known(
    "torch", _TRIGAMMA, checks=("reference",), dtypes=F64, points=("reflection",),
    link=_DOC)
_LGAMMA = known("torch", _TRIGAMMA, checks=SECOND_ORDER_KINDS, dtypes=F64_32, points=("random",),
                link=_DOC)
_EXP = known("jax", "oracle limitation, not a wrong jax derivative: the full 12x12 Jacobian of "
             "jax's JVP agrees with finite differences to 6e-15 relative, but the projected "
             "order-2 value (-3.6e-304) sums products exp(x) t s below the smallest normal "
             "2.2e-308, which XLA on CPU flushes to zero (jax-ml/jax#16200): an absolute error "
             "(4.9e-309) the rounding bound, relative only, does not allow for",
             checks=("jvp_of_jvp",), dtypes=F64, points=("underflow",), link=_DOC)
SPECS: tuple[OpSpec, ...] = (
    _u("sin", special=(_const("zero", 0.0), point("mixed", _MIXED))),
    _u("cos", special=(_const("zero", 0.0),)),
    _u("tan", uniform(-1.3, 1.3, S), (_const("near_pole", 1.55, fd=False), _const("zero", 0.0))),
    _u("tanh", special=(_const("zero", 0.0), _saturated(20.7)), known=_TANH),
    _u("sinh", special=(_const("zero", 0.0), _saturated(300.0))),
    _u("cosh", special=(_const("zero", 0.0), _saturated(300.0))),
    _u("arcsin", uniform(-0.9, 0.9, S), (_const("zero", 0.0), _saturated(0.999))),
    _u("arccos", uniform(-0.9, 0.9, S), (_saturated(0.999),)),
    _u("arctan", special=(_const("zero", 0.0), _saturated(1e8))),
    _u("arcsinh", special=(_const("zero", 0.0), _saturated(1e6))),
    _u("arccosh", uniform(1.2, 4.0, S), (_const("near_one", 1.001, fd=False),)),
    _u("arctanh", uniform(-0.9, 0.9, S), (_const("zero", 0.0), _saturated(0.999, fd=False))),
    _u("exp", special=(_const("near_overflow", 690.0), _const("underflow", -700.0)), known=_EXP),
    _u("exp2", special=(_const("zero", 0.0),)),
    _u("expm1", special=(_const("tiny", 1e-10), _const("zero", 0.0),
                         _const("very_negative", -40.0)),
       known=_EXPM1),
    _u("log", uniform(0.2, 5.0, S), (_const("small", 1e-3), _const("huge", 1e300))),
    _u("log2", uniform(0.2, 5.0, S)),
    _u("log10", uniform(0.2, 5.0, S)),
    _u("log1p", uniform(-0.8, 4.0, S), (_const("tiny", 1e-12), _const("near_minus_one", -0.999))),
    _u("sqrt", uniform(0.2, 5.0, S), (_const("small", 1e-4), _const("huge", 1e300))),
    _u("rsqrt", uniform(0.2, 5.0, S), (_const("small", 1e-4),)),
    _u("sigmoid", special=(_const("zero", 0.0), _saturated(40.0)), known=_SIGMOID),
    _u("logsigmoid", special=(_const("very_negative", -40.0), _const("very_positive", 40.0)),
       known=_LOGSIGMOID),
    _u("softplus", special=(_const("very_negative", -40.0), _const("large", 25.0)),
       known=_SOFTPLUS),
    _u("silu", special=(_const("zero", 0.0), _saturated(40.0))),
    _u("gelu", special=(_const("zero", 0.0), _const("very_negative", -10.0)), known=_GELU),
    _u("elu", _away(0.2), (_const("small_negative", -1e-3, fd=False),
                        _const("very_negative", -40.0)), known=_ELU),
    _u("erf", special=(_const("zero", 0.0), _saturated(6.0))),
    _u("erfc", special=(_const("large", 10.0), _const("very_negative", -6.0))),
    _u("erfinv", uniform(-0.9, 0.9, S), (_const("zero", 0.0), _saturated(0.999999))),
    _u("lgamma", uniform(0.2, 6.0, S), (
        point("reflection", _REFLECTION, fd=False), _const("large", 1e6)), known=_LGAMMA),
    _u("digamma", uniform(0.2, 6.0, S), (
        point("reflection", _REFLECTION, fd=False), _const("near_pole", -0.999, fd=False)),
       known=_DIGAMMA),
    _u("sinc", special=(_const("zero", 0.0), _const("near_zero", 1e-5),
                        _const("integer", 2.0, fd=False)), known=_SINC),
    _u("i0", special=(_const("zero", 0.0), _const("large", 50.0)), known=_I0),
    _u("abs", _away(0.2), (_const("zero", 0.0, expect="inconclusive"),)),
    _u("square", special=(_const("zero", 0.0),)),
    _u("reciprocal", uniform(0.3, 3.0, S), (_const("tiny", 1e-5, fd=False), _const("huge", 1e5))),
    _u("relu", _away(0.2), (_const("zero", 0.0, expect="inconclusive"),)),
)

# the ops of the quick profile (every plain `pytest` run)
QUICK: tuple[str, ...] = ("tanh", "sinc", "relu")


SPECS = with_cross_backend_known(SPECS, {
    ("softplus", "large"): "torch",
    ("gelu", "very_negative"): "torch",
    ("elu", "very_negative"): "jax",
    ("digamma", "reflection"): "torch",
    ("digamma", "random"): "torch",
    ("sinc", "near_zero"): "torch",
    ("i0", "zero"): "jax",
}, "docs/known-discrepancies.md")
