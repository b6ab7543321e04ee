"""Extended-precision derivatives of scalar special functions, by mpmath.

:data:`RULES` maps a leaf name (``expm1``, ``spence``, ``selu``) to the function written in
mpmath.  :func:`derivative` differentiates one of them at a float64 argument with as many bits
as the point needs, not a fixed number of digits.  A central difference of order ``n`` at
working precision ``p`` loses about ``|f(x)| 2^-p / h^n`` to rounding; a derivative far below
the function's value (``expm1'(-100) = 3.7e-44`` next to ``expm1(-100) = -1``) needs ``p`` to
cover that ratio, or the difference of two equal roundings gives 0.  The step is relative to
``|x|`` below 1 (so ``1e-300`` needs no 300 extra digits) and absolute above (``sin(1e100)``
varies on a scale of 1; its argument gets ``log2 |x|`` extra bits).  The precision is raised
until that rounding bound is below ``2^-60`` of the result, or the element's time budget is
spent (then the element abstains).  The truncation error is not bounded: the step is
``2^-(p+10)`` of the scale, far below any feature of these functions away from a pole.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: bits of working precision the first attempt uses (about 30 digits)
START_BITS = 100
#: bits of working precision never exceeded (about 1200 digits)
MAX_BITS = 4000
#: seconds one element may take over all its attempts before it abstains
ELEMENT_BUDGET_S = 2.0
#: the rounding bound must be below this fraction of the derivative
TARGET = 2.0 ** -60
#: seconds one call of the mpmath check or of the triage's mpmath evidence may spend on all
#: its elements (elements it does not reach are not judged or counted)
CALL_BUDGET_S = 20.0


RULES: dict[str, Callable[[Any, Any], Any]] = {
    "sin": lambda m, x: m.sin(x), "cos": lambda m, x: m.cos(x), "tan": lambda m, x: m.tan(x),
    "exp": lambda m, x: m.exp(x), "expm1": lambda m, x: m.expm1(x),
    "exp2": lambda m, x: m.power(2, x), "log": lambda m, x: m.log(x),
    "log1p": lambda m, x: m.log1p(x), "log2": lambda m, x: m.log(x, 2),
    "log10": lambda m, x: m.log10(x), "sqrt": lambda m, x: m.sqrt(x),
    "rsqrt": lambda m, x: 1 / m.sqrt(x), "cbrt": lambda m, x: m.cbrt(x),
    "sinh": lambda m, x: m.sinh(x), "cosh": lambda m, x: m.cosh(x),
    "tanh": lambda m, x: m.tanh(x), "asinh": lambda m, x: m.asinh(x),
    "arcsinh": lambda m, x: m.asinh(x), "acosh": lambda m, x: m.acosh(x),
    "arccosh": lambda m, x: m.acosh(x), "atanh": lambda m, x: m.atanh(x),
    "arctanh": lambda m, x: m.atanh(x), "asin": lambda m, x: m.asin(x),
    "arcsin": lambda m, x: m.asin(x), "acos": lambda m, x: m.acos(x),
    "arccos": lambda m, x: m.acos(x), "atan": lambda m, x: m.atan(x),
    "arctan": lambda m, x: m.atan(x), "erf": lambda m, x: m.erf(x),
    "erfc": lambda m, x: m.erfc(x), "erfcx": lambda m, x: m.exp(x * x) * m.erfc(x),
    "erfinv": lambda m, x: m.erfinv(x), "erf_inv": lambda m, x: m.erfinv(x),
    "lgamma": lambda m, x: m.log(abs(m.gamma(x))), "gammaln": lambda m, x: m.log(
        abs(m.gamma(x))), "digamma": lambda m, x: m.digamma(x),
    "gamma": lambda m, x: m.gamma(x), "sigmoid": lambda m, x: 1 / (1 + m.exp(-x)),
    "expit": lambda m, x: 1 / (1 + m.exp(-x)), "logistic": lambda m, x: 1 / (1 + m.exp(-x)),
    "logit": lambda m, x: m.log(x / (1 - x)), "softplus": lambda m, x: m.log1p(m.exp(x)),
    "silu": lambda m, x: x / (1 + m.exp(-x)), "mish": lambda m, x: x * m.tanh(
        m.log1p(m.exp(x))), "log_sigmoid": lambda m, x: -m.log1p(m.exp(-x)),
    "logsigmoid": lambda m, x: -m.log1p(m.exp(-x)), "sinc": lambda m, x: m.sincpi(x),
    "ndtr": lambda m, x: m.ncdf(x), "log_ndtr": lambda m, x: m.log(m.ncdf(x)),
    "ndtri": lambda m, x: m.sqrt(2) * m.erfinv(2 * x - 1), "i0": lambda m, x: m.besseli(0, x),
    "i0e": lambda m, x: m.exp(-abs(x)) * m.besseli(0, x), "i1": lambda m, x: m.besseli(1, x),
    "i1e": lambda m, x: m.exp(-abs(x)) * m.besseli(1, x),
    "bessel_i0e": lambda m, x: m.exp(-abs(x)) * m.besseli(0, x),
    "bessel_i1e": lambda m, x: m.exp(-abs(x)) * m.besseli(1, x),
    "dawsn": lambda m, x: m.sqrt(m.pi) / 2 * m.exp(-x * x) * m.erfi(x),
    "spence": lambda m, x: m.polylog(2, 1 - x), "exp1": lambda m, x: m.e1(x),
    "expi": lambda m, x: m.ei(x), "entr": lambda m, x: -x * m.log(x),
    "selu": lambda m, x: m.mpf("1.0507009873554804934193349852946") * (x if x > 0 else m.mpf(
        "1.6732632423543772848170429916717") * m.expm1(x)),
    "elu": lambda m, x: x if x > 0 else m.expm1(x), "gelu": lambda m, x: x * m.ncdf(x),
    "soft_sign": lambda m, x: x / (1 + abs(x)), "softsign": lambda m, x: x / (1 + abs(x)),
}


@dataclass(frozen=True)
class Derivative:
    """An mpmath derivative: its value (float64), a bound on its rounding error, and the
    working precision (bits) that reached it."""

    value: float
    error: float
    bits: int


def derivative(rule: Callable[[Any, Any], Any], x: float, order: int = 1,
               budget_s: float = ELEMENT_BUDGET_S, deadline: float | None = None
               ) -> Derivative | None:
    """``rule``'s ``order``-th derivative at ``x`` by mpmath, with the precision raised until
    its rounding bound is below :data:`TARGET` of it (module docstring); ``None`` where mpmath
    cannot evaluate it (a pole, a branch cut, outside its domain), where the value is not a
    finite float64, or where the budget (``budget_s`` from now, or the earlier ``deadline`` on
    :func:`time.monotonic`'s clock) ran out first; it is checked between attempts.  An exact
    0 is returned only once the rounding bound itself is below the smallest normal float64."""
    import mpmath
    from mpmath.libmp import NoConvergence

    end = time.monotonic() + budget_s
    end = end if deadline is None else min(end, deadline)
    ax = abs(x)
    # the step's scale: a power of two near |x| below 1, 1 above
    scale = math.ldexp(1.0, math.frexp(ax)[1] - 1) if 0 < ax < 1 else 1.0
    bits = START_BITS + (math.frexp(ax)[1] if ax > 1 else 0)
    while bits <= MAX_BITS and time.monotonic() < end:
        try:
            with mpmath.workprec(bits):
                t = mpmath.mpf(x)
                h = mpmath.ldexp(mpmath.mpf(scale), -bits - 10)
                d = mpmath.diff(lambda s: rule(mpmath, s), t, order, h=h)
                fx = rule(mpmath, t)
                if mpmath.im(d) != 0 or mpmath.im(fx) != 0:
                    return None
                d, fx = mpmath.re(d), mpmath.re(fx)
                # 2^-(bits+20) |f| / h^order, the rounding of the difference (docstring)
                err = abs(fx) * mpmath.ldexp(1, -bits - 20) / mpmath.mpf(scale) ** order
        except (ValueError, ZeroDivisionError, ArithmeticError, TypeError, NoConvergence):
            return None  # a pole, a branch cut, outside mpmath's domain, a series that fails
        if not (mpmath.isfinite(d) and mpmath.isfinite(err)):
            return None
        if d != 0 and err <= TARGET * abs(d):
            value = float(d)
            return Derivative(value, float(err), bits) if math.isfinite(value) else None
        if d == 0 and err < 2.0 ** -1022:
            return Derivative(0.0, float(err), bits)
        # raise the precision by what the bound says is missing (at least 64 bits); an exact
        # 0 says nothing about what is missing (the argument itself may have been rounded:
        # spence(x) = Li2(1 - x) at x = 1e-300), so the precision doubles
        missing = bits if d == 0 else int(mpmath.log(err / (TARGET * abs(d)), 2)) + 16
        bits += max(64, missing)
    return None


def value(rule: Callable[[Any, Any], Any], x: float, bits: int = START_BITS) -> float | None:
    """``rule`` at ``x`` by mpmath at ``bits`` of precision (plus the argument's own size
    above 1), as a float64; ``None`` where it is not a finite real number."""
    import mpmath
    from mpmath.libmp import NoConvergence

    ax = abs(x)
    try:
        with mpmath.workprec(bits + (math.frexp(ax)[1] if ax > 1 else 0)):
            fx = rule(mpmath, mpmath.mpf(x))
            if mpmath.im(fx) != 0 or not mpmath.isfinite(fx):
                return None
            out = float(mpmath.re(fx))
    except (ValueError, ZeroDivisionError, ArithmeticError, TypeError, NoConvergence):
        return None
    return out if math.isfinite(out) else None
