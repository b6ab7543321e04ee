"""The error model: how much disagreement between an AD result and an oracle is allowed.

All of it is one frozen :class:`ErrorModel`: its constants (``fd_safety``, ``rounding_gamma``,
``noise_factor``, ``resolution``, ``conditioning_cap``; each justified where it is defined),
the oracle's tuning (its steps, thresholds, floors and probe counts: ``screen_floor``,
``sharp``, ``second_shrink``, ...; one line each where defined), :meth:`ErrorModel.allowed`
(vectorised over arrays of compared scalars) and :meth:`ErrorModel.explain` (the derivation
failure messages show).  Every check computes its allowance through it; ``DEFAULT_MODEL =
ErrorModel()`` unless the user passes a profile (``gradcheck.check(...,
error_model=ErrorModel(fd_safety=3.0))``).  The upper-case names below (``FD_SAFETY``,
``ROUNDING_GAMMA``, ...) are the default model's constants.

Rule checks (VJP, JVP, forward-vs-reverse, eager-vs-functional; always in float64)::

    allowed = FD_SAFETY * fd_error + ROUNDING_GAMMA * eps(float64) * terms

* ``fd_error`` is the oracle's own error estimate (Richardson tableau, rounding of the
  differences from the measured noise of ``f``; see :mod:`gradcheck.oracle.fd`), projected with the
  probe vectors as ``sum_i |v_i| err_i``, inflated by ``FD_SAFETY`` (10): adaptive estimates
  undercover now and then (the oracle benchmark measures how often).
* ``terms`` estimates the sum of absolute terms of ``<v, J u>``: ``sum_i |v_i| |(J u)_i|`` (the
  forward side) plus ``sum_j |(J^T v)_j| |u_j|`` (the reverse side); rounding of a dot product
  scales with it, not with the (possibly cancelled) result.  ``ROUNDING_GAMMA`` (16) absorbs the
  few roundings per term of a rule and the growth of longer sums.

Low-precision rounding check (:mod:`gradcheck.numeric.rounding`; norm-wise over the whole VJP,
the dtype's VJP against the same backend's float64 VJP at the same point)::

    allowed = ROUNDING_GAMMA * eps(dtype) * (||g_64|| + conditioning) + NOISE_FACTOR * noise

* ``conditioning``: backward rules reuse rounded forward values ``y`` (``tanh'`` computed as
  ``1 - y^2`` near saturation); the rounding of ``y`` is amplified by ``|f''| / |f'|``, estimated
  from the oracle's curvature (:func:`conditioning_norm`), applied to the forward error measured
  as the difference of the dtype's and float64 outputs (:func:`forward_error`).
* ``noise``: the rounding noise of ``g_d - g_64`` *measured* at a few points some units in the
  last place away (a standard deviation; ``NOISE_FACTOR`` turns it into a bound).

Exact comparisons (reference, cross-backend, cross-device: :mod:`gradcheck.numeric.agreement`)
use the rule-check bound without FD error; where it is exceeded:

* every exact comparison adds the **argument conditioning** of the rule to the terms
  (:func:`argument_conditioning_elements`)::

      allowed = gamma * eps * (terms + k sum_j |u_j| min_s |D_d (J_s^T v)_j|)

  A rule evaluated backward-stably returns its derivative at an argument perturbed by a few
  ulps, ``x (1 + delta)``; that moves element ``j`` of ``J^T v`` by ``sum_k |d(J^T v)_j / dx_k|
  |x_k| eps`` (elementwise: ``|v_j| |f''(x_j)| |x_j| eps``), which the final terms miss where the
  rule is ill-conditioned (``acosh'(x) = 1 / sqrt(x^2 - 1)`` at 1.001: 500x).  ``k = 2`` for two
  engines (cross-backend, cross-device: each may be off by that much), ``k = 1`` against the
  reference (only the backend under test is; the reference is held to the accurate value).  The
  smaller of the two sides' measured sensitivities counts (a side cannot widen its own
  allowance).  ``D_d`` is a central difference of the VJP along the relative perturbation ``d =
  x * s`` (random signs ``s``), at the largest of :data:`ARGUMENT_STEPS` that converges
  (:func:`argument_sensitivity`).  It is measured once the discrepancy exceeds
  ``ErrorModel.conditioning_above`` of the final terms' bound, so a passing comparison far inside
  its bound costs nothing more and no verdict sits on a bound that leaves it out.
* then the judging side's *measured* rounding bound (``NOISE_FACTOR`` x its noise between
  inputs a few ulps apart, projected element-wise) replaces that side's modelled share where
  larger (``measured``), so cancelled intermediates of the oracle side (``digamma(b) -
  digamma(a + b)``) are accounted for without excusing the side under test.

An explicit ``atol``/``rtol`` replaces the model entirely and means exactly
``allowed = atol + rtol * |expected|`` (a missing one of the two is 0; no scaling by size); the
model's ``resolution`` still decides whether a comparison can pass at all.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from gradcheck.core.errors import InvalidArgument

# the relative steps of argument_sensitivity, tried in turn for the elements where the previous
# one did not converge (left the domain, crossed a pole or a kink, or its truncation shows);
# each with its quarter.  The first suffices 1e-5 (relative) or more away from a singularity;
# the smaller ones reach points closer to a domain edge (arcsin at 1 - 1e-8).  Whatever the
# function, an element's credit is at most 2 ROUNDING_GAMMA eps / (2 step) times the change
# of its VJP over the stencil; an element needs a step ``h`` only where the rule's conditioning
# is ~1 / h or more, so that bound is of the size of the allowance itself there.  The VJPs'
# own rounding (a few ulps of g over 2 h) adds at most ~1e-3 of |g| to a sensitivity.
ARGUMENT_STEPS = (2.0**-20, 2.0**-28, 2.0**-36, 2.0**-44)

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


@dataclass(frozen=True, repr=False)
class ErrorModel:
    """The error model's constants and every allowance computed from them (module doc).

    ``ErrorModel()`` is the model every check uses by default; a profile is another instance,
    e.g. ``ErrorModel(fd_safety=3.0)`` (stricter: a smaller margin over the oracle's error
    estimate) or ``ErrorModel(rounding_gamma=64.0)`` (looser about rounding), passed as
    ``gradcheck.check(..., error_model=...)``.  Every constant is a finite number above 0
    (``resolution`` at most 1; the counts, typed ``int``, whole numbers); a wider model lets
    more wrong rules pass, a narrower one flags correct rules whose oracle undercovers
    (``docs/error-model.md`` section 6 measures how often the defaults do).

    The tuning fields below the allowance constants set how the oracle computes (steps,
    thresholds, probe counts).  The screen, the second estimate, localization, the rounding
    check and the noise measurements read them from the check's model; :mod:`gradcheck.oracle.fd`,
    the FD Jacobians and the scaled estimate still read the default model's values (their
    module constants, e.g. ``fd.DEFAULT_LEVELS``), so a profile does not change those yet.

    :meth:`allowed` is vectorised (arrays of compared scalars broadcast) and reproduces the
    formula bit for bit at every site; :meth:`explain` is the sentence failure messages carry.
    """

    fd_safety: float = 10.0
    """Multiplies the oracle's own error estimate: adaptive estimates undercover now and then
    (5-11% of cases in the literature; the oracle benchmark measures it here), and the largest
    VJP/JVP ratio over the random programs of ``docs/error-model.md`` section 6 is 0.0999 of an
    allowance: the worst observed error equals the raw estimate, the 10x is the margin."""

    rounding_gamma: float = 16.0
    """Units of ``eps(dtype)`` per unit of the compared scalar's sum of absolute terms: the few
    roundings per term of a rule and the growth of longer sums (the largest forward-vs-reverse
    ratio over 2000 random programs is 0.10 of it)."""

    noise_factor: float = 4.0
    """Turns a measured rounding noise (a standard deviation over nearby points) into a bound:
    4 sigma of a Gaussian scatter is exceeded with probability ~6e-5."""

    resolution: float = 1e-2
    """A comparison may pass only where the allowance is at most this fraction of its terms
    (``docs/error-model.md`` section 3b): a pass says the rule is right to 1% of its terms;
    above it the oracle cannot tell a sign flip, a factor 2 or a dropped term from the right
    rule and the check is inconclusive instead."""

    conditioning_cap: float = 10.0
    """``|f''| / |f'|`` is capped at this multiple of its median over the output elements: a
    rule that reuses a rounded y reconstructs f' = g(y) and |f''|/|f'| = |g'(y)| is as tame as
    g; near a critical point of f (f' -> 0, f'' != 0) no rule can reconstruct f' from y and the
    ratio measures nothing (measured: uncapped, x sin(x) on 4096 elements got a conditioning
    term 150x its gradient's norm)."""

    # -- the oracle's tuning: its step sizes, thresholds and probe counts -----------------------
    # Changing one changes what the oracle computes (and the pinned numbers of the tests);
    # the defaults are the measured ones.  Counts are whole numbers.

    # the finite-difference engine (:mod:`gradcheck.oracle.fd`)
    #: Richardson levels of the oracle's table (``fd.DEFAULT_LEVELS``)
    fd_levels: int = 7
    #: the table's largest step as a fraction of the element scale (``fd._H0_FACTOR``)
    fd_h0_factor: float = 2.0**-3
    #: each retry of an unconverged element starts this factor lower (``fd._RETRY_SHRINK``)
    fd_retry_shrink: float = 2.0**-8
    #: retries of an unconverged element, each with a smaller step (``fd._RETRIES``)
    fd_retries: int = 2
    #: an element whose relative error estimate exceeds this is retried (``fd.CONVERGED_RTOL``)
    fd_converged_rtol: float = 1e-8
    #: ... relative to max(|value|, this fraction of the row's largest) (``fd._RETRY_FLOOR``)
    fd_retry_floor: float = 1e-3
    #: a value of f is within this many measured noise levels of the exact one
    #: (``fd._NOISE_BOUND``)
    fd_noise_bound: float = 3.0
    #: a kink: one-sided limits disagree by this many error estimates (``fd._KINK_FACTOR``)
    fd_kink_factor: float = 10.0
    #: ... and by this fraction of their size (``fd._KINK_RELATIVE``)
    fd_kink_relative: float = 1e-6
    #: Richardson levels of the fast screen's table (``fd.SCREEN_LEVELS``)
    screen_levels: int = 4
    #: the screen's largest step, this factor below the oracle's (``fd._SCREEN_H0_SHRINK``)
    screen_h0_shrink: float = 2.0**-4
    #: a kink on a scaled direction: one-sided differences apart by more than this, relative
    #: (``fd.SCALED_KINK``)
    scaled_kink: float = 1e-3
    #: ... and a gap at the smallest step at least this fraction of the gap at twice the step
    #: (``fd.SCALED_KINK_PERSISTS``)
    scaled_kink_persists: float = 0.75

    # the fast screen (:mod:`gradcheck.numeric.screen`)
    #: the screen's FD error must be below this fraction of sum |v||J||u| to pass
    screen_floor: float = 1e-11
    #: the screen's split (:mod:`gradcheck.numeric.screen_split`): the floor of the group of
    #: output elements estimated below the screen's steps (near a pole or a domain edge,
    #: where the steps that converge to ``screen_floor`` leave a window too narrow to find);
    #: the full oracle's elements converge to ``fd_converged_rtol`` (1e-8)
    split_floor: float = 1e-9
    #: probes of the screen's eager-vs-functional comparison (docs/error-model.md 2b)
    alternative_probes: int = 1
    #: the failing path (:mod:`gradcheck.numeric.projected_failure`): a screen failure is
    #: confirmed by projected estimates alone where the discrepancy exceeds the allowance by
    #: at least this factor along every estimate (else the full oracle judges it)
    projected_failure_margin: float = 4.0

    # the second estimate (:mod:`gradcheck.numeric.second_estimate`)
    #: the second estimate's largest step, this factor below the first estimate's
    second_shrink: float = 2.0**-8

    # the scaled estimate (:mod:`gradcheck.numeric.scaled_estimate`)
    #: binades of |x| per group of elements (``GROUP_BINADES``)
    scaled_group_binades: int = 4
    #: at most this many groups per input (``MAX_GROUPS``)
    scaled_max_groups: int = 16
    #: the scaled estimate vindicates only within this fraction of the terms (``SHARP``)
    sharp: float = 1e-5
    #: levels the scaled table may add above the group's own (``MAX_LADDER``)
    scaled_max_ladder: int = 56
    #: at most this much Richardson work (directions x levels^2 x outputs) (``LADDER_WORK``)
    scaled_ladder_work: int = 2**26
    #: evaluations of f the scaled estimate of one input may take (``POINTS``)
    scaled_points: int = 3072
    #: the group's largest step moves an element by at most this fraction of it (``_MOVE``)
    scaled_move: float = 2.0**-3

    # localization (:mod:`gradcheck.numeric.localize`) and its FD Jacobians
    #: a Jacobian block with more elements than this is not localized
    localize_max_elements: int = 2048 * 2048
    #: a Jacobian block with more columns (inputs) than this is not localized
    localize_max_columns: int = 2048
    #: the dense stencil's step as a fraction of the element scale (``_dense_jacobian._H_FACTOR``)
    dense_h_factor: float = 2.0**-6
    #: directions the dense stencil measures f's noise on (``_dense_jacobian._NOISE_DIRECTIONS``)
    dense_noise_directions: int = 3
    #: the dense stencil's noise points at h times this (``_dense_jacobian._NOISE_SHRINK``)
    dense_noise_shrink: float = 2.0**-20
    #: a column whose truncation estimate exceeds this (relative) is recomputed
    #: (``_dense_jacobian._RTOL``)
    dense_rtol: float = 1e-8
    #: ... relative to max(|value|, this fraction of the column's largest)
    #: (``_dense_jacobian._FLOOR``)
    dense_floor: float = 1e-3
    #: columns the dense stencil's spot check recomputes (``_dense_jacobian._SPOT_COLUMNS``)
    dense_spot_columns: int = 8
    #: the spot check's stencil: the same nodes at this fraction of the step
    #: (``_dense_jacobian._SPOT_SHRINK``)
    dense_spot_shrink: float = 0.25
    #: a column whose rounded points change the stencil more (relative) is redone
    #: (``_dense_jacobian._ARG_RTOL``)
    dense_arg_rtol: float = 1e-12
    #: compress columns only when the colours number at most n / this
    #: (``_sparse_jacobian._COMPRESS_BELOW``)
    sparse_compress_below: int = 3
    #: a (rounded) weight below this cannot attribute safely: its group is refined
    #: (``_sparse_jacobian._MIN_WEIGHT``)
    sparse_min_weight: float = 0.25
    #: an unattributable set this small is refined column by column (``_sparse_jacobian._LEAF``)
    sparse_leaf: int = 4

    # the measured noise of a VJP (:mod:`gradcheck.numeric.agreement`, ``checks._path_noise``)
    #: the noise line moves each input element by 1 to this many ulps (either sign) per step
    noise_ulps: int = 2

    # the low-precision rounding check (:mod:`gradcheck.numeric.rounding`)
    #: perturbed points the rounding check measures the noise of the VJP at
    rounding_samples: int = 3
    #: each perturbed input element moves by up to this many units in the last place
    rounding_ulps: int = 2

    # the exact comparisons (:mod:`gradcheck.numeric.agreement`)
    #: the rule's argument conditioning is measured once a discrepancy exceeds this fraction of
    #: the final terms' bound, so no verdict sits near an allowance that leaves the conditioning
    #: out (a CPU's vector unit or libm moves such a discrepancy by a factor of a few)
    conditioning_above: float = 0.125

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int":  # a count: a whole number above 0, kept an int
                if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
                        or not int(value) > 0):
                    raise ValueError(f"ErrorModel({f.name}={value!r}): must be a whole number "
                                     f"above 0 (the default is {f.default!r})")
                object.__setattr__(self, f.name, int(value))
                continue
            top = 1.0 if f.name == "resolution" else math.inf
            if (isinstance(value, bool) or not isinstance(value, numbers.Real)
                    or not (0.0 < float(value) <= top) or not math.isfinite(float(value))):
                limit = "at most 1" if f.name == "resolution" else "finite"
                raise ValueError(f"ErrorModel({f.name}={value!r}): must be a number above 0 "
                                 f"and {limit} (the default is {f.default!r})")
            object.__setattr__(self, f.name, float(value))

    def __repr__(self) -> str:
        changed = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                   if getattr(self, f.name) != f.default]
        return f"ErrorModel({', '.join(changed)})"

    # -- the parts of an allowance -------------------------------------------------------------

    def fd_bound(self, fd_error: Any) -> Any:
        """``fd_safety x fd_error``: what the oracle's error estimate allows (vectorised); also
        the size below which an FD value cannot be told from 0."""
        return self.fd_safety * fd_error

    def rounding(self, terms: Any, dtype: str = "float64") -> Any:
        """``rounding_gamma x eps(dtype) x terms``: the rounding bound of a quantity whose sum
        of absolute terms is ``terms`` (vectorised)."""
        return self.rounding_gamma * eps(dtype) * terms

    def noise_bound(self, sigma: Any) -> Any:
        """``noise_factor x sigma``: a bound from a measured rounding noise (vectorised)."""
        return self.noise_factor * sigma

    # -- rule checks and exact comparisons -------------------------------------------------------

    def allowed(self, fd_error: Any, terms: Any, dtype: str = "float64", *,
                conditioning: Any = 0.0, measured: Any = 0.0) -> Any:
        """``fd_safety x fd_error + rounding_gamma x eps(dtype) x (terms + conditioning) +
        measured``, elementwise over arrays of compared scalars (NumPy broadcasting; floats in,
        a float out).  ``fd_error``: the oracle's error estimate (0 for an exact comparison);
        ``terms``: the compared scalar's sum of absolute terms; ``conditioning``: the argument
        or forward-rounding conditioning in the same units; ``measured``: the judging side's
        measured rounding bound beyond its modelled share (:mod:`gradcheck.numeric.agreement`).
        """
        rounding = self.rounding_gamma * eps(dtype) * (terms + conditioning)
        return self.fd_safety * fd_error + rounding + measured

    def explain(self, fd_error: float, terms: float, dtype: str = "float64", *,
                conditioning: float = 0.0, measured: float = 0.0) -> str:
        """The derivation of :meth:`allowed` for one compared scalar, as failure messages and
        ``CheckResult.allowed_source`` show it, e.g. ``10 x FD error 1.92e-14 + 16 x
        eps(float64) x (sum of |terms| 8.45) = 2.22e-13``."""
        allowed = self.allowed(fd_error, terms, dtype, conditioning=conditioning,
                               measured=measured)
        parts = []
        if fd_error:
            parts.append(f"{self.fd_safety:g} x FD error {fd_error:.3g}")
        cond = f" + conditioning {conditioning:.3g}" if conditioning else ""
        parts.append(f"{self.rounding_gamma:g} x eps({dtype}) x (sum of |terms| {terms:.3g}"
                     f"{cond})")
        if measured:
            parts.append(f"measured rounding of the judging side beyond its share "
                         f"{measured:.3g}")
        return " + ".join(parts) + f" = {allowed:.3g}"

    def allowance(self, fd_error: float, terms: float, dtype: str = "float64", *,
                  conditioning: float = 0.0, measured: float = 0.0) -> Allowance:
        """:meth:`allowed` and :meth:`explain` of one compared scalar."""
        allowed = self.allowed(fd_error, terms, dtype, conditioning=conditioning,
                               measured=measured)
        return Allowance(float(allowed), self.explain(fd_error, terms, dtype,
                                                      conditioning=conditioning,
                                                      measured=measured))

    def estimates_agree(self, v1: np.ndarray, e1: np.ndarray, v2: np.ndarray, e2: np.ndarray,
                        terms: np.ndarray) -> np.ndarray:
        """Whether two finite-difference estimates of the same quantities (values ``v``, error
        estimates ``e``) agree: within ``fd_safety`` times their summed error estimates plus
        the float64 rounding of ``terms``.  Where they do not, at least one error model
        fails."""
        with np.errstate(invalid="ignore"):
            return np.abs(v1 - v2) <= self.allowed(e1 + e2, terms)

    # -- the low-precision rounding check (norm-wise) ------------------------------------------

    def norm_allowed(self, norm: Any, conditioning: Any, noise: Any, dtype: str,
                     underflow: Any = 0.0) -> Any:
        """Allowed ``||g_d - g_64||`` of the rounding check: ``rounding_gamma x eps(dtype) x
        (||g_64|| + conditioning) + noise_factor x noise + underflow`` (vectorised);
        ``underflow``: the spacing of the dtype's subnormal numbers times ``sqrt(n)`` for ``n``
        compared elements, what a derivative element in the subnormal range is rounded by
        (float16's ``2^-24 = 6e-8``; float32's and bfloat16's are negligible)."""
        return (self.rounding_gamma * eps(dtype) * (norm + conditioning)
                + self.noise_factor * noise + underflow)

    def norm_allowance(self, norm: float, conditioning: float, noise: float, dtype: str,
                       underflow: float = 0.0) -> Allowance:
        """:meth:`norm_allowed` of one comparison and its derivation."""
        allowed = float(self.norm_allowed(norm, conditioning, noise, dtype, underflow))
        cond = f" + conditioning {conditioning:.3g}" if conditioning else ""
        src = f"{self.rounding_gamma:g} x eps({dtype}) x (||VJP|| {norm:.3g}{cond})"
        if noise:
            src += f" + {self.noise_factor:g} x measured rounding noise {noise:.3g}"
        if underflow:
            src += f" + subnormal spacing x sqrt(n) {underflow:.3g}"
        return Allowance(allowed, f"{src} = {allowed:.3g}")

    # -- what a verdict needs besides the allowance ---------------------------------------------

    def resolved(self, model_allowed: float, terms: float, *, fd_error: float = 0.0,
                 rounding_floor: float = 0.0) -> bool:
        """Whether a comparison can pass (``docs/error-model.md`` section 3b): the model's
        allowance (the oracle's error and the rounding of the terms, never an explicit
        tolerance) is at most ``resolution`` of the compared terms (``sum |v| |J u| + sum
        |J^T v| |u|``), or the oracle's raw error ``fd_error`` is within ``rounding_floor``
        (:meth:`fd_rounding_floor`: a derivative far below ``f``'s own scale, ``tanh`` at 20, is
        resolved as well as float64 can, in absolute terms).  Terms of 0 are resolved: both
        sides are then exactly zero (an unused input), an exact agreement.  A non-finite
        allowance is not resolved."""
        if not np.isfinite(model_allowed):
            return False
        return bool(terms == 0 or model_allowed <= self.resolution * terms
                    or 0 < fd_error <= rounding_floor)

    @property
    def rounding_level_factor(self) -> float:
        """``rounding_gamma / resolution`` (1600 by default): a failed comparison within this
        many eps of its scale is at the rounding level (labelled so in reports, never excused):
        what the rounding bound would allow for terms ``1 / resolution`` times the scale, the
        cancellation inside a rule that the final-terms model does not see
        (``docs/error-model.md`` section 5b); a wrong rule differs by far more (the checks are
        built to catch 1e-9 relative, 2e4 times this level)."""
        return self.rounding_gamma / self.resolution

    def rounding_level(self, discrepancy: float, terms: float, unit: float, dtype: str
                       ) -> float | None:
        """The rounding level ``rounding_level_factor x eps(dtype) x max(terms, unit)`` of a
        comparison if its ``discrepancy`` is within it, else ``None``.  ``terms``: the compared
        scalar's absolute terms; ``unit``: ``||v|| ||u||``, the size ``v^T J u`` has for a
        Jacobian of norm 1 (the scale where the exact derivative is 0 and the terms vanish:
        ``native_layer_norm`` of one element)."""
        level = self.rounding_level_factor * eps(dtype) * max(float(terms), float(unit))
        return level if np.isfinite(level) and 0 < discrepancy <= level else None

    def fd_rounding_floor(self, v: np.ndarray, f: np.ndarray, value: np.ndarray,
                          curvature: np.ndarray, h_max: float, h_min: float) -> float:
        """``rounding_gamma eps sum_i |v_i| s_i / h_min`` with ``s_i = |f_i| + h_max |(J u)_i| +
        h_max^2 |curv_i| / 2`` the size of output element ``i`` over the table's stencil: the
        error of a central difference at step ``h_min`` from ``rounding_gamma`` roundings of
        each value of a deterministic ``f`` (never the measured noise: a noisy ``f`` must not
        widen it)."""
        h_max, h_min = np.float64(h_max), np.float64(h_min)  # NumPy overflows to inf, not raises
        with np.errstate(all="ignore"):
            s = np.abs(f) + h_max * np.abs(value) + 0.5 * h_max * h_max * np.abs(curvature)
            floor = self.rounding_gamma * eps("float64") * float(
                np.sum(np.abs(v) * np.where(np.isfinite(s), s, 0.0)) / h_min)
        return floor if np.isfinite(floor) else 0.0

    def amplification(self, curvature: np.ndarray, ju: np.ndarray) -> np.ndarray:
        """``|f''| / |f'|`` per element, non-finite as 0, capped at ``conditioning_cap`` x its
        median."""
        with np.errstate(all="ignore"):
            r = np.abs(curvature) / np.abs(ju)
        r = np.where(np.isfinite(r), r, 0.0)
        if r.size:
            r = np.minimum(r, self.conditioning_cap * float(np.median(r)))
        return r


#: the model every check uses unless a profile is passed (``check(..., error_model=...)``)
DEFAULT_MODEL = ErrorModel()

# the default model's constants under their own names, for the code that reads them directly
FD_SAFETY = DEFAULT_MODEL.fd_safety
ROUNDING_GAMMA = DEFAULT_MODEL.rounding_gamma
NOISE_FACTOR = DEFAULT_MODEL.noise_factor
RESOLUTION = DEFAULT_MODEL.resolution
ROUNDING_LEVEL = DEFAULT_MODEL.rounding_level_factor


def model_allowance(fd_error: float, magnitude: float, dtype: str, *, conditioning: float = 0.0,
                    measured: float = 0.0, model: ErrorModel = DEFAULT_MODEL) -> Allowance:
    """``model.allowance(...)`` (:meth:`ErrorModel.allowance`): ``fd_safety * fd_error +
    rounding_gamma * eps(dtype) * (magnitude + conditioning) + measured``."""
    return model.allowance(fd_error, magnitude, dtype, conditioning=conditioning,
                           measured=measured)


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
    measured: float = 0.0,
    atol: float | None = None,
    rtol: float | None = None,
    model: ErrorModel = DEFAULT_MODEL,
) -> Allowance:
    """The explicit tolerance if one was given, else ``model``'s (``measured``: see
    :meth:`ErrorModel.allowed`)."""
    if atol is not None or rtol is not None:
        return explicit_allowance(expected, atol, rtol)
    return model.allowance(fd_error, magnitude, dtype, conditioning=conditioning,
                           measured=measured)


def forward_error(y64: np.ndarray, y_low: np.ndarray, noise64: np.ndarray, dtype: str
                  ) -> np.ndarray:
    """The rounding error of the forward values in ``dtype``, in units of ``eps(dtype)``.

    At least ``|y|`` (one rounding of the output); more where it is measured: the difference
    between the ``dtype`` and float64 outputs at the same point, and the float64 rounding noise
    the oracle measured (:func:`gradcheck.oracle.fd.noise_level`) scaled to ``dtype``.  Both exceed
    ``eps |y|`` when rounding upstream is amplified (``cos`` of an ``exp`` of size 400).
    """
    e = eps(dtype)
    with np.errstate(all="ignore"):
        measured = np.where(np.isfinite(y_low), np.abs(y_low - y64), 0.0) / e
    return np.maximum.reduce([np.abs(y64), measured, noise64 / eps("float64")])


def conditioning_norm(
    v: np.ndarray, fwd_error: np.ndarray, curvature: np.ndarray, ju: np.ndarray, *,
    model: ErrorModel = DEFAULT_MODEL,
) -> float:
    """``|| |v_i| fwd_error_i |curv_i| / |(J u)_i| ||_2`` with the ratio capped (module doc).

    ``fwd_error`` is the forward rounding error in units of eps (:func:`forward_error`);
    ``curvature`` and ``ju`` are sizes of the second and first directional derivatives per output
    element.  For an elementwise ``y = f(x)`` the ratio is ``|f''| / |f'|`` and each term is the
    error a rounded ``y`` causes in ``v_i f'(x_i)``.
    """
    return float(np.linalg.norm(np.abs(v) * np.abs(fwd_error)
                                * model.amplification(curvature, ju)))


def conditioning_term(
    v: np.ndarray, y: np.ndarray, curvature: np.ndarray, ju: np.ndarray, *,
    model: ErrorModel = DEFAULT_MODEL,
) -> float:
    """Sum-wise sibling of :func:`conditioning_norm` for a projected rule check whose widest
    dtype is below float64 (``Backend.oracle_forward``): ``sum_i |v_i| |y_i| |curv_i|/|(J u)_i|``,
    with one rounding of each output (``|y_i|`` units of eps) and the same capped ratio."""
    return float(np.sum(np.abs(v) * np.abs(y) * model.amplification(curvature, ju)))


def rounding_allowance(
    norm: float,
    conditioning: float,
    noise: float,
    dtype: str,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    model: ErrorModel = DEFAULT_MODEL,
    underflow: float = 0.0,
) -> Allowance:
    """Allowed ``||g_d - g_64||`` of the low-precision rounding check (norm-wise):
    :meth:`ErrorModel.norm_allowance`; an explicit ``atol``/``rtol`` means ``atol + rtol *
    ||g_64||`` exactly."""
    if atol is not None or rtol is not None:
        return explicit_allowance(norm, atol, rtol)
    return model.norm_allowance(norm, conditioning, noise, dtype, underflow)


def estimates_agree(v1: np.ndarray, e1: np.ndarray, v2: np.ndarray, e2: np.ndarray,
                    terms: np.ndarray, *, model: ErrorModel = DEFAULT_MODEL) -> np.ndarray:
    """:meth:`ErrorModel.estimates_agree` of ``model``."""
    return model.estimates_agree(v1, e1, v2, e2, terms)


def argument_sensitivity(g_at: np.ndarray, step: float) -> np.ndarray:
    """The size of the directional derivative of a VJP ``g`` along a relative perturbation
    ``d`` of its arguments (``d_k = +-x_k``), element by element, from ``g_at``: the VJPs at
    ``x + h d``, ``x - h d``, ``x + h d / 4``, ``x - h d / 4`` (leading axis 4), ``h = step``.

    The two central differences ``D_h`` and ``D_h/4`` must agree within half their size (plus
    the rounding of the VJPs over the smaller step): their truncation errors differ 16-fold, so
    where they do not the larger step is too coarse (a singularity within a few steps, a pole
    or kink inside the stencil); there, and where a value is not finite (a point off the
    domain), the element is ``nan``: try a smaller step.  Elsewhere the smaller of the two
    counts (near a singularity the larger step overestimates)."""
    g = np.asarray(g_at, dtype=np.float64)
    with np.errstate(all="ignore"):
        d1 = np.abs(g[0] - g[1]) / (2.0 * step)
        d2 = np.abs(g[2] - g[3]) / (step / 2.0)
        floor = ROUNDING_GAMMA * _EPS["float64"] * np.max(np.abs(g), axis=0) / (step / 2.0)
        ok = np.all(np.isfinite(g), axis=0) & (np.abs(d1 - d2) <= 0.5 * np.maximum(d1, d2)
                                                + floor)
        return np.where(ok, np.minimum(d1, d2), np.nan)


def argument_conditioning_elements(sens_a: np.ndarray, sens_b: np.ndarray, *,
                                   engines: int = 2) -> np.ndarray:
    """The argument-rounding conditioning of an exact comparison, per VJP element, in units of
    eps (projected with ``|u|`` and added to the terms of :func:`model_allowance`).

    ``engines x min(sens_a, sens_b)``: a backward-stable rule is exact for an argument
    perturbed by a few ulps, ``x_k (1 + delta_k)``, which moves element ``j`` of ``J^T v`` by up
    to ``sum_k |d(J^T v)_j / dx_k| |x_k| eps`` (the sensitivity, :func:`argument_sensitivity`,
    in units of eps); for ``y = f(x)`` elementwise that is ``|v_j f''(x_j) x_j| eps``, the
    condition number ``|x f'' / f'|`` of the rule times its value.  In a comparison of two
    engines each may be off by it (``engines=2``); against the reference only the backend is
    (``engines=1``: the reference is held to the accurate value).  The smaller measured
    sensitivity counts, so no engine widens the allowance by a derivative of its own that the
    other does not share.  ``ROUNDING_GAMMA`` then covers the few ulps of ``delta`` as it does
    for the terms."""
    return float(engines) * np.minimum(np.abs(sens_a), np.abs(sens_b))


def rounding_level(discrepancy: float, terms: float, unit: float, dtype: str, *,
                   model: ErrorModel = DEFAULT_MODEL) -> float | None:
    """:meth:`ErrorModel.rounding_level` of ``model``."""
    return model.rounding_level(discrepancy, terms, unit, dtype)


def resolved(model_allowed: float, terms: float, *, fd_error: float = 0.0,
             rounding_floor: float = 0.0, model: ErrorModel = DEFAULT_MODEL) -> bool:
    """:meth:`ErrorModel.resolved` of ``model``."""
    return model.resolved(model_allowed, terms, fd_error=fd_error, rounding_floor=rounding_floor)


def fd_rounding_floor(v: np.ndarray, f: np.ndarray, value: np.ndarray, curvature: np.ndarray,
                      h_max: float, h_min: float, *, model: ErrorModel = DEFAULT_MODEL) -> float:
    """:meth:`ErrorModel.fd_rounding_floor` of ``model``."""
    return model.fd_rounding_floor(v, f, value, curvature, h_max, h_min)


def ratio(discrepancy: float, allowed: float) -> float:
    """``discrepancy / allowed``; 0/0 is 0 and x/0 is inf."""
    if allowed > 0:
        return discrepancy / allowed
    return 0.0 if discrepancy == 0 else float("inf")


def validated_model(value: Any) -> ErrorModel:
    """The ``error_model=`` argument of the public entry points: ``None`` (the default model) or
    an :class:`ErrorModel` instance; anything else is an :class:`InvalidArgument`."""
    if value is None:
        return DEFAULT_MODEL
    if not isinstance(value, ErrorModel):
        raise InvalidArgument(f"error_model={value!r} must be None or a gradcheck.ErrorModel, "
                              "e.g. error_model=gradcheck.ErrorModel(fd_safety=3.0) (got "
                              f"{type(value).__name__})")
    return value
