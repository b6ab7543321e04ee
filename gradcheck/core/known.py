"""Known discrepancies: one record for every expected failure, whatever found it.

A :class:`KnownDiscrepancy` is a real, investigated discrepancy of a backend (or a documented
behaviour that fails a semantic probe): which backend, why (``reason``, with a ``link`` to the
evidence or the upstream issue, or the ``evidence`` itself), what it is (``nature``: a ``bug``,
``by_design``, or a ``limitation`` of the engine or of the oracle), and which results it covers.
The covered results are given by globs (:func:`fnmatch.fnmatchcase`; ``"*"``: any): ``subject``
(the catalog op, the sweep's qualified op name or the semantic probe), ``checks`` (each a
:class:`~gradcheck.CheckKind` or ``"*"``), ``dtypes``, ``points`` (the catalog's special point,
``random`` for the seeded sample, or the sweep's band) and ``profile`` (the suite profile whose
run shows it, for a Hypothesis search that finds it only with the larger example budget of
``thorough``).  :meth:`KnownDiscrepancy.matches` and :func:`find` are the one place a result is
matched against records.

A matching suite test is a strict xfail (non-strict where ``strict`` is False) and the result
carries the reason (:attr:`~gradcheck.core.results.CheckResult.known_as`), so the report shows
it as ``known`` and a fixed upstream behaviour shows up as an unexpected pass.

The records are data in four places, all of this one type: on the op specs
(``gradcheck/ops/<family>.py``, built with :func:`gradcheck.ops.spec.known`), the tables of the
engines added later (``gradcheck/ops/engine_known.py``), the sweep's findings
(``gradcheck/sweep/known.py``) and :data:`SEMANTIC` below for the semantic probes.  Evidence and
reproducers: ``docs/known-discrepancies*.md``, ``docs/sweep.md`` and ``docs/semantics.md``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass, replace
from fnmatch import fnmatchcase

from gradcheck.core.results import KnownMark
from gradcheck.core.taxonomy import CheckKind

ANY = "*"

#: what a discrepancy is: a wrong derivative (``bug``), the backend's documented definition
#: (``by_design``), or a precision limit of the engine or the oracle (``limitation``)
NATURES = ("bug", "by_design", "limitation")

_GLOB = frozenset("*?[")


def _covers(patterns: Iterable[str], value: str) -> bool:
    """Whether ``value`` matches one of the glob ``patterns`` (a plain name matches itself)."""
    value = str(value)
    for p in patterns:
        p = str(p)
        if p == ANY or (fnmatchcase(value, p) if _GLOB.intersection(p) else p == value):
            return True
    return False


@dataclass(frozen=True)
class KnownDiscrepancy:
    """A real, investigated backend discrepancy: the results it covers are expected failures
    (a strict xfail in the suites; non-strict where ``strict`` is False: a discrepancy that
    depends on the machine).

    Everything after ``reason`` is a keyword.  ``subject``, ``profile`` and each entry of
    ``checks``, ``dtypes`` and ``points`` are globs (``"*"``: any); a check is a
    :class:`~gradcheck.CheckKind` (or its value), so a typo raises ``ValueError``.
    """

    backend: str
    reason: str
    _: KW_ONLY
    link: str = ""
    subject: str = ANY
    checks: tuple[str, ...] = (ANY,)
    dtypes: tuple[str, ...] = (ANY,)
    points: tuple[str, ...] = (ANY,)
    profile: str = ANY
    #: one of :data:`NATURES`; the sweep reports it (``details["known_nature"]``).  The
    #: catalog's and the semantic entries keep the default: their reason says which it is
    nature: str = "bug"
    evidence: str = ""
    #: False only where the discrepancy shows on some machines and not others (the evidence
    #: says which): the suite test is then a non-strict xfail, so a machine without it passes
    strict: bool = True

    def __post_init__(self) -> None:
        for name in ("checks", "dtypes", "points"):
            if not isinstance(getattr(self, name), tuple):
                raise TypeError(f"KnownDiscrepancy.{name} is a tuple, got "
                                f"{getattr(self, name)!r}")
        object.__setattr__(self, "checks", tuple(  # a typo raises here
            c if c == ANY else CheckKind(c) for c in self.checks))
        if self.nature not in NATURES:
            raise ValueError(f"KnownDiscrepancy.nature must be one of {NATURES}, "
                             f"got {self.nature!r}")

    def matches(self, backend: str, *, subject: str = ANY, check: str = ANY, dtype: str = ANY,
                point: str = ANY, profile: str = ANY) -> bool:
        """Whether this record covers a result of ``check`` on ``backend`` for ``subject`` in
        ``dtype`` at ``point`` in a run of ``profile``.  A question left at ``"*"`` is matched
        only by a record that does not narrow it."""
        return (
            self.backend == backend
            and _covers((self.subject,), subject)
            and _covers(self.checks, check)
            and _covers(self.dtypes, dtype)
            and _covers(self.points, point)
            and _covers((self.profile,), profile)
        )

    def each(self) -> tuple[KnownDiscrepancy, ...]:
        """This record split into one per (check, dtype, point) combination, in that order:
        what the catalog attaches to an op spec, so that every combination is a strict
        expected failure of its own (``tests/support/family_checks.py`` requires each to
        reproduce)."""
        return tuple(replace(self, checks=(c,), dtypes=(d,), points=(p,))
                     for c, d, p in itertools.product(self.checks, self.dtypes, self.points))

    @property
    def shown(self) -> str:
        """The reason as an xfail shows it: with the link where there is one."""
        return f"{self.reason} ({self.link})" if self.link else self.reason

    def mark(self) -> KnownMark:
        """What a matching failed result carries (:attr:`CheckResult.known_as
        <gradcheck.core.results.CheckResult.known_as>`): the reason, the nature, the link."""
        return KnownMark(self.reason, self.nature, self.link or None)


def find(records: Iterable[KnownDiscrepancy], backend: str, *, subject: str = ANY,
         check: str = ANY, dtype: str = ANY, point: str = ANY,
         profile: str = ANY) -> KnownDiscrepancy | None:
    """The first of ``records`` that :meth:`~KnownDiscrepancy.matches` the result, or None."""
    for k in records:
        if k.matches(backend, subject=subject, check=check, dtype=dtype, point=point,
                     profile=profile):
            return k
    return None


def semantic(backend: str, probe: str, reason: str, evidence: str) -> KnownDiscrepancy:
    """A documented backend behaviour that fails the semantic probe ``probe``."""
    return KnownDiscrepancy(backend, reason, checks=(CheckKind.SEMANTIC,), subject=probe,
                            evidence=evidence)


SEMANTIC: tuple[KnownDiscrepancy, ...] = (
    semantic(
        "torch", "clip.threshold_validation",
        "torch.nn.utils.clip_grad_norm_ does not validate max_norm: the coefficient "
        "max_norm / (norm + 1e-6) is clamped only from above, so max_norm=-1 multiplies every "
        "gradient by a negative number (reverses it) and max_norm=nan turns it into NaN",
        "torch 2.13.0 CPU: grads (3, 4), max_norm=-1.0 -> (-0.6, -0.8), returned norm 5.0; "
        "max_norm=nan -> (nan, nan); see torch/nn/utils/clip_grad.py _clip_grads_with_norm_"),
    semantic(
        "tensorflow", "clip.threshold_validation",
        "tf.clip_by_global_norm does not validate clip_norm: its scale clip_norm * "
        "min(1 / norm, 1 / clip_norm) is exactly 1 for a negative clip_norm, so the gradients "
        "pass unclipped without a word, and clip_norm=nan turns them into NaN",
        "tensorflow 2.21.0 CPU: clip_by_global_norm([(3, 4)], -1.0) -> (3, 4), norm 5.0; "
        "clip_norm=nan -> (nan, nan)"),
    semantic(
        "mlx", "clip.threshold_validation",
        "mlx.optimizers.clip_grad_norm rejects max_norm < 0 but not NaN: 'nan < 0' is False, "
        "so the scale min(nan / (norm + 1e-6), 1) is NaN and every gradient becomes NaN",
        "mlx 0.32.4 CPU: clip_grad_norm({'w': [3, 4]}, -1.0) -> ValueError; "
        "clip_grad_norm({'w': [3, 4]}, nan) -> ({'w': [nan, nan]}, 5.0); see "
        "mlx/optimizers/optimizers.py clip_grad_norm"),
    *(semantic(
        "mlx", probe,
        "not a semantic fault: the op-protocol probe loss is sum(a * sin(w)) and MLX 0.32 CPU "
        "evaluates float64 sin/cos in float32 precision, so the stored gradient a * cos(w) is "
        "off by ~3e-7 relative (the measured factor is 1, as declared); see the MLX float64 "
        "entries of docs/known-discrepancies.md",
        "mlx 0.32.4 CPU: mx.cos(float64 x) vs numpy.cos: max relative error 3.3e-7 on normal "
        "samples; the probe reports 'measured 1 x expected'")
      for probe in ("accumulation.first_backward", "accumulation.rescale_backward_again")),
    semantic(
        "tinygrad", "accumulation.rescale_backward_again",
        "not an accumulation fault (the measured 5x is the declared one): tinygrad.nn.optim "
        "stores the learning rate as a float32 tensor ('at least float32 precision') also for "
        "float64 parameters, so the SGD step is float32(lr) x g: lr=0.1 is off by 1.5e-8 "
        "relative, far above float64 rounding",
        "tinygrad 0.14.0 CPU: w = 1.0 (float64), w.grad = 1.0, SGD([w], lr=0.1).step() -> "
        "1 - w = 0.10000000149011612 = float32(0.1); see tinygrad/nn/optim.py Optimizer.__init__"),
)


def known_behaviour(backend: str, probe: str) -> KnownDiscrepancy | None:
    """The :data:`SEMANTIC` entry covering ``probe`` on ``backend``, if any."""
    return find(SEMANTIC, backend, subject=probe, check=CheckKind.SEMANTIC)
