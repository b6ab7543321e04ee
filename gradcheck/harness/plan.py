"""Which cases each suite check runs: backends x devices x dtypes x ops x points, by profile.

This module is pure data selection (no pytest): :func:`plan` returns :class:`Planned` cases,
each with a skip reason (an op the backend lacks, a device that is absent) or a known
discrepancy (a strict xfail) where one applies.  The pytest plugin turns them into params.

Profiles
--------
* ``quick``: a few ops per family (``QUICK`` in each family module), float64 and float32, special
  points in float64, first order only.
* ``ci``: every op, float64 and float32 at the seeded sample, special points in float64; order 2
  (seeded sample, float64) and a short derandomized Hypothesis search (float64) on the
  ``QUICK`` ops.
* ``thorough``: ``ci`` + order 2 for every op at every point in every dtype, a longer Hypothesis
  search guided by ``target()`` for every op in every dtype.

A selection (``Selection.ops``, ``--op``) filters the profile's plan and adds nothing to it, so
every known discrepancy is matched under any selection as in the full run
(:func:`selected_specs`).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from functools import cache

import numpy as np

from gradcheck.backends.base import Backend
from gradcheck.backends.registry import backend_devices, get_backend, installed_backends
from gradcheck.core import taxonomy
from gradcheck.core.rules import NumpyFunction
from gradcheck.core.taxonomy import INFO, CheckKind, DtypeRule
from gradcheck.harness.runner import RANDOM, Case, case_inputs
from gradcheck.ops import catalog
from gradcheck.ops.spec import OpSpec

PROFILES = ("quick", "ci", "thorough")
DTYPES = ("float64", "float32")
GPU_NAMES = {"torch": "cuda", "jax": "gpu"}  # device each built-in backend calls its GPU

#: the kinds the suites plan (:mod:`gradcheck.core.taxonomy` says what each one is)
FIRST_ORDER = taxonomy.FIRST_ORDER
AGREEMENT = taxonomy.AGREEMENT
CHECKS = taxonomy.SUITE_CHECKS


@dataclass(frozen=True)
class Selection:
    """What the user asked for (options / ini); None means the profile's default."""

    profile: str = "quick"
    backends: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    ops: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Planned:
    """One planned suite case: run it, skip it (``skip``), or expect it to fail (``xfail``)."""

    case: Case
    check: CheckKind
    order: int = 1
    skip: str = ""
    xfail: str = ""
    strict: bool = True  # False: a known discrepancy that depends on the machine

    @property
    def id(self) -> str:
        return self.case.id


def _op_selected(name: str, patterns: tuple[str, ...] | None) -> bool:
    """A pattern that is an op's exact name selects only that op; one with ``*?[`` is a glob;
    any other is a substring."""
    if not patterns:
        return True
    exact = set(catalog.names())
    return any(name == p if p in exact else fnmatch.fnmatchcase(name, p)
               if any(c in p for c in "*?[") else p in name for p in patterns)


def _extended(check: CheckKind) -> bool:
    """Order 2 and the search: not in ``quick``, only the ``QUICK`` ops in ``ci``."""
    return INFO[check].order == 2 or check is CheckKind.SEARCH


def selected_specs(sel: Selection, check: str = "vjp") -> list[OpSpec]:
    """Catalog ops of the profile and the filter: ``quick`` runs each family's ``QUICK`` list;
    ``ci`` runs every op, but order 2 and the search only on the ``QUICK`` list (every op in
    ``thorough``).

    ``sel.ops`` filters what the profile runs and never adds a check to an op: a selected op
    gets exactly the checks (and, through :func:`order_for`, the same memoized order) it gets in
    the profile's full run, so every result, and the known discrepancy it matches, is the same
    under any selection of ops.  The one widening is ``quick``'s first-order checks, which run
    on a selected op outside the ``QUICK`` list (``quick`` has no order 2 or search at all)."""
    specs = catalog.all_specs()
    extended = _extended(CheckKind(check))
    if (sel.profile == "quick" and not sel.ops) or (sel.profile == "ci" and extended):
        quick = set(catalog.quick_names())
        specs = tuple(s for s in specs if s.name in quick)
    return [s for s in specs if _op_selected(s.name, sel.ops)]


DEFAULT_BACKENDS = ("numpy", "torch", "jax")


def backend_names(sel: Selection) -> list[str]:
    """The selected backends; by default the built-in ones that are installed (further
    adapters, e.g. from entry points, run when named)."""
    if sel.backends:
        return list(sel.backends)
    return [b for b in DEFAULT_BACKENDS if b in installed_backends()]


def _devices(backend: str, sel: Selection) -> list[tuple[str, str]]:
    """``(device, skip reason or "")`` per device to parametrize for ``backend``."""
    found = backend_devices(get_backend(backend))
    wanted = list(sel.devices) if sel.devices else ["cpu"] + (
        [GPU_NAMES[backend]] if backend in GPU_NAMES else [])
    wanted += [d for d in found if d not in wanted and not sel.devices]
    return [(d, "" if d in found else f"device {d!r} not available for backend {backend!r} "
             f"(discovered: {', '.join(found)})") for d in wanted]


def _points(spec: OpSpec, check: CheckKind, profile: str, dtype: str) -> list[str]:
    pts = [RANDOM]
    kind = INFO[check]
    if not kind.special_points or (profile != "thorough" and (kind.order == 2
                                                              or dtype != "float64")):
        return pts  # special points: float64 (the rule); every dtype and order in thorough
    for sp in spec.special:
        if sp.expected(kind.order) != "passed" and not (
                kind.judges_kinks or (kind.order == 2 and sp.expect_order2 is not None)):
            # kinks: only the FD checks, which must say "inconclusive"; at order 2 only where
            # the first derivative is continuous and the second jumps (``expect_order2``):
            # where the first derivative itself jumps, order 2 is not defined to judge
            continue
        if not sp.fd and kind.fd_based:
            continue
        if dtype != "float64" and not representable(spec, sp.name, dtype):
            continue
        pts.append(sp.name)
    return pts


def representable(spec: OpSpec, point: str, dtype: str) -> bool:
    """Whether inputs, reference outputs and reference gradient at a point are normal numbers
    (or 0) in ``dtype`` (see :func:`_representable`)."""
    return _representable(spec.name, point, dtype)


@cache
def _representable(op: str, point: str, dtype: str) -> bool:
    """Whether inputs, reference outputs and reference gradient at a point are normal numbers
    (or 0) in ``dtype``: the rounding model of a dtype says nothing about its overflow or
    subnormal range."""
    return in_rounding_range(op, case_inputs(Case("numpy", "cpu", "float64", op, point)), dtype)


def in_rounding_range(op: str, inputs: tuple[np.ndarray, ...], dtype: str, *,
                      floor: float = 1.0) -> bool:
    """Whether ``inputs``, the NumPy reference's outputs there and its gradient (ones
    cotangent) are 0 or have magnitudes in ``[floor * tiny, max]`` of ``dtype``.

    ``floor=1`` asks for normal numbers; ``floor = 1 / eps`` also keeps every value one unit
    roundoff above the subnormal range, so that scaling it by a probe or cotangent entry of
    magnitude >= eps stays normal (below it, an underflow's absolute error, up to ``tiny``
    where the engine flushes subnormals to zero as XLA does on CPU, exceeds the relative
    rounding the error model allows)."""
    arrays = [a for a in inputs if np.issubdtype(np.asarray(a).dtype, np.floating)]
    ref = get_backend("numpy").op(op)
    if isinstance(ref, NumpyFunction):
        with np.errstate(all="ignore"):
            outs = [np.asarray(o, dtype=np.float64) for o in _tuple(ref.forward(*inputs))]
            cts = [np.ones_like(o) for o in outs]
            grads = ref.vjp(list(inputs), cts)
        arrays += outs + [np.asarray(g, dtype=np.float64) for g in grads if g is not None]
    info = np.finfo(np.dtype(dtype))
    low = floor * float(info.tiny)
    for a in arrays:
        a = np.asarray(a)
        mag = np.abs(a[np.isfinite(a)])
        if np.any((mag != 0) & ((mag < low) | (mag > info.max))):
            return False
    return True


def _tuple(x: object) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _supports(backend: str, check: CheckKind) -> str:
    """Empty if ``backend`` can run ``check``, else the skip reason."""
    be = get_backend(backend)
    kind = INFO[check]
    if kind.needs_jvp and not be.supports_jvp:
        return f"backend {backend!r} declares no forward mode"
    if kind.order == 2 and not be.supports_order2:
        return f"backend {backend!r} declares no order-2 support"
    if kind.needs_alternative_path and type(be).alternative_vjps is Backend.alternative_vjps:
        return f"backend {backend!r} has a single reverse-mode path"
    return ""


def _dtypes(check: CheckKind, sel: Selection, backend: str) -> list[str]:
    dts = list(sel.dtypes or DTYPES)
    rule = INFO[check].dtype_rule
    if rule is DtypeRule.FLOAT64:
        return [d for d in dts if d == "float64"]
    if rule is DtypeRule.LOW_PRECISION:
        return [d for d in dts if d != "float64"]
    if rule is DtypeRule.FLOAT64_UNLESS_THOROUGH:
        return dts if sel.profile == "thorough" else [d for d in dts if d == "float64"]
    return dts


def plan(check: str, sel: Selection) -> list[Planned]:
    """Every case of ``check`` (a :class:`CheckKind` of the suites) for the selection, in a
    stable order."""
    if check not in CHECKS:
        raise ValueError(f"check={check!r} is not one of {tuple(k.value for k in CHECKS)}")
    check = CheckKind(check)
    if _extended(check) and sel.profile == "quick":
        return []  # quick: first order only (ci and thorough add order 2 and the search)
    if check is CheckKind.CROSS_BACKEND:
        return _plan_pairs(sel)
    out = []
    for backend in backend_names(sel):
        if check is CheckKind.REFERENCE and backend == "numpy":
            continue
        unsupported = _supports(backend, check)
        for device, no_device in _devices(backend, sel):
            if check is CheckKind.CROSS_DEVICE and device == "cpu":
                continue
            for dtype in _dtypes(check, sel, backend):
                no_dtype = "" if dtype in get_backend(backend).dtypes else \
                    f"backend {backend!r} has no {dtype}"
                for spec in selected_specs(sel, check):
                    out.extend(_planned(check, sel, backend, device, dtype, spec,
                                        unsupported or no_device or no_dtype))
    return out


def _planned(check: CheckKind, sel: Selection, backend: str, device: str, dtype: str,
             spec: OpSpec, skip: str) -> list[Planned]:
    if INFO[check].order == 2 and not spec.order2:
        return []
    if dtype not in spec.dtypes:
        return []
    missing = "" if get_backend(backend).op(spec.name) is not None else \
        catalog.missing_reason(backend, spec.name)
    out = []
    for pt in _points(spec, check, sel.profile, dtype):
        case = Case(backend, device, dtype, spec.name, pt)
        known = spec.known_for(backend, dtype, check, pt, sel.profile)
        xfail = known.shown if known else ""
        out.append(Planned(case, check, order_for(case, sel), skip or missing, xfail,
                           known.strict if known else True))
    return out


def order_for(case: Case, sel: Selection) -> int:
    """2 where the selection runs order-2 checks for this case (the first-order checks then
    read the same memoized report), else 1."""
    spec = catalog.get_spec(case.op)
    if not spec.order2:
        return 1
    if sel.profile == "thorough":
        return 2
    if sel.profile == "quick":
        return 1
    order2_ops = {s.name for s in selected_specs(sel, CheckKind.VJP_OF_VJP)}
    return 2 if case.point == RANDOM and case.dtype == "float64" and case.op in order2_ops else 1


def _plan_pairs(sel: Selection) -> list[Planned]:
    names = [b for b in backend_names(sel) if b != "numpy"]
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for dtype in _dtypes(CheckKind.CROSS_BACKEND, sel, a):
                no_dtype = next((f"backend {x!r} has no {dtype}" for x in (a, b)
                                 if dtype not in get_backend(x).dtypes), "")
                for spec in selected_specs(sel):
                    missing = next((catalog.missing_reason(x, spec.name) for x in (a, b)
                                    if get_backend(x).op(spec.name) is None), no_dtype)
                    for pt in _points(spec, CheckKind.CROSS_BACKEND, sel.profile, dtype):
                        case = Case(f"{a}+{b}", "cpu", dtype, spec.name, pt)
                        known = (spec.known_for(a, dtype, "cross_backend", pt, sel.profile)
                                 or spec.known_for(b, dtype, "cross_backend", pt, sel.profile))
                        out.append(Planned(case, CheckKind.CROSS_BACKEND, 1, missing,
                                           known.shown if known else "",
                                           known.strict if known else True))
    return out
