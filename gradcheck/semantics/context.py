"""Shared machinery of the semantic probes and the audit: bug classes, known backend behaviours,
the probe context and the elementwise comparison under the error model.

Every numeric comparison here goes through :class:`gradcheck.oracle.error_model.ErrorModel`: the
allowed
error of element ``i`` is ``model.allowed(fd_error_i, magnitude_i, dtype)`` = ``fd_safety x
fd_error_i + rounding_gamma x eps(dtype) x magnitude_i`` where ``magnitude_i`` is the sum of
the absolute terms that produced the compared value (the caller knows them: e.g. ``|a cos p| +
|c p|`` for a gradient ``a cos p + c p``); the model is the run's
(:attr:`ProbeContext.error_model`, the default unless one is passed).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.backends.base import Backend
from gradcheck.core.dtypes import widest_dtype
from gradcheck.core.known import known_behaviour
from gradcheck.core.results import CheckKind, CheckResult, Status
from gradcheck.oracle import error_model as tolerance

QUOTE = 300
"""Characters of an exception a probe's message quotes (:meth:`AdapterFailure.quoted`): what
raised, and the first line of why."""


class BugClass(str, enum.Enum):
    """The training-semantics bug a failed probe points at (its value is shown in messages)."""

    DOUBLED_SECOND_BACKWARD = "doubling on the second backward"
    ACCUMULATION_MISMATCH = "accumulation differs from the declared semantics"
    RESET_NOT_RESETTING = "reset that does not reset"
    SET_INSTEAD_OF_ADD = "set-instead-of-add on fan-out"
    WRONG_GRADIENT = "gradient disagrees with finite differences"
    STALE_CACHE = "stale cache on rebinding"
    DOUBLED_RERUN = "re-run gives doubled gradients"
    NOT_LINEAR = "gradient not linear in the loss scale"
    CLIP_CHANGES_DIRECTION = "clip that changes direction"
    CLIP_IGNORES_THRESHOLD = "clip that ignores the threshold"
    NORM_NOT_GLOBAL_L2 = "reported norm is not the global L2 norm"
    PRE_POST_CLIP_MIXUP = "pre/post-clip norm mix-up"
    NONFINITE_NOT_FLAGGED = "non-finite gradients not flagged"
    THRESHOLD_NOT_VALIDATED = "invalid clip threshold applied instead of rejected"
    LOW_PRECISION_NORM = "low-precision gradient norm accumulated in too little precision"
    DOUBLE_BACKWARD_CLIP = "double-backward clipping that doubles the step"
    STEP_MISMATCH = "training step differs from lr x clipped gradient"
    SCHEDULER_STEPPED_TWICE = "LR scheduler stepped more than once per training step"
    CLIP_VALUE_MISMATCH = "elementwise gradient clip differs from the declared one"
    PRECISION_LOST_IN_STEP = "float64 step computed in float32 somewhere"
    STOP_GRADIENT_LEAKS = "stop-gradient that leaks"
    NO_GRAD_MODE_MISMATCH = "no-grad region: modes disagree with the declared behaviour"
    DETACH_IN_INPUT_PATH = "detach in the input path"
    HOST_ROUND_TRIP = "host round trip blocks gradients"
    UNUSED_PARAMETER = "parameter without gradient or effect"
    LOSS_PROXY_NORM = "loss-proxy gradient norm"
    WRONG_NAME = "gradient extracted under a name other than the registered one"
    NONDETERMINISTIC = "nondeterministic under a controlled RNG"
    UNDECLARED_PARTIAL_STOP = "partial stop or surrogate gradient not declared"
    DECLARED_STOP_MISSING = "declared stop that does not happen"
    LOSS_SCALE_NOT_REMOVED = "loss scale not removed from the step"
    MICRO_BATCHES_SUMMED = "micro-batch gradients summed, not averaged"
    TWO_UPDATES = "two optimizer updates in one step"
    STALE_STATE = "step uses state captured at an earlier step"
    TIE_BROKEN = "declared tie not kept"
    TARGET_UPDATE_MISMATCH = "target update differs from the declared one"


@dataclass
class ProbeContext:
    """What every probe of one :func:`check_semantics` (or audit) run shares."""

    backend: Backend
    device: str
    dtype: str
    seed: int
    reproducer: str = ""
    results: list[CheckResult] = field(default_factory=list)
    error_model: tolerance.ErrorModel = tolerance.DEFAULT_MODEL  # every comparison's allowance

    def hooks(self, dtype: str | None = None) -> Any:
        """Fresh training hooks in ``dtype`` (default: the run's dtype), bridged to
        :class:`~gradcheck.backends.training.TrainingHooks` where they speak the op protocol."""
        from gradcheck.backends.op_training import as_training_hooks

        return as_training_hooks(self.backend, self.device, dtype or self.dtype)

    @property
    def rule_dtype(self) -> str:
        """The dtype of the rule probes (fan-out, detach): float64, or the backend's widest
        dtype where it has no float64."""
        return widest_dtype(self.backend.dtypes)

    def rng(self, salt: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, salt])

    def emit(self, name: str, status: Status, message: str, *, bug: BugClass | None = None,
             dtype: str | None = None, kind: CheckKind = CheckKind.SEMANTIC,
             **fields: Any) -> CheckResult:
        """Record one result; a failure is prefixed with its bug class and checked against the
        known backend behaviours."""
        details = dict(fields.pop("details", {}) or {})
        if bug is not None:
            details["bug_class"] = bug.value
        if status in (Status.FAILED, Status.ERROR) and bug is not None:
            message = f"[{bug.value}] {message}"
        known = known_behaviour(self.backend.name, name)
        if known is not None and status is Status.FAILED:
            details["known_behaviour"] = known.reason
            details["evidence"] = known.evidence
            message += f" [known {self.backend.name} behaviour: {known.reason}]"
        r = CheckResult(kind=kind, status=status, backend=self.backend.name, device=self.device,
                        dtype=dtype or self.dtype, name=name, message=message, seed=self.seed,
                        reproducer=self.reproducer, details=details, **fields)
        self.results.append(r)
        return r

    def assess(self, actual: Any, expected: Any, magnitude: Any, dtype: str,
               fd_error: Any = None) -> Assessment:
        """:func:`assess` under the run's :attr:`error_model`."""
        return assess(actual, expected, magnitude, dtype, fd_error, model=self.error_model)

    def matches(self, actual: Any, expected: Any, magnitude: Any, dtype: str,
                fd_error: Any = None) -> bool:
        """:func:`matches` under the run's :attr:`error_model`."""
        return self.assess(actual, expected, magnitude, dtype, fd_error).ok

    def compare(self, name: str, actual: Any, expected: Any, magnitude: Any, *, what: str,
                bug: BugClass, dtype: str | None = None, fd_error: Any = None,
                kind: CheckKind = CheckKind.SEMANTIC, details: dict | None = None
                ) -> CheckResult:
        """Elementwise ``actual`` vs ``expected`` (arrays or name -> array dicts) under the error
        model; the worst element (largest discrepancy / allowed) is the reported one."""
        dt = dtype or self.dtype
        return self.record(name, self.assess(actual, expected, magnitude, dt, fd_error),
                           what=what,
                           bug=bug, dtype=dt, kind=kind, details=details)

    def record(self, name: str, a: Assessment, *, what: str, bug: BugClass,
               dtype: str | None = None, kind: CheckKind = CheckKind.SEMANTIC,
               details: dict | None = None) -> CheckResult:
        """Emit one result from an :class:`Assessment`."""
        info = {**(details or {}), **a.details()}
        if a.elements == 0:
            return self.emit(name, Status.PASSED, f"{what}: nothing to compare", dtype=dtype,
                             kind=kind, details=info, elements_over=a.elements_over)
        return self.emit(name, Status.PASSED if a.ok else Status.FAILED, a.message(what),
                         bug=bug, dtype=dtype, kind=kind, expected=a.expected, actual=a.actual,
                         discrepancy=a.discrepancy, relative_discrepancy=a.relative,
                         allowed=a.allowed, allowed_source=a.source, discrepancy_ratio=a.ratio,
                         details=info, elements_over=a.elements_over)


@dataclass(frozen=True)
class Assessment:
    """The outcome of one elementwise comparison (its worst element)."""

    ok: bool
    label: str
    actual: float
    expected: float
    discrepancy: float
    relative: float
    allowed: float
    source: str
    ratio: float
    elements: int
    elements_over: int
    factor: float | None
    note: str = ""

    def details(self) -> dict[str, Any]:
        """Shown as is; ``elements_over`` is the result's typed field."""
        out: dict[str, Any] = {"worst_element": self.label, "elements": self.elements}
        if self.factor is not None:
            out["factor"] = self.factor
        return out

    def message(self, what: str) -> str:
        verdict = "agrees" if self.ok else "DISAGREES"
        factor = "" if self.factor is None else f"; measured {self.factor:.6g} x expected"
        note = f" ({self.note})" if self.note else ""
        if not (np.isfinite(self.actual) and np.isfinite(self.expected)):
            return (f"{what} {verdict}: element {self.label} is non-finite (actual "
                    f"{self.actual:.10g} vs expected {self.expected:.10g}): a non-finite value "
                    f"never agrees, whatever the tolerance{note}")
        return (f"{what} {verdict}: worst element {self.label}: actual {self.actual:.10g} vs "
                f"expected {self.expected:.10g}, |diff| {self.discrepancy:.3g}, allowed "
                f"{self.allowed:.3g} [{self.source}]{factor}{note}")


def assess(actual: Any, expected: Any, magnitude: Any, dtype: str,
           fd_error: Any = None, *, model: tolerance.ErrorModel = tolerance.DEFAULT_MODEL
           ) -> Assessment:
    """Compare elementwise under the error ``model`` (see module doc); pure, emits nothing."""
    a, labels = flatten(actual)
    e, _ = flatten(expected)
    mag, _ = flatten(magnitude)
    if not (a.shape == e.shape == mag.shape):
        raise ValueError(f"compared shapes differ: actual {a.shape}, expected {e.shape}, "
                         f"magnitude {mag.shape}")
    fe = flatten(fd_error)[0] if fd_error is not None else np.zeros_like(e)
    allowed = model.allowed(fe, mag, dtype)
    with np.errstate(all="ignore"):
        diff = np.abs(a - e)
        ratio = np.where(diff == 0, 0.0, diff / np.maximum(allowed, 1e-300))
    ratio = np.where(np.isfinite(a) & np.isfinite(e), ratio, np.inf)
    if not ratio.size:
        return Assessment(True, "", 0.0, 0.0, 0.0, 0.0, 0.0, "", 0.0, 0, 0, None)
    i = int(np.argmax(ratio))
    allow = model.allowance(float(fe[i]), float(mag[i]), dtype)
    ee = float(e @ e)
    factor = float(a @ e) / ee if ee > 0 and np.all(np.isfinite(a)) else None
    disc = float(diff[i]) if np.isfinite(diff[i]) else float("inf")
    rel = disc / abs(float(e[i])) if e[i] != 0 else (0.0 if disc == 0 else float("inf"))
    return Assessment(bool(ratio[i] <= 1.0), labels[i], float(a[i]), float(e[i]), disc, rel,
                      allow.allowed, allow.source, float(ratio[i]), int(a.size),
                      int(np.count_nonzero(ratio > 1.0)), factor)


def matches(actual: Any, expected: Any, magnitude: Any, dtype: str, fd_error: Any = None, *,
            model: tolerance.ErrorModel = tolerance.DEFAULT_MODEL) -> bool:
    """Whether ``actual`` agrees with ``expected`` under the error ``model``: used to *name* a
    failure (does it match a known bug's signature?), with the same allowance as the verdict."""
    return assess(actual, expected, magnitude, dtype, fd_error, model=model).ok


def flatten(values: Any) -> tuple[np.ndarray, list[str]]:
    """A float64 vector and element labels (``"name[i, j]"``) from an array or a name -> array
    dict (``None`` entries count as zeros of unknown shape: they must come with a shape)."""
    if isinstance(values, Mapping):
        parts: list[np.ndarray] = []
        labels: list[str] = []
        for k, v in values.items():
            arr = np.zeros(0) if v is None else np.asarray(v, dtype=np.float64)
            parts.append(arr.ravel())
            labels.extend(f"{k}[{', '.join(map(str, np.unravel_index(j, arr.shape)))}]"
                          if arr.ndim else k for j in range(arr.size))
        return (np.concatenate(parts) if parts else np.zeros(0)), labels
    arr = np.asarray(values, dtype=np.float64)
    labels = [f"[{', '.join(map(str, np.unravel_index(j, arr.shape)))}]" if arr.ndim else "[]"
              for j in range(arr.size)]
    return arr.ravel(), labels


def filled(grads: Mapping[str, np.ndarray | None], like: Mapping[str, np.ndarray]
           ) -> dict[str, np.ndarray]:
    """Stored gradients with ``None`` (no gradient stored) read as zeros of the parameter's
    shape, all float64."""
    return {k: np.zeros(np.shape(like[k])) if grads.get(k) is None
            else np.asarray(grads[k], dtype=np.float64) for k in like}


def global_norm(grads: Mapping[str, np.ndarray]) -> float:
    """The global L2 norm recomputed in float64 (independent of any engine)."""
    return float(np.sqrt(sum(float(np.sum(np.square(np.asarray(g, dtype=np.float64))))
                             for g in grads.values())))

