"""The error model: how much disagreement between an AD result and an oracle is allowed.

``allowed = safety * fd_error + gamma * eps(dtype) * magnitude``

* ``fd_error`` is the oracle's own error estimate (Richardson tableau plus rounding of the
  differences, see :mod:`gradcheck.fd`), projected with the probe vectors.  Adaptive error
  estimates undercover the true error in a few percent of cases, so it is inflated by
  ``FD_SAFETY`` (10).
* ``magnitude`` is the sum of absolute terms of the compared quantity, e.g. for a projected VJP
  ``sum_j |g_j| |u_j|`` (with ``g = J^T v``) and ``sum_i |v_i| |(J u)_i|``; rounding errors of a
  dot product scale with it, not with the (possibly cancelled) result.
* ``eps(dtype)`` is the machine epsilon of the dtype the AD result was computed in; ``gamma``
  (``ROUNDING_GAMMA``) absorbs the few roundings per term of an elementwise rule and the
  growth of longer sums.  For low precision a conditioning term is added: backward rules reuse
  rounded forward values ``y``, whose relative rounding is amplified by ``|f''| / |f'|``
  (``tanh'`` computed as ``1 - y^2`` near saturation); it is estimated from the oracle's
  curvature: ``sum_i |v_i| |y_i| |(u^T f'' u)_i| / |(J u)_i|``.

An explicit ``atol``/``rtol`` replaces the model entirely and means exactly
``allowed = atol + rtol * |expected|`` (a missing one of the two is 0; no scaling by size).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FD_SAFETY = 10.0
ROUNDING_GAMMA = 16.0
# relative cap on |f''|/|f'| amplification, so a vanishing first derivative cannot make the
# bound arbitrarily loose
_COND_CAP = 1e4

_EPS = {
    "float64": float(np.finfo(np.float64).eps),
    "float32": float(np.finfo(np.float32).eps),
    "float16": float(np.finfo(np.float16).eps),
    "bfloat16": 2.0**-7,
    "complex128": float(np.finfo(np.float64).eps),
    "complex64": float(np.finfo(np.float32).eps),
}


def eps(dtype: str) -> float:
    """Machine epsilon of a dtype given by name (``float64``, ``float32``, ``float16``, ...)."""
    try:
        return _EPS[str(dtype)]
    except KeyError:
        return float(np.finfo(np.dtype(dtype)).eps)


@dataclass(frozen=True)
class Allowance:
    """An allowed error and a human-readable account of where it came from."""

    allowed: float
    source: str


def model_allowance(
    fd_error: float,
    magnitude: float,
    dtype: str,
    *,
    conditioning: float = 0.0,
    safety: float = FD_SAFETY,
    gamma: float = ROUNDING_GAMMA,
) -> Allowance:
    """``safety * fd_error + gamma * eps(dtype) * (magnitude + conditioning)``."""
    e = eps(dtype)
    rounding = gamma * e * (magnitude + conditioning)
    allowed = safety * fd_error + rounding
    parts = []
    if fd_error:
        parts.append(f"{safety:g} x FD error {fd_error:.3g}")
    cond = f" + conditioning {conditioning:.3g}" if conditioning else ""
    parts.append(f"{gamma:g} x eps({dtype}) x (sum of |terms| {magnitude:.3g}{cond})")
    return Allowance(allowed, " + ".join(parts) + f" = {allowed:.3g}")


def explicit_allowance(expected: float, atol: float | None, rtol: float | None) -> Allowance:
    """The user's explicit ``atol + rtol * |expected|``, exactly."""
    a = float(atol or 0.0)
    r = float(rtol or 0.0)
    allowed = a + r * abs(expected)
    return Allowance(allowed, f"explicit atol={a:g} + rtol={r:g} x |expected| = {allowed:.3g}")


def allowance(
    expected: float,
    fd_error: float,
    magnitude: float,
    dtype: str,
    *,
    conditioning: float = 0.0,
    atol: float | None = None,
    rtol: float | None = None,
) -> Allowance:
    """The explicit tolerance if one was given, else the error model."""
    if atol is not None or rtol is not None:
        return explicit_allowance(expected, atol, rtol)
    return model_allowance(fd_error, magnitude, dtype, conditioning=conditioning)


def conditioning_term(
    v: np.ndarray, y: np.ndarray, curvature: np.ndarray, ju: np.ndarray
) -> float:
    """``sum_i |v_i| |y_i| |curv_i| / |(J u)_i|`` with the ratio capped (see module doc)."""
    scale = float(np.max(np.abs(ju))) if ju.size else 0.0
    denom = np.maximum(np.abs(ju), max(scale, 1e-300) / _COND_CAP)
    with np.errstate(all="ignore"):
        ratio = np.where(np.isfinite(curvature), np.abs(curvature) / denom, 0.0)
    return float(np.sum(np.abs(v) * np.abs(y) * np.minimum(ratio, _COND_CAP)))


def ratio(discrepancy: float, allowed: float) -> float:
    """``discrepancy / allowed``; 0/0 is 0 and x/0 is inf."""
    if allowed > 0:
        return discrepancy / allowed
    return 0.0 if discrepancy == 0 else float("inf")
