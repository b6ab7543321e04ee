"""Triage: every sweep result that failed or errored is classified with its evidence.

Classes (``CheckResult.triage.cls``, ``details["triage"]["class"]`` in the stream):

* ``confirmed``: independent evidence disagrees with the backend's derivative too: the
  scaled FD at two step families (agreeing with each other), mpmath, a NumPy/SciPy reference
  or the other engine; a likely real bug.  Where mpmath's value matches the backend's forward
  element by element, its per-element derivative decides alone (it sees a wrong element far
  below the others, which the projected sources cannot);
* ``false_alarm``: the independent evidence agrees with the backend (the oracle judged
  wrongly here; the goal is none);
* ``crash``: the op, its derivative or the check raised at the point (an ``error`` result);
* ``low_precision``: a rounding finding in float32/16 whose float64 rule the evidence
  confirms (the low-precision kernel, not the rule);
* ``rounding_level``: the compared values agree to 1e-8 relative, or two AD paths missed a
  pure rounding bound by at most 10x: a question for the error model, not a derivative bug;
* ``unresolved``: the evidence itself does not decide (FD families disagree, no reference,
  a kink or tie on the direction, the sources contradict each other).

The symptom (``nonfinite``, ``zero``, ``sign``, ``value``, ``raised``) and the class make the
de-duplication key with the op and the check kind's family: :func:`findings` groups results
into one :class:`Finding` per key, with the evidence and reproducer of its worst result.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gradcheck.core.results import CheckResult, Status, SweepInfo, Triage
from gradcheck.core.taxonomy import SECOND_ORDER_KINDS
from gradcheck.sweep import evidence, known, reproducer
from gradcheck.sweep.evidence import AGREE, FORWARD_KEYS, relative
from gradcheck.sweep.inventory.records import Op
from gradcheck.sweep.points import Point, seed_of

CLASSES = ("confirmed", "crash", "low_precision", "rounding_level", "unresolved",
           "false_alarm")
#: a comparison of two AD paths off its rounding bound by at most this: rounding_level
ROUNDING_RATIO = 10.0
#: one-sided differences farther apart than this (relative) mark a kink or a jump on the
#: direction: the FD vote abstains (smooth ops: h |f''| / |f'| at h = 2^-20, below 1e-5)
KINK = 1e-3
#: AD off the coarse FD by more than STAIRS but within FINE of the tiny-step central
#: difference: a staircase the coarse steps average over; the FD vote abstains
STAIRS, FINE = 1e-3, 1e-5


def kind_family(kind: str) -> str:
    if kind in SECOND_ORDER_KINDS:
        return "order2"
    return {"vjp": "order1", "jvp": "order1", "fwd_rev": "modes", "eager_func": "paths",
            "rounding": "rounding", "call": "call"}.get(kind, kind)


def symptom(r: CheckResult) -> str:
    if r.status is Status.ERROR:
        return "raised"
    a, e = r.actual, r.expected
    if a is None or e is None:
        return "value"
    if not math.isfinite(a):
        return "nonfinite"
    if a == 0 and e != 0:
        return "zero"
    if a * e < 0:
        return "sign"
    return "value"


def _collect(op: Op, point: Point, dtype: str, order: int) -> dict[str, Any]:
    seed = seed_of("triage", op.name, point.name, dtype)
    ev: dict[str, Any] = {"fd": evidence.fd_evidence(op, point.arrays, seed, order)}
    mp = evidence.mpmath_evidence(op, point.arrays, order, seed=seed)
    if mp:
        ev["mpmath"] = mp
    if order == 1:
        for key, value in (("reference", evidence.reference_evidence(op, point.arrays, seed)),
                           ("engines", evidence.engines_evidence(op, point.arrays, seed))):
            if value:
                ev[key] = value
    if op.upstream_skips:
        ev["upstream_skips"] = list(op.upstream_skips)
    eng = ev.get("engines", {})
    fd = ev["fd"]
    if "vjp" in eng and "ad" in fd:
        eng["vs_ad"] = relative(eng["vjp"], fd["ad"])
        eng["vs_fd"] = relative(eng["vjp"], fd["fd_pow2"])
    return ev


def _oracle(r: CheckResult) -> str:
    """Which oracle judged ``r``: ``check`` (gradcheck.check) or a resolution check."""
    return str((r.sweep is not None and r.sweep.oracle) or r.details.get("sweep_oracle")
               or "check")


def _component(r: CheckResult) -> float | None:
    """The discrepancy of a finding about one output component ``(J u)_k`` (the ``scaled``
    check's), which a projected source (``<v, J u>``, a sum over every component) sees only
    where it is above that source's resolution; ``None`` for the other findings."""
    if _oracle(r) != "scaled" or r.discrepancy is None or not math.isfinite(r.discrepancy):
        return None
    return r.discrepancy


def _sees(component: float | None, resolution: float) -> bool:
    """Whether a source that resolves its compared value to ``resolution`` (absolute) could
    have seen a component discrepancy of ``component`` (always, for other findings): a
    projection weighs one component by an O(1) random factor, so a discrepancy below what the
    source resolves moves it by nothing it can tell from rounding.  torch's ``nextafter`` at a
    tie gives 0 for a component of 1.8e-111 beside others of 1e-16: the projected FD agreeing
    with reverse mode to 1e-12 says nothing about it."""
    return component is None or not component < resolution


def _resolution_votes(r: CheckResult, siblings: Sequence[CheckResult]) -> list[bool]:
    """The verdicts of the *other* oracles on the same reverse mode at the same point (a
    passed check of ``vjp`` by another oracle says it is right, a failed one wrong).  A passed
    check votes only where its allowance is below the component discrepancy of ``r``
    (:func:`_sees`): a projected check that allows 1e-20 passes a wrong component of 1e-111."""
    base = _BASE.get(r.kind)
    mine = _oracle(r)
    component = _component(r)
    # a check fails every non-finite value it judges, so one that passed did not judge the
    # nan or inf this finding is about (hypot at 1.6e308: the scaled check passed the finite
    # components and never saw the nan)
    seen = r.actual is None or math.isfinite(r.actual)
    votes = []
    for s in siblings:
        if s.kind != base or s.order != r.order or s is r or _oracle(s) == mine:
            continue
        if s.status is Status.PASSED and seen and _sees(component, s.allowed or 0.0):
            votes.append(True)
        elif s.status is Status.FAILED and s.dtype == "float64":
            votes.append(False)
    return votes


def _agrees(ev: dict[str, Any], extra: Sequence[bool] = (),
            component: float | None = None) -> bool | None:
    """Whether the independent evidence says the backend's float64 reverse mode is right
    (True), wrong (False), or cannot tell (None, also where the evidence contradicts itself);
    ``extra`` are the other oracles' votes (:func:`_resolution_votes`).  For a finding about
    one output component (``component``: its discrepancy, :func:`_component`) the projected
    sources (FD, reference, engines) vote only where they resolve it (:func:`_sees`); the
    element-level mpmath evidence always does."""
    votes: list[bool] = list(extra)
    fd = ev.get("fd", {})
    mp = ev.get("mpmath", {})
    if mp.get("unjudged_nonfinite") and mp.get("max_relative_error", 1.0) <= AGREE:
        # right where it judged, but the backend gave nan/inf where mpmath could not judge
        # (lgamma' at a subnormal, whose true value overflows): no word on those
        mp = {}
    decided = mp.get("forward_matches") and "max_relative_error" in mp
    if fd.get("one_sided_gap", 0.0) > KINK or fd.get("linearity_gap", 0.0) > KINK:
        # a kink, tie or jump on the direction, or directional derivatives that no gradient
        # fits (ties of median, sort, max): no derivative to be right about; unless mpmath,
        # element by element, finds the backend right everywhere (the projected steps
        # crossed a pole next to an element: log1p at -1 + 1e-6)
        if not (decided and mp["max_relative_error"] <= AGREE):
            return None
    if decided:
        # element by element against an exact reference that is the op itself (its forward
        # matches): it sees a wrong element the projected sources cannot (expm1' at -100,
        # 3.7e-44 beside O(1) ones), so it decides
        return bool(mp["max_relative_error"] <= AGREE)
    if fd.get("fd_families_agree") and math.isfinite(fd.get("ad_vs_fd", math.nan)):
        # a staircase: the coarse steps see its mean slope, a tiny step the local one (= AD)
        staircase = fd["ad_vs_fd"] > STAIRS and fd.get("ad_vs_fine", 1.0) <= FINE
        if not staircase and (fd["ad_vs_fd"] > AGREE or _sees(component, AGREE * _size(fd))):
            votes.append(fd["ad_vs_fd"] <= AGREE)
    elif fd.get("fd_families_agree"):  # the AD value is not finite where FD converged
        votes.append(False)
    if "max_relative_error" in mp:
        votes.append(mp["max_relative_error"] <= AGREE)
    ref = ev.get("reference", {})
    if ref.get("fd_families_agree") and ref.get("ad_vs_reference_fd") is not None and \
            ref.get("forward_max_relative", 1.0) <= AGREE and (
            ref["ad_vs_reference_fd"] > AGREE or _sees(component, AGREE * _size(fd))):
        votes.append(ref["ad_vs_reference_fd"] <= AGREE)
    eng = ev.get("engines", {})
    if "vs_fd" in eng and eng["vs_fd"] <= AGREE and "vs_ad" in eng and (
            eng["vs_ad"] > AGREE or _sees(component, AGREE * _size(fd))):
        votes.append(eng["vs_ad"] <= AGREE)
    if not votes or (any(votes) and not all(votes)):
        return None
    return all(votes)


def _size(fd: dict[str, Any]) -> float:
    """The magnitude of the projected FD evidence's compared value (AD and FD along its
    direction), 0 where it has none."""
    vals = [abs(v) for v in (fd.get("ad"), fd.get("fd_pow2"))
            if isinstance(v, float) and math.isfinite(v)]
    return max(vals, default=0.0)


#: the reverse-mode result whose correctness the evidence is about, per failing kind
_BASE = {"vjp": "vjp", "jvp": "vjp", "fwd_rev": "vjp", "eager_func": "vjp", "rounding": "vjp",
         "vjp_of_vjp": "vjp_of_vjp", "jvp_of_vjp": "vjp_of_vjp", "jvp_of_jvp": "vjp_of_vjp"}


def _forward_class(r: CheckResult, ev: dict[str, Any], right: bool | None) -> str | None:
    """For a forward-mode finding (``jvp``, ``jvp_of_vjp``, ``jvp_of_jvp``), its class from
    the evidence on that forward path along the evidence's own direction
    (``evidence.FORWARD_KEYS``), ``None`` where it has none.  Where the path gives what
    reverse mode gives there, it is right or wrong as reverse mode is (``right``; unresolved
    where that is unknown: a failure of the forward path alone is then the oracle's, not
    shown to be the path's).  Where it differs from reverse mode, the FD decides where it
    resolved (no kink, no staircase, not a component finding below its resolution).  jax's
    ``log1p`` at ``-1 + 1e-6``: ``gradcheck.check``'s steps cross the pole, and forward over
    forward was blamed beside a passing reverse mode, while both give ``-1e12``, the exact
    value (mpmath)."""
    path = FORWARD_KEYS.get(r.kind)
    fd = ev.get("fd", {})
    value = fd.get(f"ad_{path}")
    if path is None or not isinstance(value, float):
        return None
    ad = fd.get("ad")
    if isinstance(ad, float) and math.isfinite(value) and relative(value, ad) <= AGREE:
        return "unresolved" if right is None else ("false_alarm" if right else "confirmed")
    if not fd.get("fd_families_agree") or fd.get("one_sided_gap", 0.0) > KINK or \
            fd.get("linearity_gap", 0.0) > KINK:
        return None
    gap, fine = fd.get(f"{path}_vs_fd"), fd.get(f"{path}_vs_fine", 1.0)
    if not isinstance(gap, float) or not math.isfinite(gap):
        return "confirmed"  # nan or inf where the FD converged
    if gap > STAIRS and fine <= FINE:
        return None  # a staircase: the coarse steps see its mean slope
    if gap <= AGREE and not _sees(_component(r), AGREE * _size(fd)):
        return None
    return "false_alarm" if gap <= AGREE else "confirmed"


def _rounding_level(r: CheckResult) -> bool:
    """The two compared values agree to :data:`AGREE` relative, or a comparison of two AD
    paths (or dtypes) missed a pure rounding bound by at most :data:`ROUNDING_RATIO`, or
    :func:`gradcheck.check` itself labelled the failure as within the rounding level of its
    comparison's scale (:attr:`CheckResult.rounding_level`, docs/error-model.md section 5b): the
    error model's bound, not a derivative, is in question."""
    a, e = r.actual, r.expected
    if a is None or e is None or not (math.isfinite(a) and math.isfinite(e)):
        return False
    ratio = r.discrepancy_ratio
    return relative(a, e) <= AGREE or r.rounding_level is not None or (
        r.kind in ("fwd_rev", "eager_func") and ratio is not None and math.isfinite(ratio)
        and ratio <= ROUNDING_RATIO)


def classify(r: CheckResult, ev: dict[str, Any], siblings: Sequence[CheckResult]) -> str:
    """The class of failing result ``r`` from the evidence and the other results of the same
    check call (a passing VJP beside a failing JVP says which side is wrong)."""
    if r.status is Status.ERROR or r.kind == "call":
        return "crash"
    if _rounding_level(r):
        return "rounding_level"
    right = _agrees(ev, _resolution_votes(r, siblings), _component(r))
    base = _BASE.get(r.kind)
    if r.kind == base:  # the reverse mode itself was judged wrong by the oracle
        if right is None:
            return "unresolved"
        return "false_alarm" if right else "confirmed"
    forward = _forward_class(r, ev, right)
    if forward is not None:  # the evidence judged the forward-mode path itself
        return forward
    # a passed reverse mode says which side is wrong only where it could see this finding: a
    # check by the same oracle judged the same components; another one, where its allowance
    # is below this component's discrepancy (:func:`_sees`)
    component = _component(r)
    base_passed = any(s.kind == base and s.status is Status.PASSED and (
        _oracle(s) == _oracle(r) or _sees(component, s.allowed or 0.0)) for s in siblings)
    same = [s for s in siblings if s.kind == base and s.status is Status.FAILED
            and s.input_index == r.input_index and s.output_index == r.output_index
            and s.expected == r.expected and s.actual is not None and r.actual is not None
            and relative(s.actual, r.actual) <= AGREE]
    if same and r.kind.startswith("jvp"):  # forward mode gave what reverse mode gave, against
        return classify(same[0], ev, siblings)  # the same oracle value: the same verdict
    if r.kind.startswith("jvp") and _oracle(r) == "check" and any(
            s.kind == base and s.status is Status.FAILED and _oracle(s) == "check"
            and s.expected == r.expected and s.input_index == r.input_index
            and s.output_index == r.output_index and classify(s, ev, siblings) == "false_alarm"
            for s in siblings):
        return "false_alarm"  # judged against the very FD value shown wrong for reverse mode
    if r.kind == "rounding":
        if right is False:
            return "confirmed"
        return "low_precision" if (right or base_passed) else "unresolved"
    # another mode or path disagrees: wrong when the reverse mode is shown right
    return "confirmed" if (right or (right is None and base_passed)) else "unresolved"


def about_order(r: CheckResult, order: int) -> int:
    """The derivative order a result of a call at ``order`` is about: a resolution check's is
    the call's; of :func:`gradcheck.check`'s, the second-order kinds are about order 2 and the
    others (``vjp``, ``jvp``, ``fwd_rev``, ``eager_func``: it checks order 1 too) about order
    1 (judged with order-2 evidence, jax's ``unique``, whose gradient is 0, looked right: its
    second derivative is 0 as well)."""
    if _oracle(r) != "check":
        return order
    return 2 if r.kind in SECOND_ORDER_KINDS else 1


def triage(op: Op, point: Point, dtype: str, order: int,
           results: Sequence[CheckResult]) -> list[CheckResult]:
    """``results`` with :attr:`CheckResult.triage` on each that failed or errored, each with the
    evidence of the derivative order it is about (:func:`about_order`)."""
    evs: dict[int, dict[str, Any]] = {}
    out = []
    for r in results:
        if r.ok or r.known:
            out.append(r)
            continue
        k = about_order(r, order)
        if k not in evs:
            evs[k] = _collect(op, point, dtype, k)
        ev = evs[k]
        cls = classify(r, ev, results)
        key = "|".join((op.backend, op.name, kind_family(r.kind), cls, symptom(r)))
        script = reproducer.script(op, point, dtype, k, r)
        r = dataclasses.replace(r, triage=Triage(cls, symptom(r), key, ev, script),
                                reproducer=script)
        out.append(overruled(r, results) if cls == "false_alarm" else r)
    return out


def overruled(r: CheckResult, siblings: Sequence[CheckResult]) -> CheckResult:
    """A failed verdict of ``gradcheck.check`` that the sweep's own resolution checks overrule:
    the triage's evidence says the derivative is right and a resolution check of the same
    reverse mode passed at the same point.  Its status becomes ``inconclusive`` (the sweep
    does not fail on it), ``r.sweep.overruled`` says why, and it stays a
    ``false_alarm`` finding (counted as one of the oracle's)."""
    if _oracle(r) != "check" or r.status is not Status.FAILED or True not in [
            v for s in siblings if _oracle(s) != "check" for v in _resolution_votes(r, [s])]:
        return r
    sweep = dataclasses.replace(r.sweep or SweepInfo(), overruled="the sweep's resolution "
                                "checks (per-element scaled FD, mpmath) passed the same "
                                "derivative here and the triage's evidence agrees")
    return dataclasses.replace(r, status=Status.INCONCLUSIVE, sweep=sweep,
                               message="overruled by the sweep (false alarm of "
                               "gradcheck.check's oracle at this point): " + r.message)


def untriaged(op: Op, results: Sequence[CheckResult], why: str) -> list[CheckResult]:
    """``results`` with the failed ones marked ``unresolved`` (``crash`` for errors) without
    evidence: the triage could not run (``why``)."""
    out = []
    for r in results:
        if r.ok or r.known:
            out.append(r)
            continue
        cls = "crash" if r.status is Status.ERROR or r.kind == "call" else "unresolved"
        key = "|".join((op.backend, op.name, kind_family(r.kind), cls, symptom(r)))
        out.append(dataclasses.replace(r, triage=Triage(cls, symptom(r), key, {"error": why})))
    return out


@dataclass(frozen=True)
class Finding:
    """One de-duplicated finding: every result sharing its key, the worst one's evidence."""

    key: str
    backend: str
    op: str
    kind_family: str
    cls: str
    symptom: str
    count: int
    dtypes: tuple[str, ...]
    points: tuple[str, ...]
    worst: CheckResult

    @property
    def known_upstream(self) -> bool:
        """The backend's own suite skips or xfails a gradient test of this op."""
        return bool(self.evidence.get("upstream_skips"))

    @property
    def evidence(self) -> dict[str, Any]:
        t = self.worst.triage
        return {} if t is None or t.evidence is None else t.evidence

    @property
    def reproducer(self) -> str:
        return "" if self.worst.triage is None else self.worst.triage.reproducer


def findings(checks: Iterable[CheckResult]) -> list[Finding]:
    """The triaged results grouped by key, most severe class first, then by count (classified
    by the current rules from the stored evidence: :func:`reclassified`)."""
    groups: dict[str, list[CheckResult]] = {}
    for r in reclassified(list(checks)):
        if r.triage is not None and r.triage.key is not None and not r.known:
            groups.setdefault(r.triage.key, []).append(r)
    out = []
    for key, rs in groups.items():
        backend, op, family, cls, sym = (key.split("|") + [""] * 5)[:5]
        worst = max(rs, key=lambda r: (r.discrepancy_ratio or 0.0)
                    if r.discrepancy_ratio is not None and math.isfinite(r.discrepancy_ratio)
                    else math.inf)
        out.append(Finding(key, backend, op, family, cls, sym, len(rs),
                           tuple(sorted({r.dtype for r in rs})),
                           tuple(sorted({str((r.sweep.point or "") if r.sweep else "")
                                         for r in rs})), worst))
    rank = {c: k for k, c in enumerate(CLASSES)}
    return sorted(out, key=lambda f: (rank.get(f.cls, len(rank)), f.backend, f.op, f.key))


def _as_judged(r: CheckResult) -> CheckResult:
    """``r`` with the status its oracle gave it: an overruled verdict (:func:`overruled`) is
    stored as ``inconclusive`` but was a failure when it was classified, and the rules that
    look at siblings (a JVP judged against the FD value shown wrong for reverse mode) need
    it as one."""
    if r.sweep is not None and r.sweep.overruled:
        return dataclasses.replace(r, status=Status.FAILED)
    return r


def _known_now(r: CheckResult) -> CheckResult:
    """``r`` marked with the known discrepancy the current ``known.py`` has for it (a stream
    written before the entry was added), as the sweep marks a new result."""
    if r.ok or r.known or r.sweep is None:
        return r
    entry = known.lookup(r.backend, r.name, r.kind, r.dtype, str(r.sweep.point or ""))
    if entry is None:
        return r
    return dataclasses.replace(r, known_as=entry.mark())


def reclassified(checks: Sequence[CheckResult]) -> list[CheckResult]:
    """``checks`` with every triaged result classified again from its stored evidence and the
    other results of its check call (same ``test_id``) by the current rules, and marked with
    the current known discrepancies: a stream written before a rule or an entry changed is
    summarised as a new one would be, without re-running anything."""
    calls: dict[str, list[CheckResult]] = {}
    for r in checks:
        calls.setdefault(r.test_id, []).append(_as_judged(r))
    out = []
    for r in map(_known_now, checks):
        info = r.triage
        if info is None or info.evidence is None:
            out.append(r)
            continue
        cls = classify(_as_judged(r), info.evidence, calls[r.test_id])
        backend, op, family = ((info.key or "").split("|") + ["", "", ""])[:3]
        key = "|".join((backend or r.backend, op or r.name, kind_family(r.kind), cls, symptom(r)))
        out.append(dataclasses.replace(r, triage=dataclasses.replace(info, cls=cls, key=key)))
    return out
