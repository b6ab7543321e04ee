"""Why a suite selection plans no numeric check: op filters that match no catalog op, dtypes no
selected backend (or no selected op) declares, every case skipped.

Used up front by ``gradcheck run`` (cheap checks, before pytest starts) and by the pytest
plugin once the plan is known (a run that checks nothing must not pass).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from gradcheck.harness.plan import DTYPES, Selection, backend_names, selected_specs


def unmatched_ops(patterns: Iterable[str]) -> list[str]:
    """The op filters (exact name, glob or substring, as the plan reads them) that select no
    catalog op in any profile."""
    return [p for p in patterns if not selected_specs(Selection("thorough", ops=(p,)))]


def op_message(pattern: str, option: str) -> str:
    return (f"{option} {pattern!r} matches no catalog op (an exact name, a glob with *?[ or a "
            "substring of a name); see `gradcheck ops`")


def undeclared_dtypes(dtypes: Iterable[str], backends: Sequence[str] | None,
                      *, only_unusual: bool = False) -> list[tuple[str, str]]:
    """``(dtype, what the selected backends declare)`` for each dtype that no selected backend
    declares.  ``only_unusual`` skips the dtypes every built-in backend declares (float64,
    float32) so that no engine is imported for them (the plugin checks them later)."""
    wanted = [d for d in dtypes if not (only_unusual and d in DTYPES)]
    if not wanted:
        return []
    from gradcheck.backends.registry import get_backend

    declared: dict[str, tuple[str, ...]] = {}
    for name in backend_names(Selection(backends=tuple(backends) if backends else None)):
        try:
            declared[name] = tuple(get_backend(name).dtypes)
        except Exception:  # an unusable backend is reported elsewhere (by the run itself)
            continue
    listing = "; ".join(f"{b}: {', '.join(d)}" for b, d in declared.items()) or "none"
    return [(d, listing) for d in wanted if not any(d in ds for ds in declared.values())]


def dtype_message(dtype: str, listing: str, option: str) -> str:
    return (f"{option} {dtype!r} is not a dtype of any selected backend (they declare "
            f"{listing}); choose one of those")


def empty_plan_message(sel: Selection, skips: Counter, option_prefix: str) -> str:
    """What to tell a user whose selection planned no runnable numeric check."""
    for pattern in unmatched_ops(sel.ops or ()):
        return op_message(pattern, f"{option_prefix}op")
    for dtype, listing in undeclared_dtypes(sel.dtypes or (), sel.backends):
        return dtype_message(dtype, listing, f"{option_prefix}dtype")
    chosen = ", ".join(f"{k}={','.join(v)}" for k, v in (
        ("backend", sel.backends), ("device", sel.devices), ("dtype", sel.dtypes),
        ("op", sel.ops)) if v)
    head = f"the selection ({chosen}, profile={sel.profile}) plans no numeric check"
    if skips:
        reasons = "; ".join(f"{reason} ({n}x)" for reason, n in skips.most_common(3))
        more = f"; and {len(skips) - 3} other reason(s)" if len(skips) > 3 else ""
        return f"{head}: every planned case is skipped: {reasons}{more}"
    if sel.dtypes:
        op_dtypes = sorted({d for s in selected_specs(sel) for d in s.dtypes})
        if not set(sel.dtypes) & set(op_dtypes):
            return (f"{head}: no selected op is defined for dtype "
                    f"{', '.join(map(repr, sel.dtypes))} (the selected ops have "
                    f"{', '.join(op_dtypes) or 'none'})")
    return f"{head}; widen --{option_prefix.lstrip('-')}backend/device/dtype/op"
