"""The check taxonomy: every kind of check, and what each one is, in one table.

A :class:`CheckKind` names what a result compares (its value is the stable string written in ids,
JSON streams and reports; ``CheckKind.VJP == "vjp"``).  :data:`INFO` holds one frozen
:class:`CheckInfo` per kind: the label a message uses, what is compared and by which two sides,
its derivative order, whether the oracle is finite differences, whether it needs forward mode
or a second reverse-mode path, which dtypes the suites run it in, and the group it belongs to.
Everything that used to be a string table of its own (labels of results, the compared-values
lines of failure messages, the suite's lists of first-order, order-2 and agreement checks, the
order-2 kind of a first-order kind) is read from here.
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass

if sys.version_info >= (3, 11):
    from enum import StrEnum as _StrEnum
else:  # pragma: no cover - Python 3.10
    class _StrEnum(str, enum.Enum):
        """:class:`enum.StrEnum` of Python 3.11: ``str()`` and formatting give the value."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


class CheckKind(_StrEnum):
    """What a check compares.  Values are stable strings used in ids, JSON and reports."""

    VJP = "vjp"  # <J^T v, u> from reverse mode vs <v, J u> from finite differences
    JVP = "jvp"  # <v, J u> from forward mode vs finite differences
    FWD_REV = "fwd_rev"  # forward mode vs reverse mode (rounding bound only)
    EAGER_FUNC = "eager_func"  # e.g. torch .backward() vs torch.func.vjp
    ROUNDING = "rounding"  # low-precision AD vs the backend's own float64 AD
    REFERENCE = "reference"  # backend VJP vs hand-derived NumPy reference VJP
    CROSS_BACKEND = "cross_backend"
    CROSS_DEVICE = "cross_device"
    VJP_OF_VJP = "vjp_of_vjp"  # order 2: reverse over reverse vs FD of the VJP
    JVP_OF_VJP = "jvp_of_vjp"  # order 2: forward over reverse vs FD of the VJP
    JVP_OF_JVP = "jvp_of_jvp"  # order 2: forward over forward vs FD of the JVP
    SEARCH = "search"  # a Hypothesis search for the largest discrepancy (the suites)
    SEMANTIC = "semantic"  # training-step behaviour probes
    FLOW = "flow"  # gradient-flow map of a model audit
    GRAD_NORM = "grad_norm"
    CONFORMANCE = "conformance"  # the adapter conformance kit's questions
    CALL = "call"  # the function could not even be evaluated


class CheckGroup(_StrEnum):
    """Which family of checks a kind belongs to (how the suites plan and the report groups)."""

    FIRST_ORDER = "first_order"  # one numeric run of check() yields all of them
    SECOND_ORDER = "second_order"  # check(order=2)
    AGREEMENT = "agreement"  # two AD results compared exactly (no finite differences)
    SEARCH = "search"
    SEMANTIC = "semantic"  # the semantic-probe table of the report
    FLOW = "flow"  # the flow maps of the report
    CONFORMANCE = "conformance"
    CALL = "call"


class DtypeRule(_StrEnum):
    """The dtypes the suites run a kind in."""

    ANY = "any"  # every selected dtype
    FLOAT64 = "float64"  # float64 only (exact agreement of two float64 derivatives)
    LOW_PRECISION = "low_precision"  # every selected dtype but float64 (rounding)
    FLOAT64_UNLESS_THOROUGH = "float64_unless_thorough"  # float64; every dtype in `thorough`


@dataclass(frozen=True)
class CheckInfo:
    """What one kind of check is.

    ``compared`` is the quantity and ``actual_by`` / ``expected_by`` the two sides, as the
    failure message writes them (``compared <J^T v, u>: 1.2 by reverse mode vs 1.3 by finite
    differences``).  ``judges_kinks``: at a kink the check must say ``inconclusive`` (the suites
    run kink points only for these); ``special_points``: the suites run it at the catalog's
    special points at all."""

    kind: CheckKind
    label: str
    group: CheckGroup
    compared: str = "value"
    actual_by: str = "actual"
    expected_by: str = "expected"
    order: int = 1
    fd_based: bool = False
    needs_jvp: bool = False
    needs_alternative_path: bool = False
    dtype_rule: DtypeRule = DtypeRule.ANY
    judges_kinks: bool = False
    special_points: bool = True


_FD = "by finite differences"
_K, _G = CheckKind, CheckGroup

INFO: dict[CheckKind, CheckInfo] = {i.kind: i for i in (
    CheckInfo(_K.VJP, "VJP", _G.FIRST_ORDER, "<J^T v, u>", "by reverse mode", _FD,
              fd_based=True, judges_kinks=True),
    CheckInfo(_K.JVP, "JVP", _G.FIRST_ORDER, "<v, J u>", "by forward mode", _FD,
              fd_based=True, needs_jvp=True, judges_kinks=True),
    CheckInfo(_K.FWD_REV, "forward-vs-reverse", _G.FIRST_ORDER, "<v, J u>", "by forward mode",
              "by reverse mode", fd_based=True, needs_jvp=True),
    CheckInfo(_K.EAGER_FUNC, "eager-vs-functional VJP", _G.FIRST_ORDER, "<J^T v, u>",
              "by the alternative path", "by the VJP", fd_based=True,
              needs_alternative_path=True),
    CheckInfo(_K.ROUNDING, "low-precision rounding of the VJP", _G.FIRST_ORDER, "||J^T v||",
              "in the dtype under test", "in float64", fd_based=True,
              dtype_rule=DtypeRule.LOW_PRECISION),
    CheckInfo(_K.VJP_OF_VJP, "VJP of VJP", _G.SECOND_ORDER, "the VJP's <J^T v, u>",
              "by reverse mode", _FD, order=2, fd_based=True,
              dtype_rule=DtypeRule.FLOAT64_UNLESS_THOROUGH),
    CheckInfo(_K.JVP_OF_VJP, "JVP of VJP", _G.SECOND_ORDER, "the VJP's <v, J u>",
              "by forward mode", _FD, order=2, fd_based=True, needs_jvp=True,
              dtype_rule=DtypeRule.FLOAT64_UNLESS_THOROUGH),
    CheckInfo(_K.JVP_OF_JVP, "JVP of JVP", _G.SECOND_ORDER, "the JVP's <v, J u>",
              "by forward mode", _FD, order=2, fd_based=True, needs_jvp=True,
              dtype_rule=DtypeRule.FLOAT64_UNLESS_THOROUGH),
    CheckInfo(_K.REFERENCE, "VJP vs NumPy reference", _G.AGREEMENT,
              dtype_rule=DtypeRule.FLOAT64),
    CheckInfo(_K.CROSS_BACKEND, "cross-backend VJP", _G.AGREEMENT,
              dtype_rule=DtypeRule.FLOAT64),
    CheckInfo(_K.CROSS_DEVICE, "cross-device VJP", _G.AGREEMENT, dtype_rule=DtypeRule.FLOAT64),
    CheckInfo(_K.SEARCH, "Hypothesis search", _G.SEARCH, fd_based=True,
              dtype_rule=DtypeRule.FLOAT64_UNLESS_THOROUGH, special_points=False),
    CheckInfo(_K.SEMANTIC, "semantic", _G.SEMANTIC),
    CheckInfo(_K.GRAD_NORM, "grad_norm", _G.SEMANTIC),
    CheckInfo(_K.FLOW, "flow", _G.FLOW),
    CheckInfo(_K.CONFORMANCE, "conformance", _G.CONFORMANCE),
    CheckInfo(_K.CALL, "call", _G.CALL),
)}

if set(INFO) != set(CheckKind):  # pragma: no cover - a kind added without its row
    raise RuntimeError(f"taxonomy: no CheckInfo for {sorted(set(CheckKind) - set(INFO))}")


def info(kind: CheckKind | str) -> CheckInfo:
    """The :class:`CheckInfo` of ``kind`` (a :class:`CheckKind` or its string value)."""
    return INFO[CheckKind(kind)]


def kinds(group: CheckGroup) -> tuple[CheckKind, ...]:
    """The kinds of ``group``, in the order of :class:`CheckKind`."""
    return tuple(k for k in CheckKind if INFO[k].group is group)


#: the numeric kinds of one first-order run, the order-2 kinds, the exact agreement kinds
FIRST_ORDER = kinds(CheckGroup.FIRST_ORDER)
SECOND_ORDER_KINDS = kinds(CheckGroup.SECOND_ORDER)
AGREEMENT = kinds(CheckGroup.AGREEMENT)
#: every kind the suites plan, in the order they are planned
SUITE_CHECKS = FIRST_ORDER + SECOND_ORDER_KINDS + AGREEMENT + (CheckKind.SEARCH,)

#: the order-2 kind of (the first-order derivative differentiated, the mode differentiating it)
SECOND_ORDER: dict[tuple[CheckKind, CheckKind], CheckKind] = {
    (CheckKind.VJP, CheckKind.VJP): CheckKind.VJP_OF_VJP,
    (CheckKind.VJP, CheckKind.JVP): CheckKind.JVP_OF_VJP,
    (CheckKind.JVP, CheckKind.JVP): CheckKind.JVP_OF_JVP,
}
