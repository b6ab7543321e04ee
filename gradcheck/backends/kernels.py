"""What an adapter reports about the kernels a function ran (the optional
:meth:`gradcheck.backends.base.Backend.trace_kernels` hook).

A correct low-precision *kernel* (one engine op: torch's ``aten.sin``, ``aten.tanh_backward``,
a custom op tagged pointwise) computes in float32 from its inputs, which float32 holds exactly,
and rounds once to its output dtype (torch's opmath, XLA's bf16 normalization).  Its output is
then, element by element, the float64 value of the same op on the same inputs correctly rounded,
up to the float32 computation's own error.  An adapter that can trace an engine's elementwise
kernels reports, for each one that ran with a floating output below float64, a
:class:`KernelCall`: what it returned, the same op in float64 on the same (upcast) inputs, and
the op's terms (``|f| + sum_i |x_i df/dx_i|``, which bound what rounding the float32
computation's intermediates can do).  The judgement itself is
:mod:`gradcheck.numeric.kernel_ulps`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from gradcheck.core.results import KnownMark

#: the kernel output elements one trace records at most (each costs a few float64 arrays and
#: float64 runs of its op): the kernels after it are named, not judged
ELEMENT_BUDGET = 2 ** 20
#: how the kernels beyond :data:`ELEMENT_BUDGET` are named in :attr:`KernelTrace.untraced`
OVER_BUDGET = "kernels beyond the element budget (2^20)"


@dataclass(frozen=True)
class KernelCall:
    """One elementwise kernel's output, with its float64 counterpart (all as float64 arrays of
    the output's shape).

    ``op``: the engine's name of the kernel (``"aten.sin.default"``); ``node``: where it ran
    (``"forward"``, or the engine's backward node, ``"TanhBackward0"``); ``dtype``: the output's
    dtype; ``got``: the kernel's output; ``exact``: the same op on the same inputs in float64;
    ``terms``: ``|exact| + sum_i |x_i d exact/d x_i|`` per element (inputs' partial derivatives
    by central differences in float64 of relative step ``2^-20``; not finite where they could
    not be estimated); ``second``: ``sum_i |f(x_i (1 + eta)) + f(x_i (1 - eta)) - 2 f(x)| / 2``
    and ``first``: ``sum_i |f(x_i (1 + eta)) - f(x_i (1 - eta))| / 2`` at that step (a second
    difference above the first and the allowance: the float64 values are not those of a
    smooth function at the inputs' scale, a pole or a jump, and the element is not judged);
    ``cast``: where an input is wider than the output (a float64 scalar tensor or a Python
    float times a bfloat16 tensor), the op in float64 on the inputs first rounded to the
    output's dtype (type promotion's cast to the common dtype, which some kernels do and
    others, torch's eager CPU scalar path, do not): either is the kernel's reference;
    ``operands``: the floating tensor inputs, upcast, broadcast to the output's shape;
    ``reproduce(k)``: a line of engine code that recomputes element ``k``; ``known``: where
    the engine's kernel is measured off the correctly rounded value in this dtype, the finding
    that records it (:class:`KnownKernel`)."""

    op: str
    node: str
    dtype: str
    got: np.ndarray
    exact: np.ndarray
    terms: np.ndarray
    first: np.ndarray
    second: np.ndarray
    cast: np.ndarray | None = None
    operands: tuple[np.ndarray, ...] = ()
    reproduce: Callable[[int], str] | None = field(default=None, compare=False)
    known: KnownKernel | None = None


@dataclass(frozen=True)
class KnownKernel:
    """An engine kernel measured off the correctly rounded value in one dtype (an engine's
    table of them: ``gradcheck.engines.torch.kernels.KNOWN``,
    ``gradcheck.engines.jax.kernels.KNOWN``).  It is judged like any kernel; a failure on it is
    the engine's defect, not the user's code, and is reported as that known finding
    (:meth:`mark`).  ``finding``: the docs/upstream id (``"T22"``); ``what``: the defect in a
    few words; ``link``: the upstream report where one exists."""

    finding: str
    what: str
    link: str | None = None

    def mark(self, op: str, dtype: str) -> KnownMark:
        """The known mark a failure on this kernel carries: the kernel, its dtype, the defect,
        the finding (and the upstream report where one exists)."""
        return KnownMark(f"the engine's {dtype} kernel {op} is measured off the correctly "
                         f"rounded value ({self.what}; docs/upstream/README.md {self.finding})",
                         "bug", self.link)


@dataclass(frozen=True)
class KernelTrace:
    """The kernels one traced call ran: ``calls`` judged (:class:`KernelCall`), and the names of
    the ops with floating outputs below float64 that are not traced as elementwise kernels
    (reductions, matrix products, ops whose meaning depends on the dtype such as
    ``nextafter``), with how many times each ran."""

    calls: tuple[KernelCall, ...]
    untraced: tuple[tuple[str, int], ...] = ()


#: the relative step of the float64 partial derivatives of a kernel (:attr:`KernelCall.terms`)
ETA = 2.0 ** -20


def differences(exact: np.ndarray, moved: Sequence[tuple[np.ndarray, np.ndarray]]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(terms, first, second)`` of :class:`KernelCall` for one output of ``exact`` (its
    float64 value), from the same output with each floating input moved by ``1 + ETA`` and
    ``1 - ETA`` (``moved``: one pair per input, each broadcast to ``exact``'s shape)."""
    shape = exact.shape
    first, second = np.zeros(shape), np.zeros(shape)
    with np.errstate(all="ignore"):
        for up, down in moved:
            u, d = np.broadcast_to(up, shape), np.broadcast_to(down, shape)
            first = first + np.abs(u - d) / 2
            second = second + np.abs(u + d - 2 * exact) / 2
        terms = np.abs(exact) + first / ETA
    return terms, first, second
