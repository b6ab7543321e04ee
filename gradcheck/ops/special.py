"""Special functions: beta/gamma family, polygamma, xlogy, the normal distribution, Bessel.

``gammainc``/``gammaincc`` are differentiated in ``x`` only (``diff_args=(1,)``): torch has no
derivative in the shape parameter.  Special points: ``xlogy(0, y)`` (the partial in ``x`` is
``log y`` even where the value is defined as 0), tails of ``log_ndtr``/``ndtri``/``logit``,
the reflection region of ``polygamma``, ``i1`` at 0.
"""

from __future__ import annotations

import numpy as np

from gradcheck.core.taxonomy import SECOND_ORDER_KINDS
from gradcheck.ops.spec import (
    OpSpec,
    SpecialPoint,
    known,
    normal,
    point,
    uniform,
    with_cross_backend_known,
)

S = (3, 4)
_DOC = "docs/known-discrepancies.md"
_TRIGAMMA_O2 = ("second derivatives go through torch's float64 trigamma, whose truncated "
                "asymptotic series is accurate only to ~5e-10 (mpmath)")
_Y = np.array([[0.6, 1.7, 2.5, 0.9], [3.0, 0.75, 1.2, 2.2], [0.55, 1.4, 2.8, 1.9]])


def _sp(name: str, arity: int, sample, special: tuple[SpecialPoint, ...] = (), **kw) -> OpSpec:
    return OpSpec(name, "special", arity, sample, special=special, **kw)


def _away_from_zero(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Normal samples (scale 3) at least 0.3 away from the kink of ``i0e`` at 0."""
    x = rng.standard_normal(S) * 3.0
    return (np.sign(x) * (0.3 + np.abs(x)),)


def _pair(first, second):
    def sample(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return first(rng) + second(rng)

    return sample


SPECS: tuple[OpSpec, ...] = (
    _sp("betaln", 2, uniform(0.5, 5.0, S, S), known=known(
        "torch", _TRIGAMMA_O2, checks=SECOND_ORDER_KINDS, dtypes=("float64", "float32"),
        points=("random",), link=_DOC)),
    _sp("polygamma1", 1, uniform(0.3, 5.0, S), known=known(
        "torch", "torch's float64/float32 trigamma forward truncates its asymptotic series "
        "(relative error up to 5e-10, mpmath); its backward polygamma(2, x) is accurate, so it "
        "disagrees with finite differences of torch's own forward", checks=("vjp", "jvp"),
        points=("random",), link=_DOC) + known(
        "torch", "the search reaches x = 1, where torch's trigamma forward is 1.6449340676383 "
        "instead of pi^2/6 = 1.6449340668482 (see polygamma1, random)", checks=("search",),
        points=("random",), link=_DOC), special=(
        point("reflection", np.linspace(-3.8, -0.2, 12).reshape(S) + 0.03, fd=False),)),
    _sp("polygamma2", 1, uniform(0.3, 5.0, S)),
    _sp("xlogy", 2, _pair(normal(S), uniform(0.5, 3.0, S)), (
        point("x_zero", np.zeros(S), _Y),)),
    _sp("xlog1py", 2, _pair(normal(S), uniform(-0.5, 3.0, S)), (
        point("x_zero", np.zeros(S), _Y - 0.4),)),
    _sp("log_ndtr", 1, normal(S, scale=2.0), (
        point("very_negative", np.full(S, -30.0)), point("positive_tail", np.full(S, 10.0))),
        known=known("jax", "jax.scipy.special.log_ndtr's derivative at -30 is 30.0332596722 vs "
                    "30.0332596674 (mpmath): relative error 1.6e-10", checks=("vjp", "jvp",
                                                                            "reference"),
                    points=("very_negative",), link=_DOC) + known(
            "jax", "order 2 at -30: jax's second derivative is -0.998896371727 vs "
            "-0.998896228488 (mpmath): relative error 1.4e-7", checks=SECOND_ORDER_KINDS,
            points=("very_negative",), link=_DOC) + known(
            "jax", "float32 at -30: jax's derivative is 30.0325775 vs 30.0332597 (mpmath), "
            "relative 2.3e-5 (190 eps; torch's float32: 1.5e-5)", checks=("rounding",),
            dtypes=("float32",), points=("very_negative",), link=_DOC)),
    _sp("ndtri", 1, uniform(0.05, 0.95, S), (point("tail", np.full(S, 1e-10), fd=False),)),
    _sp("ndtr", 1, normal(S, scale=2.0), (point("tail", np.full(S, -20.0)),), known=known(
        "torch", "torch.special.ndtr computes 0.5 (1 + erf(x / sqrt 2)), which cancels to 0 for "
        "x < -8.3 (true 2.75e-89 at -20); its backward (the density) is exact, so the gradient "
        "disagrees with torch's own flat forward", checks=("vjp", "jvp"), points=("tail",),
        link=_DOC)),
    _sp("i0e", 1, _away_from_zero, (point("zero", np.zeros(S), expect="inconclusive"),)),
    _sp("i1", 1, normal(S, scale=2.0), (point("zero", np.zeros(S)),), known=known(
        "jax", "jax.scipy.special.i1 = exp(|x|) i1e(x): its second derivative at 0 comes out "
        "1.0 instead of 0 (i1 is odd; the |x| differentiated at 0, as for i0@zero)",
        checks=SECOND_ORDER_KINDS, points=("zero",), link=_DOC)),
    _sp("i1e", 1, normal(S, scale=3.0)),
    _sp("entr", 1, uniform(0.1, 3.0, S)),
    _sp("logit", 1, uniform(0.05, 0.95, S), (
        point("near_zero", np.full(S, 1e-10), fd=False),
        point("near_one", np.full(S, 1.0 - 2.0**-30), fd=False))),
    # FD steps stay inside a > 1; float64 forward over forward passes at its seed (ratio 0.98)
    _sp("multigammaln", 1, uniform(3.0, 7.0, S), known=known(
        "torch", _TRIGAMMA_O2, checks=("vjp_of_vjp", "jvp_of_vjp"), dtypes=("float64",),
        points=("random",), link=_DOC) + known(
        "torch", _TRIGAMMA_O2, checks=SECOND_ORDER_KINDS, dtypes=("float32",), points=("random",),
        link=_DOC)),
    _sp("gammainc", 2, uniform(0.5, 4.0, S, S), diff_args=(1,)),
    _sp("gammaincc", 2, uniform(0.5, 4.0, S, S), diff_args=(1,)),
)

# the ops of the quick profile (every plain `pytest` run)
QUICK: tuple[str, ...] = ("xlogy", "betaln")


SPECS = with_cross_backend_known(SPECS, {
    ("log_ndtr", "very_negative"): "jax",
}, "docs/known-discrepancies.md")
