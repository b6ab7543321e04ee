"""The verdict of one comparison: a frozen :class:`Comparison` of per-probe scalars judged by
the pure :func:`judge` against an :class:`AllowanceModel` into a frozen :class:`Verdict`.

A comparison passes when every probe is within its allowance *and* resolved: the error
model's allowance (never an explicit tolerance) small against the compared terms
(:meth:`gradcheck.oracle.error_model.ErrorModel.resolved`); a pass that is not resolved is
``inconclusive``.  The reported probe is the worst one: the largest ratio, or on an
unresolved pass the least resolved probe."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcheck.core.results import CheckKind, CheckResult, Status, number, shown
from gradcheck.oracle import error_model


@dataclass(frozen=True)
class AllowanceModel:
    """Where a comparison's allowance comes from: the error model (``model``, a
    :class:`gradcheck.oracle.error_model.ErrorModel`: ``check(..., error_model=...)``), or an
    explicit
    ``atol`` / ``rtol`` where the caller gave one (resolution is always the error model's)."""

    atol: float | None = None
    rtol: float | None = None
    model: error_model.ErrorModel = error_model.DEFAULT_MODEL

    @property
    def explicit(self) -> bool:
        return self.atol is not None or self.rtol is not None

    def allowance(self, expected: float, fd_error: float, terms: float, dtype: str, *,
                  conditioning: float = 0.0, measured: float = 0.0) -> error_model.Allowance:
        return error_model.allowance(expected, fd_error, terms, dtype, conditioning=conditioning,
                                   measured=measured, atol=self.atol, rtol=self.rtol,
                                   model=self.model)

    def modelled(self, fd_error: float, terms: float, dtype: str, *, conditioning: float = 0.0,
                 measured: float = 0.0) -> float:
        """The error model's allowance, whatever the explicit tolerance."""
        return float(self.model.allowed(fd_error, terms, dtype, conditioning=conditioning,
                                        measured=measured))

    def resolved(self, modelled: float, terms: float, *, fd_error: float = 0.0,
                 rounding_floor: float = 0.0) -> bool:
        """:meth:`gradcheck.oracle.error_model.ErrorModel.resolved`."""
        return self.model.resolved(modelled, terms, fd_error=fd_error,
                                   rounding_floor=rounding_floor)


@dataclass(frozen=True)
class Comparison:
    """Per probe, the two compared scalars and what the error model needs to judge them.

    ``fd_error`` is zero (and ``floors`` zero) where two AD values are compared; ``dtype`` is
    the precision the rounding bound is taken in (the rule dtype)."""

    kind: CheckKind
    actual: np.ndarray
    expected: np.ndarray
    fd_error: np.ndarray
    terms: np.ndarray
    dtype: str
    conditioning: np.ndarray | None = None
    measured: np.ndarray | None = None
    floors: np.ndarray | None = None
    label: str = ""  # the reverse path's name (eager vs functional)

    @property
    def probes(self) -> int:
        return len(self.actual)


@dataclass(frozen=True)
class Verdict:
    """The judged comparison, at its reported probe."""

    status: Status
    probe: int
    expected: float
    actual: float
    discrepancy: float
    relative: float
    allowed: float
    source: str
    ratio: float
    resolution: float  # the largest model allowance / terms over the probes
    model_allowed: float  # the error model's allowance at the reported probe
    terms: float  # the compared terms at the reported probe
    fd_error: float = 0.0  # the oracle's error estimate at the reported probe (0: AD vs AD)

    @property
    def ok(self) -> bool:
        return self.status is not Status.FAILED


def _at(a: np.ndarray | None, q: int) -> float:
    return 0.0 if a is None else float(a[q])


def probe_ratios(c: Comparison, model: AllowanceModel
                 ) -> tuple[list[float], list[error_model.Allowance]]:
    """Per probe: the ratio of ``|actual - expected|`` to the allowance, and the allowance."""
    ratios, allows = [], []
    for p in range(c.probes):
        a = model.allowance(float(c.expected[p]), float(c.fd_error[p]), float(c.terms[p]),
                            c.dtype, conditioning=_at(c.conditioning, p),
                            measured=_at(c.measured, p))
        allows.append(a)
        ratios.append(error_model.ratio(abs(float(c.actual[p]) - float(c.expected[p])), a.allowed))
    return ratios, allows


def _vouched(c: Comparison, q: int, ratio: float, resolution: float) -> bool:
    """Whether probe ``q`` fails whatever the oracle's error: a finite value beyond its
    allowance (``ratio`` above 1); a non-finite value against a different non-finite one
    (``inf`` vs ``-inf``, a value vs NaN); or a non-finite value against a finite expected value
    whose finite-difference error is at most ``resolution`` of it (two AD values: error 0), so
    that the true derivative is known to be finite there; or a NaN whose terms are not
    infinite (a NaN in the AD values, which no true derivative rounds to, whatever it is
    compared with; infinite terms make NaN of ``inf - inf`` in the projection).  Two equal
    infinite values, or NaNs of infinite terms, decide nothing."""
    a, e, err = float(c.actual[q]), float(c.expected[q]), float(c.fd_error[q])
    if np.isfinite(a):
        return ratio > 1.0
    if np.isnan(a) and not np.isinf(c.terms[q]):
        return True  # a NaN in the AD values themselves (not inf - inf in the projection)
    if not np.isfinite(e):
        return not (a == e or (np.isnan(a) and np.isnan(e)))
    return bool(np.isfinite(err)) and err <= resolution * abs(e)


def judge(c: Comparison, model: AllowanceModel) -> Verdict:
    """The verdict of ``c`` (module docstring): pure, no adapter call, no record."""
    ratios, allows = probe_ratios(c, model)
    p = int(np.argmax(ratios))
    ok = ratios[p] <= 1.0 and np.isfinite(c.actual[p])
    # resolution before verdict: a pass needs an allowance small against the compared terms
    # on every probe (ErrorModel.resolved; the model's allowance, also under atol/rtol)
    models = [model.modelled(float(c.fd_error[q]), float(c.terms[q]), c.dtype,
                             conditioning=_at(c.conditioning, q), measured=_at(c.measured, q))
              for q in range(c.probes)]
    with np.errstate(all="ignore"):
        resolution = [m / float(t) if t > 0 else 0.0 for m, t in zip(models, c.terms,
                                                                          strict=True)]
    unresolved = [q for q in range(c.probes)
                  if not model.resolved(models[q], float(c.terms[q]),
                                        fd_error=float(c.fd_error[q]),
                                        rounding_floor=_at(c.floors, q))]
    if ok and unresolved:
        p = max(unresolved, key=lambda q: resolution[q])
    undecided = False
    if not ok and not np.isfinite(c.actual[p]):
        # a non-finite value fails only against a value known to be finite (or another
        # non-finite one): FD estimates that bound themselves, or an AD value (fd_error 0);
        # else the derivative may be beyond float64 (1/x at 1e-300: -1e600), or the steps too
        # coarse to see it (a pole at 3e-300): nothing is decided (docs/error-model.md, e)
        vouched = [q for q in range(c.probes)
                   if _vouched(c, q, ratios[q], model.model.resolution)]
        if vouched:
            p = max(vouched, key=lambda q: (not np.isfinite(c.actual[q]), ratios[q]))
        else:
            undecided = True
    disc = abs(float(c.actual[p]) - float(c.expected[p]))
    rel = (disc / abs(float(c.expected[p])) if c.expected[p] != 0
           else (0.0 if disc == 0 else float(np.inf)))
    status = (Status.INCONCLUSIVE if undecided else Status.FAILED if not ok
              else Status.INCONCLUSIVE if unresolved else Status.PASSED)
    return Verdict(status, p, float(c.expected[p]), float(c.actual[p]), disc, float(rel),
                   allows[p].allowed, allows[p].source, float(ratios[p]),
                   float(max(resolution)), models[p], float(c.terms[p]), float(c.fd_error[p]))


def agreement_message(r: CheckResult, label: str) -> str:
    """``<subject> agrees|DISAGREES: actual .. vs expected ..; |diff| .., allowed .., ratio``."""
    what = r.subject + (f" ({label})" if label else "")
    verdict = "agrees" if r.status is Status.PASSED else "DISAGREES"
    v = shown(r)
    assert v is not None  # every caller compared two values
    return (f"{what} {verdict}: actual {v.actual} vs expected {v.expected}; "
            f"|diff| {v.difference} (relative {v.relative}), "
            f"allowed {v.allowed} [{r.allowed_source}], ratio {v.ratio}")


def unresolved_message(r: CheckResult, label: str, model: float, terms: float,
                       oracle: bool, resolution: float = error_model.RESOLUTION,
                       fd_error: float = 0.0) -> str:
    """Why a comparison within its allowance is not passed: the allowance is not resolved."""
    what = r.subject + (f" ({label})" if label else "")
    v = shown(r)
    assert v is not None
    if r.actual is not None and not np.isfinite(r.actual):
        return (f"{what} not decided: actual {v.actual} vs expected {v.expected}: "
                + ("two equal non-finite values decide nothing" if r.expected is not None
                   and not np.isfinite(r.expected) else
                   f"the finite-difference estimate does not bound the derivative (its error "
                   f"{number(fd_error)} against the value {v.expected}, more than "
                   f"{resolution:g}x it), so the true derivative may be beyond float64's range "
                   "(1/x at 1e-300 is -1e600) or vary on a scale the steps do not see")
                + f"; not passed [{r.allowed_source}]")
    times = f"{model / terms:.3g}x" if terms > 0 else "infinitely many times"
    cause = ("the finite-difference estimate cannot resolve this derivative (f is noisy, "
             "nondeterministic or not smooth on the scale of the steps)" if oracle else
             "the rounding bound of this comparison is as large as what it compares")
    return (f"{what} not resolved: allowed error {number(model)} is {times} the compared "
            f"terms {number(terms)} (at most {resolution:g}x can pass): {cause}, not "
            f"passed; actual {v.actual} vs expected {v.expected}, |diff| {v.difference} "
            f"[{r.allowed_source}]")


def rounding_level_note(level: float, factor: float = error_model.ROUNDING_LEVEL) -> str:
    """What a failure at the rounding level adds to its message (``factor``: the model's
    rounding-level factor)."""
    return (f"; at the rounding level (|diff| within {number(level)}, "
            f"{factor:g} eps of the comparison's scale): a rounding "
            "inconsistency, not a wrong rule")
