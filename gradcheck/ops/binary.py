"""Elementwise binary ops, with NumPy broadcasting (``*_bcast`` variants broadcast one
argument along axes of size 1 or missing leading axes; the VJP must sum over them).

Special points: ties of ``maximum``/``minimum`` and the origin of ``hypot`` are kinks
(``expect="inconclusive"``); ``logaddexp`` with a ``-inf`` argument has a zero partial.
"""

from __future__ import annotations

import numpy as np

from gradcheck.core.taxonomy import SECOND_ORDER_KINDS
from gradcheck.ops.spec import OpSpec, SpecialPoint, known, normal, point, with_cross_backend_known

S = (3, 4)


_NORMAL = normal(S, S)


def _sample(*parts):
    """A sampler of one array per ``(kind, shape)`` part; kinds: ``"n"`` standard normal,
    ``"p"`` positive in [0.5, 2.5), ``"nz"`` normal pushed away from zero (|x| >= 0.5)."""

    def sample(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        out = []
        for kind, shape in parts:
            if kind == "p":
                out.append(rng.uniform(0.5, 2.5, shape))
            elif kind == "nz":
                x = rng.standard_normal(shape)
                out.append(np.sign(x) * (0.5 + np.abs(x)))
            else:
                out.append(rng.standard_normal(shape))
        return tuple(out)

    return sample


def _apart(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Two arrays whose elements differ by at least 0.3 (no near-ties within the FD steps)."""
    a = rng.standard_normal(S)
    gap = rng.choice([-1.0, 1.0], S) * (0.3 + np.abs(rng.standard_normal(S)))
    return a, a + gap


def _b(name: str, sample=_NORMAL, special: tuple[SpecialPoint, ...] = (), **kw) -> OpSpec:
    return OpSpec(name, "binary", 2, sample, special=special, **kw)


_DOC = "docs/known-discrepancies.md"
_ATAN2 = tuple(k for b in ("torch", "jax") for k in known(
    b, "the partials b / (a^2 + b^2) overflow to 0 for |a|, |b| > 1e154 (exact: -3e-201 at "
    "(1e200, -3e200)); dividing by hypot(a, b) twice is exact", checks=("vjp", "jvp", "reference"),
    points=("huge",), link=_DOC)) + known(
    "jax", "order 2 at (1e200, -3e200): the forward-over-reverse and forward-over-forward "
    "second derivatives come out nan (a^2 + b^2 overflows); exact values ~6e-402, which are 0 "
    "in float64, as jax's reverse over reverse gives", checks=("jvp_of_vjp", "jvp_of_jvp"),
    dtypes=("float64",), points=("huge",), link=_DOC)
_POW = known("torch", "torch's pow backward w.r.t. the base is where(b == 0, 0, b a^(b-1)): a "
             "constant where the exponent is 0, so the mixed second derivative d/db (d/da a^b) "
             "there is 0 instead of a^(b-1) (1 + b log a) = 1/a (d/da (d/db a^b) is right: the "
             "Hessian comes out asymmetric)", checks=SECOND_ORDER_KINDS,
             points=("exponent_zero", "base_one"),
             link="https://github.com/pytorch/pytorch/issues/89757")
_HYPOT = known("jax", "jax.numpy.hypot's derivative w.r.t. the larger argument is r / b instead of "
               "b / r once a^2 + b^2 overflows (1.054 vs 0.949 at (1e200, 3e200); float32 from "
               "1e20); nan / -inf once it underflows (1e-200)", checks=("vjp", "jvp", "reference"),
               points=("huge",), link=_DOC) + known(
    "jax", "see hypot@huge: nan / -inf partials once a^2 + b^2 underflows",
    checks=("reference",), points=("tiny",), link=_DOC) + known(
    "jax", "order 2 at (1e200, 3e200): finite differences of the wrong first derivative "
    "(hypot@huge) disagree with jax's second derivatives, which are wrong too (d2/da db "
    "+1.05e-201 instead of -ab / r^3 = -9.5e-202; d2/db2 0 instead of 3.2e-202; torch exact)",
    checks=SECOND_ORDER_KINDS, dtypes=("float64",), points=("huge",), link=_DOC)
_LOGADDEXP = known("torch", "torch's logaddexp backward grad / (1 + exp(a - b)) has the derivative "
                   "-exp(a - b) / (1 + exp(a - b))^2 = -inf / inf = nan once exp(a - b) "
                   "overflows (a - b > 709.8, or b = -inf); exact -sigmoid(a - b) sigmoid(b - a), "
                   "0 in float64 there (jax: 0)", checks=SECOND_ORDER_KINDS,
                   points=("far_apart", "minus_inf"), link=_DOC)
_A = np.array([[0.3, -1.2, 2.0, 0.0], [1.5, -0.7, 0.9, -2.2], [0.1, 1.1, -0.4, 0.6]])
_TIE = (point("tie", _A, _A.copy(), expect="inconclusive"),
        point("tie_at_zero", np.zeros(S), np.zeros(S), expect="inconclusive"))

SPECS: tuple[OpSpec, ...] = (
    _b("add", special=(point("zeros", np.zeros(S), np.zeros(S)),)),
    _b("sub"),
    _b("mul", special=(point("zeros", np.zeros(S), np.zeros(S)),)),
    _b("div", _sample(("n", S), ("nz", S)), (
        point("tiny_divisor", _A, np.full(S, 1e-150), fd=False),)),
    _b("pow", _sample(("p", S), ("n", S)), (
        point("integer_exponent", np.abs(_A) + 0.5, np.full(S, 3.0)),
        point("exponent_zero", np.abs(_A) + 0.5, np.zeros(S)),
        point("base_one", np.ones(S), _A)), known=_POW),
    _b("atan2", _sample(("nz", S), ("nz", S)), (
        point("on_axes", np.array([0.0, 1.0, 0.0, -1.0] * 3).reshape(S),
              np.array([1.0, 0.0, 2.0, 0.0] * 3).reshape(S)),
        point("huge", np.full(S, 1e200), np.full(S, -3e200))), known=_ATAN2),
    _b("hypot", _sample(("n", S), ("nz", S)), (
        point("origin", np.zeros(S), np.zeros(S), expect="inconclusive"),
        point("one_zero", np.zeros(S), np.abs(_A) + 0.5),
        point("huge", np.full(S, 1e200), np.full(S, 3e200)),
        point("tiny", np.full(S, 1e-200), np.full(S, 3e-200), fd=False)), known=_HYPOT),
    _b("maximum", _apart, _TIE),
    _b("minimum", _apart, _TIE),
    _b("logaddexp", special=(
        point("minus_inf", np.full(S, -np.inf), _A),
        point("far_apart", np.full(S, 800.0), np.full(S, -5.0))), known=_LOGADDEXP),
    _b("add_bcast", normal(S, (4,))),
    _b("mul_bcast", normal((3, 1), (1, 4))),
    _b("div_bcast", _sample(("n", S), ("nz", (3, 1)))),
    _b("mul_scalar", normal(S, ())),
)

# the ops of the quick profile (every plain `pytest` run)
QUICK: tuple[str, ...] = ("atan2", "maximum")


SPECS = with_cross_backend_known(SPECS, {
    ("hypot", "huge"): "jax",
    ("hypot", "tiny"): "jax",
}, "docs/known-discrepancies.md")
