"""Elementwise binary ops, with NumPy broadcasting (``*_bcast`` variants broadcast one
argument along axes of size 1 or missing leading axes; the VJP must sum over them).

Special points: ties of ``maximum``/``minimum`` and the origin of ``hypot`` are kinks
(``expect="inconclusive"``); ``logaddexp`` with a ``-inf`` argument has a zero partial.
"""

from __future__ import annotations

import numpy as np

from .spec import OpSpec, SpecialPoint, known, normal, point

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
    points=("huge",), link=_DOC))
_HYPOT = known("jax", "jax.numpy.hypot's derivative w.r.t. the larger argument is r / b instead of "
               "b / r once a^2 + b^2 overflows (1.054 vs 0.949 at (1e200, 3e200); float32 from "
               "1e20); nan / -inf once it underflows (1e-200)", checks=("vjp", "jvp", "reference"),
               points=("huge",), link=_DOC) + known(
    "jax", "see hypot@huge: nan / -inf partials once a^2 + b^2 underflows",
    checks=("reference",), points=("tiny",), link=_DOC)
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
        point("base_one", np.ones(S), _A))),
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
        point("far_apart", np.full(S, 800.0), np.full(S, -5.0)))),
    _b("add_bcast", normal(S, (4,))),
    _b("mul_bcast", normal((3, 1), (1, 4))),
    _b("div_bcast", _sample(("n", S), ("nz", (3, 1)))),
    _b("mul_scalar", normal(S, ())),
)

# the ops of the quick profile (every plain `pytest` run)
QUICK: tuple[str, ...] = ("atan2", "maximum", "div_bcast")
