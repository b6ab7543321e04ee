"""Known discrepancies: one record for every expected failure, whatever checked it.

A :class:`KnownDiscrepancy` is a real, investigated discrepancy of a backend (or a documented
behaviour that fails a semantic probe): which backend, why (``reason``, with a ``link`` to the
evidence or the ``evidence`` itself), and which results it covers (``subject``: the catalog op
or the probe name; ``check``: the :class:`~gradcheck.CheckKind`; ``dtype``; ``point``: the
special point of the catalog, ``random`` for the seeded sample; ``profile``: the suite
profile whose run shows it, for a Hypothesis search that finds it only with the larger example
budget of ``thorough``), each ``"*"`` for any.  The
matching suite test is a strict xfail and the result carries the reason (``details["known"]``
or ``details["known_behaviour"]``), so the report shows it as ``known`` and a fixed upstream
behaviour shows up as an unexpected pass.

The records are data in three places, all of this one type: on the op specs
(``gradcheck/ops/<family>.py``, built with :func:`gradcheck.ops.spec.known`), the tables of the
engines added later (``gradcheck/ops/engine_known.py``), and :data:`SEMANTIC` below for the
semantic probes.  Evidence and reproducers: ``docs/known-discrepancies*.md`` and
``docs/semantics.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.core.taxonomy import CheckKind

ANY = "*"


@dataclass(frozen=True)
class KnownDiscrepancy:
    """A real, investigated backend discrepancy: the matching suite test is a strict xfail
    (non-strict where ``strict`` is False: a discrepancy that depends on the machine).

    ``check`` is a :class:`~gradcheck.CheckKind` (or its value) or ``"*"``; ``point`` is a
    special-point name, ``"random"`` for the seeded sample or ``"*"``; ``subject`` is the op
    (catalog entries) or the probe (semantic entries) or ``"*"``; ``profile`` is a suite
    profile (``quick``, ``ci``, ``thorough``) or ``"*"``.
    """

    backend: str
    reason: str
    link: str = ""
    dtype: str = ANY
    check: str = ANY
    point: str = ANY
    subject: str = ANY
    evidence: str = ""
    profile: str = ANY
    #: False only where the discrepancy shows on some machines and not others (the evidence
    #: says which): the suite test is then a non-strict xfail, so a machine without it passes
    strict: bool = True

    def __post_init__(self) -> None:
        if self.check != ANY and type(self.check) is not CheckKind:
            object.__setattr__(self, "check", CheckKind(self.check))  # a typo raises here

    def matches(self, backend: str, dtype: str, check: str, point: str,
                profile: str = ANY) -> bool:
        """Whether this record covers a result of ``check`` on ``backend`` in ``dtype`` at
        ``point`` (of the op it is attached to) in a run of ``profile`` (``"*"``: any)."""
        return (
            self.backend == backend
            and self.dtype in (ANY, dtype)
            and self.check in (ANY, check)
            and self.point in (ANY, point)
            and self.profile in (ANY, profile)
        )

    @property
    def probe(self) -> str:
        """The semantic probe a :data:`SEMANTIC` entry covers (its ``subject``)."""
        return self.subject

    @property
    def shown(self) -> str:
        """The reason as an xfail shows it: with the link where there is one."""
        return f"{self.reason} ({self.link})" if self.link else self.reason


def semantic(backend: str, probe: str, reason: str, evidence: str) -> KnownDiscrepancy:
    """A documented backend behaviour that fails the semantic probe ``probe``."""
    return KnownDiscrepancy(backend, reason, check=CheckKind.SEMANTIC, subject=probe,
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
    for k in SEMANTIC:
        if k.backend == backend and k.subject == probe:
            return k
    return None
