"""The low-precision rounding check: is a dtype's VJP within rounding of its own float64 VJP?

Below float64 the *rule* is checked in float64 against the oracle (the VJP check, tight); this
check asks only whether the arithmetic in the dtype under test is sane.  With one cotangent
``v`` that is exactly representable in the dtype, ``g_d = J^T v`` computed in the dtype and
``g_64`` computed by the same backend in float64 at the same point, ``e = g_d - g_64`` must obey

    ||e||_2 <= gamma * eps(dtype) * (||g_64||_2 + conditioning) + NOISE_FACTOR * noise

* ``||g_64||``: a correctly computed rule makes a relative error of a few ``eps`` per element.
* ``conditioning``: rules that reuse rounded forward values amplify their rounding
  (``tanh'`` computed as ``1 - y^2`` near saturation); estimated from the oracle's curvature and
  the measured forward error (:func:`gradcheck.oracle.error_model.conditioning_norm`).
* ``noise``: *measured*.  ``e`` is recomputed at ``rounding_samples`` points
  (:class:`~gradcheck.oracle.error_model.ErrorModel`; ``rounding_ulps``) a few units in the last
  place
  away; rounding errors change pseudo-randomly between such points while an error of the rule
  does not, so the spread of ``e`` over the points measures the rounding noise (long sums,
  ``cos`` of a large rounded argument) without a model.

The comparison is norm-wise over the whole gradient, not projected on a random ``u``: a scale
error ``(1 + delta)`` then shows as ``delta ||g||`` instead of ``delta |<g, u>|``, which cancels
like ``1 / sqrt(n)`` while the rounding bound does not.  (Measured: projected, a float32-only
``1 + 1e-4`` error in an elementwise op of 1000 elements was missed in 19 of 20 seeds; norm-wise
it is caught in every one.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck.core.dtypes import float_info, numpy_dtype
from gradcheck.core.results import WorstElement
from gradcheck.oracle import error_model

_WORST = 5

# (args, dtype) -> the VJP of every differentiable input, validated, as float64 arrays
VjpAt = Callable[[list[np.ndarray], object], list[np.ndarray]]


@dataclass(frozen=True)
class Sample:
    """The VJP in the dtype under test and in float64 at one point."""

    g_low: list[np.ndarray]
    g64: list[np.ndarray]


@dataclass(frozen=True)
class RoundingComparison:
    """Norm-wise comparison of ``g_d`` with ``g_64`` for one differentiable input."""

    expected: float  # ||g_64||
    actual: float  # ||g_d||
    discrepancy: float  # ||g_d - g_64||
    noise: float
    allowance: error_model.Allowance
    worst: tuple[WorstElement, ...]


def perturb(args_d: Sequence[np.ndarray], diff: Sequence[int], eps: float,
            rng: np.random.Generator, ulps: int = error_model.DEFAULT_MODEL.rounding_ulps
            ) -> list[np.ndarray]:
    """Move every element of the differentiable inputs by ``-ulps..ulps`` (``-2..2`` by
    default) units of ``eps`` (relative)."""
    out = list(args_d)
    for k in diff:
        a = args_d[k]
        steps = rng.integers(-ulps, ulps + 1, size=a.shape)
        out[k] = (a.astype(np.float64) * (1.0 + steps * eps)).astype(a.dtype)
    return out


def samples(vjp_at: VjpAt, args_d: Sequence[np.ndarray], diff: Sequence[int], low_dtype: object,
            eps: float, seed: int, model: error_model.ErrorModel = error_model.DEFAULT_MODEL
            ) -> list[Sample]:
    """The VJPs at ``args_d`` and at ``model.rounding_samples`` points perturbed by up to
    ``model.rounding_ulps`` units of ``eps``."""
    rng = np.random.default_rng([seed, 7])
    points = [list(args_d)] + [perturb(args_d, diff, eps, rng, model.rounding_ulps)
                               for _ in range(model.rounding_samples)]
    out = []
    for pts in points:
        p64 = [a.astype(np.float64) if k in diff else a for k, a in enumerate(pts)]
        out.append(Sample(vjp_at(pts, low_dtype), vjp_at(p64, np.float64)))
    return out


def noise_level(all_samples: Sequence[Sample], pos: int, keep: np.ndarray | None = None
                ) -> float:
    """Spread (L2 norm of the sample standard deviation) of ``e`` over the points (over the
    elements ``keep`` marks)."""
    E = np.stack([(s.g_low[pos] - s.g64[pos]).ravel() for s in all_samples])
    if keep is not None:
        E = E[:, np.ravel(keep)]
    if len(E) < 2:
        return 0.0
    return float(np.sqrt(np.sum((E - E.mean(axis=0)) ** 2) / (len(E) - 1)))


def compare(all_samples: Sequence[Sample], pos: int, shape: tuple[int, ...], dtype: str,
            conditioning: float, atol: float | None, rtol: float | None, *,
            model: error_model.ErrorModel = error_model.DEFAULT_MODEL) -> RoundingComparison:
    """Compare at the first sample (the point itself); the others measure the noise.  The
    allowance is ``model``'s :meth:`~gradcheck.oracle.error_model.ErrorModel.norm_allowance` (or the
    explicit ``atol``/``rtol``)."""
    g_low, g64 = all_samples[0].g_low[pos], all_samples[0].g64[pos]
    keep = ~_overflowed(g_low, g64, dtype)
    e = np.where(keep, g_low - g64, 0.0)
    noise = noise_level(all_samples, pos, keep)
    norm = float(np.linalg.norm(g64[keep]))
    # the spacing of the dtype's subnormals: what a derivative element there is rounded by
    underflow = float(float_info(dtype).smallest_subnormal) * float(np.sqrt(keep.sum()))
    allow = error_model.rounding_allowance(norm, conditioning, noise, dtype, atol=atol, rtol=rtol,
                                         model=model, underflow=underflow)
    return RoundingComparison(norm, float(np.linalg.norm(g_low[keep])), float(np.linalg.norm(e)),
                              noise, allow, _worst(np.where(keep, g_low, g64), g64, shape,
                                                   allow.allowed))


def _overflowed(g_low: np.ndarray, g64: np.ndarray, dtype: str) -> np.ndarray:
    """The elements whose low-precision value is an infinity that is the correct rounding of
    the float64 value (beyond the dtype's range: float16's 65504): right, and left out of the
    norm-wise comparison."""
    with np.errstate(all="ignore"):
        return np.isinf(g_low) & (g64.astype(numpy_dtype(dtype)).astype(np.float64) == g_low)


def _worst(g_low: np.ndarray, g64: np.ndarray, shape: tuple[int, ...], allowed: float
           ) -> tuple[WorstElement, ...]:
    diff = np.abs(g_low - g64).ravel()
    out = []
    for flat in np.argsort(-diff)[:_WORST]:
        if diff[flat] == 0:
            break
        idx = tuple(int(t) for t in np.unravel_index(int(flat), shape))
        out.append(WorstElement(idx, float(g_low.ravel()[flat]), float(g64.ravel()[flat]),
                                allowed))
    return tuple(out)
