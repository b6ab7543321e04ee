"""What one sweep discovered that another did not (run by hand), e.g. a commit before a change
of the verdict or the oracles against the branch head, on the same selection and seeds:

    OPS=$(python benchmarks/sweep_discovery_diff.py --selection)  # the subset measured
    eval gradcheck sweep --backend torch --backend jax $OPS -j 1 --report-dir /tmp/old  # old tree
    eval gradcheck sweep --backend torch --backend jax $OPS -j 1 --report-dir /tmp/new  # new tree
    python benchmarks/sweep_discovery_diff.py /tmp/old/results.jsonl /tmp/new/results.jsonl

A *discovery* is a sweep result that did not pass: failed or errored (a known discrepancy's
match counts, as class ``known``), or a ``gradcheck.check`` verdict the sweep overruled (class
``false_alarm``).  Each stream's results are read as that sweep stored them (its own triage
classes and known marks, not reclassified by the current rules), so the diff shows what each
version reported.  Three levels are compared, each as discovered in both, lost (old only) and
new (new only):

- ops: an op with at least one ``confirmed`` or ``known`` discovery (what the sweep reports as
  a bug), and an op with any discovery;
- findings: (backend, op, check family, class, symptom), the sweep's de-duplication key;
- results: (backend, op, dtype, point, order, check kind, oracle), one per check.

``--list`` prints every lost and new finding and result with the message of its worst
result.  Time: the sum of the results' durations per backend (the sweep's wall time is not in
the stream: time the runs, e.g. with /usr/bin/time).
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from _common import setup

#: the classes that report a bug (the others are questions or the oracle's error)
BUG_CLASSES = ("confirmed", "known")

#: the subset of docs/sweep.md ("Discovery before and after the shared resolution checks"): the
#: ops with a finding (known.py, docs/upstream, the false alarms of the last complete sweep) ...
WITH_FINDINGS = (
    'torch.linalg.det', 'torch.addcdiv', 'torch.asinh', 'torch.acosh', 'torch.expm1',
    'torch.cholesky_inverse', 'torch.nn.functional.hardsigmoid', 'torch.linalg.cholesky_ex',
    'torch.nextafter', 'torch.pow', 'torch.atan2', 'torch.polygamma.polygamma_n_1',
    'torch.digamma', 'torch.special.erfcx', 'torch.linalg.vector_norm',
    'torch.nn.functional.gelu', 'torch.special.ndtr', 'torch.sinc',
    'torch.nn.functional.logsigmoid', 'torch.logaddexp', 'torch.cumprod', 'torch.masked.cumprod',
    'torch.scatter_reduce.amax', 'torch.scatter_reduce.amin', 'torch.polar',
    'torch.nn.functional.max_unpool1d', 'torch.as_strided_scatter', 'torch.normal',
    'torch.bernoulli', 'torch.lgamma', 'torch.tan', 'torch.log1p', 'jax.numpy.asinh',
    'jax.numpy.arcsinh', 'jax.lax.asinh', 'jax.numpy.sinc', 'jax.numpy.expm1', 'jax.lax.expm1',
    'jax.nn.elu', 'jax.nn.selu', 'jax.scipy.special.spence', 'jax.numpy.hypot',
    'jax.numpy.arctan2', 'jax.lax.atan2', 'jax.scipy.special.log_ndtr', 'jax.numpy.linalg.norm',
    'jax.scipy.special.i0', 'jax.scipy.special.i1', 'jax.lax.cumlogsumexp', 'jax.numpy.cumprod',
    'jax.lax.cumprod', 'jax.scipy.special.gammaln', 'jax.numpy.log1p', 'jax.nn.silu',
    'jax.numpy.tan',
)
#: ... and ops without one, drawn with random.Random(35), 8 per backend
WITHOUT_FINDINGS = (
    'torch.fmax', 'torch.gradient', 'torch.index_reduce.prod', 'torch.linalg.pinv.singular',
    'torch.nn.functional.avg_pool2d', 'torch.nn.functional.huber_loss',
    'torch.nn.functional.multilabel_margin_loss', 'torch.nn.functional.poisson_nll_loss',
    'jax.lax.sin', 'jax.nn.mish', 'jax.numpy.copysign', 'jax.numpy.dot', 'jax.numpy.select',
    'jax.numpy.std', 'jax.numpy.trapezoid', 'jax.scipy.special.dawsn',
)


@dataclass(frozen=True)
class Discovery:
    """One result that did not pass, keyed at the three levels of the diff."""

    backend: str
    op: str
    dtype: str
    point: str
    order: int
    kind: str
    oracle: str
    family: str
    cls: str
    symptom: str
    message: str

    @property
    def finding(self) -> tuple[str, str, str, str, str]:
        return (self.backend, self.op, self.family, self.cls, self.symptom)

    @property
    def result(self) -> tuple[str, str, str, str, int, str, str]:
        return (self.backend, self.op, self.dtype, self.point, self.order, self.kind,
                self.oracle)


def discoveries(checks: Iterable[Any]) -> list[Discovery]:
    """The results of a sweep stream that did not pass, as the sweep stored them."""
    from gradcheck.core.results import Status
    from gradcheck.sweep.triage import kind_family

    out = []
    for r in checks:
        sw = r.sweep
        if sw is None or sw.point is None or sw.skipped or sw.left_out:
            continue
        failed = r.status in (Status.FAILED, Status.ERROR)
        if not (failed or sw.overruled):
            continue
        kind = r.kind.value if hasattr(r.kind, "value") else str(r.kind)
        if r.known:
            cls, symptom = "known", ""
        elif sw.overruled:
            cls = "false_alarm"
            symptom = r.triage.symptom if r.triage is not None else ""
        elif r.triage is not None:
            cls, symptom = r.triage.cls, r.triage.symptom
        else:
            cls, symptom = "untriaged", ""
        out.append(Discovery(r.backend, r.name, r.dtype, str(sw.point), int(sw.order or r.order),
                             kind, str(sw.oracle or "check"), kind_family(kind), cls, symptom,
                             r.message))
    return out


def _split(old: set[Any], new: set[Any]) -> tuple[set[Any], set[Any], set[Any]]:
    return old & new, old - new, new - old


def _line(label: str, old: set[Any], new: set[Any]) -> str:
    both, lost, gained = _split(old, new)
    return (f"{label}: old {len(old)}, new {len(new)}; in both {len(both)}, "
            f"lost {len(lost)}, new {len(gained)}")


def summary(name: str, checks: Sequence[Any], found: Sequence[Discovery]) -> None:
    ops: dict[str, set[str]] = defaultdict(set)
    dur: dict[str, float] = defaultdict(float)
    for r in checks:
        if r.sweep is not None and r.sweep.point is not None and not r.sweep.skipped:
            ops[r.backend].add(r.name)
        dur[r.backend] += r.duration_s or 0.0
    print(f"{name}: " + "; ".join(f"{b} {len(ops[b])} ops, results' time {dur[b]:.0f} s"
                                  for b in sorted(ops)))
    print("  results:", len(checks), dict(Counter(r.status.value for r in checks)))
    print("  discoveries by class:", dict(Counter(d.cls for d in found)))
    print("  findings by class:", dict(Counter(f[3] for f in {d.finding for d in found})))


def main() -> None:
    setup()
    from gradcheck.stream import read_streams

    ap = argparse.ArgumentParser()
    ap.add_argument("old", nargs="?", help="the stream of the sweep before the change")
    ap.add_argument("new", nargs="?", help="the stream of the sweep after it")
    ap.add_argument("--selection", action="store_true",
                    help="print the --op arguments of the measured subset and exit")
    ap.add_argument("--list", action="store_true", help="every lost and new finding and result")
    args = ap.parse_args()
    if args.selection:  # exact names: a glob with one bracketed letter matches only itself
        print(" ".join(f"--op '[{n[0]}]{n[1:]}'" for n in WITH_FINDINGS + WITHOUT_FINDINGS))
        return
    if not (args.old and args.new):
        ap.error("give the two streams (or --selection)")
    data = {k: read_streams([p]) for k, p in (("old", args.old), ("new", args.new))}
    found = {k: discoveries(d.checks) for k, d in data.items()}
    for k in ("old", "new"):
        summary(k, data[k].checks, found[k])
        for p in data[k].problems:
            print("  stream problem:", p)
    o, n = found["old"], found["new"]
    swept = {k: {(r.backend, r.name) for r in d.checks if r.sweep is not None
                 and r.sweep.point is not None and not r.sweep.skipped}
             for k, d in data.items()}
    common = swept["old"] & swept["new"]
    print(f"ops swept in both: {len(common)} (old only {len(swept['old'] - common)}, "
          f"new only {len(swept['new'] - common)})")
    print(_line("ops with a bug (confirmed or known)",
                {(d.backend, d.op) for d in o if d.cls in BUG_CLASSES},
                {(d.backend, d.op) for d in n if d.cls in BUG_CLASSES}))
    print(_line("ops with any discovery", {(d.backend, d.op) for d in o},
                {(d.backend, d.op) for d in n}))
    print(_line("bug findings (confirmed or known)",
                {d.finding for d in o if d.cls in BUG_CLASSES},
                {d.finding for d in n if d.cls in BUG_CLASSES}))
    print(_line("findings", {d.finding for d in o}, {d.finding for d in n}))
    print(_line("bug results (confirmed or known)",
                {d.result for d in o if d.cls in BUG_CLASSES},
                {d.result for d in n if d.cls in BUG_CLASSES}))
    print(_line("results", {d.result for d in o}, {d.result for d in n}))
    # the same result, another class: what the change did to a discovery both made
    cls_o = {d.result: d.cls for d in o}
    cls_n = {d.result: d.cls for d in n}
    moved = Counter((cls_o[k], cls_n[k]) for k in cls_o.keys() & cls_n.keys()
                    if cls_o[k] != cls_n[k])
    print("results in both with another class (old -> new):", dict(moved))
    # what the results lost / gained are in the other stream (passed, inconclusive, absent)
    status = {k: {(r.backend, r.name, r.dtype, str(r.sweep.point), int(r.sweep.order or r.order),
                   r.kind.value, str(r.sweep.oracle or "check")): r.status.value
                  for r in d.checks if r.sweep is not None and r.sweep.point is not None}
              for k, d in data.items()}
    _, lost, gained = _split({d.result for d in o}, {d.result for d in n})
    print("lost results are, in new:", dict(Counter(status["new"].get(k, "absent")
                                                    for k in lost)))
    print("new results were, in old:", dict(Counter(status["old"].get(k, "absent")
                                                    for k in gained)))
    print("new results by class:", dict(Counter(cls_n[k] for k in gained)))
    print("lost results by class:", dict(Counter(cls_o[k] for k in lost)))
    if args.list:
        by_o = {d.result: d for d in o}
        by_n = {d.result: d for d in n}
        for title, keys, src in (("LOST", lost, by_o), ("NEW", gained, by_n)):
            print(f"\n{title} results ({len(keys)}):")
            for k in sorted(keys):
                d = src[k]
                other = (status["new"] if title == "LOST" else status["old"]).get(k, "absent")
                print(f"  {d.cls:14} {d.op} {d.dtype} @{d.point} o{d.order} {d.kind} "
                      f"[{d.oracle}] (other run: {other}): {d.message[:160]}")
        fo = {d.finding for d in o}
        fn = {d.finding for d in n}
        for title, keys in (("LOST", fo - fn), ("NEW", fn - fo)):
            print(f"\n{title} findings ({len(keys)}):")
            for f in sorted(keys):
                print("  " + " | ".join(f))


if __name__ == "__main__":
    main()
