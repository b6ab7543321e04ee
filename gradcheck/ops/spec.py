"""Op specs are data: one frozen :class:`OpSpec` per catalog operation.

A spec says what an op is (name, family, arity, which arguments are differentiable), where it
may be sampled (``sample``: a seeded generator of inputs inside the domain, and ``special``:
named special points such as zeros, ties, removable singularities), which dtypes and orders
apply, and which discrepancies of real backends are known (``known``), as data.

Implementations live elsewhere, keyed by ``name``:
* ``reference/numpy``: forward + hand-derived VJP/JVP (a :class:`gradcheck.NumpyFunction`),
* ``gradcheck/backends/jax_ops``: the op written for JAX (also what the ``jax`` backend runs),
* ``gradcheck/engines/torch/ops/``: the op written for PyTorch.
A backend that lacks an op is skipped for it with a reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gradcheck.core.known import KnownDiscrepancy, find

Sampler = Callable[[np.random.Generator], tuple[np.ndarray, ...]]


@dataclass(frozen=True)
class SpecialPoint:
    """A named input where bugs cluster.  ``expect`` is the verdict a correct backend gets:
    ``"passed"`` (smooth there) or ``"inconclusive"`` (a kink / non-differentiable point).
    ``expect_order2``, where given, is the verdict of the second-order checks when it differs
    from the first-order one: a point where the function is once but not twice
    differentiable (``huber_loss`` at ``|a - b| = delta``: the first derivative is continuous,
    the second jumps) passes at order 1 and is ``"inconclusive"`` at order 2.

    ``fd=False`` marks a point the finite-difference oracle cannot judge (its steps cross a
    nearby pole, or the function's own evaluation error there exceeds ``eps * |f|``, shown by
    the oracle disagreeing with the hand-derived reference and a high-precision evaluation):
    only the exact comparisons (reference, cross-backend, cross-device) run there.
    """

    name: str
    args: tuple[np.ndarray, ...]
    expect: str = "passed"
    fd: bool = True
    expect_order2: str | None = None

    def expected(self, order: int = 1) -> str:
        """The verdict a correct backend gets at this point in the checks of ``order``."""
        return self.expect_order2 if order == 2 and self.expect_order2 is not None \
            else self.expect


@dataclass(frozen=True)
class OpSpec:
    """One catalog operation."""

    name: str
    family: str
    arity: int
    sample: Sampler
    diff_args: tuple[int, ...] | None = None  # None: every floating argument
    special: tuple[SpecialPoint, ...] = ()
    dtypes: tuple[str, ...] = ("float64", "float32")
    order2: bool = True
    known: tuple[KnownDiscrepancy, ...] = field(default=())
    doc: str = ""
    # False: the domain is not an elementwise box (SPD matrices, separated spectra,
    # well-conditioned solves), so the Hypothesis search draws whole samples from ``sample``
    box_domain: bool = True

    def known_for(self, backend: str, dtype: str, check: str, point: str = "random",
                  profile: str = "*") -> KnownDiscrepancy | None:
        """The known discrepancy covering this combination (in a run of ``profile``), if any."""
        return find(self.known, backend, subject=self.name, check=check, dtype=dtype,
                    point=point, profile=profile)


def normal(*shapes: tuple[int, ...], scale: float = 1.0) -> Sampler:
    """Sampler of independent standard normal arrays of the given shapes."""

    def sample(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return tuple(scale * rng.standard_normal(s) for s in shapes)

    return sample


def uniform(low: float, high: float, *shapes: tuple[int, ...]) -> Sampler:
    """Sampler of independent uniform arrays in ``[low, high)``."""

    def sample(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return tuple(rng.uniform(low, high, s) for s in shapes)

    return sample


def point(name: str, *args: object, expect: str = "passed", fd: bool = True,
          expect_order2: str | None = None) -> SpecialPoint:
    """Shorthand for a :class:`SpecialPoint` from array-likes (floats become float64)."""
    arrays = tuple(np.asarray(a, dtype=np.float64) if not isinstance(a, np.ndarray) else a
                   for a in args)
    return SpecialPoint(name, arrays, expect, fd, expect_order2)


def known(backend: str, reason: str, *, checks: tuple[str, ...] = ("*",),
          dtypes: tuple[str, ...] = ("*",), points: tuple[str, ...] = ("*",), link: str = "",
          profile: str = "*") -> tuple[KnownDiscrepancy, ...]:
    """One :class:`KnownDiscrepancy` per (check, dtype, point) combination of the arguments
    (:meth:`KnownDiscrepancy.each`); ``profile`` limits them to the runs of one suite
    profile."""
    return KnownDiscrepancy(backend, reason, link=link, checks=checks, dtypes=dtypes,
                            points=points, profile=profile).each()


def with_cross_backend_known(specs: tuple[OpSpec, ...], wrong: dict[tuple[str, str], str],
                             link: str = "") -> tuple[OpSpec, ...]:
    """Add a float64 ``cross_backend`` :class:`KnownDiscrepancy` for each ``(op, point): backend``
    in ``wrong``: where one engine is known wrong, two engines disagree too (listed explicitly,
    because where both are wrong the same way they still agree)."""
    from dataclasses import replace

    return tuple(replace(s, known=s.known + tuple(
        KnownDiscrepancy(be, f"{be} is known wrong at this point (see this op's other entries)",
                         link=link, dtypes=("float64",), checks=("cross_backend",), points=(pt,))
        for (op, pt), be in wrong.items() if op == s.name)) for s in specs)
