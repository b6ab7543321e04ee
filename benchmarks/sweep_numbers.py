"""The numbers of docs/sweep.md from a sweep's result stream (run by hand):

    gradcheck sweep --backend torch --backend jax --profile quick -j 2 --report-dir out
    python benchmarks/sweep_numbers.py out/results.jsonl [--findings]

Ops swept and left out per backend, points per op, checks by status, findings by class,
check family and oracle (classified from the stored evidence by the current triage rules),
verdicts overruled, known discrepancies matched, how many sit on ops whose own test suite
skips or xfails a gradient test, and the findings list.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict

from _common import setup


def main() -> None:
    setup()
    from gradcheck.stream import read_streams
    from gradcheck.sweep.triage import findings, reclassified

    ap = argparse.ArgumentParser()
    ap.add_argument("streams", nargs="+")
    ap.add_argument("--findings", action="store_true", help="list every finding")
    args = ap.parse_args()
    data = read_streams(args.streams)
    checks = reclassified(data.checks)  # the current rules and known entries
    left = Counter(r.backend for r in checks if "left_out" in r.details.get("sweep", {}))
    swept: dict[str, set[str]] = defaultdict(set)
    points: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for r in checks:
        sw = r.details.get("sweep", {})
        if "point" in sw and "skipped" not in sw:
            swept[r.backend].add(r.name)
            points[r.name].add((r.dtype, sw["point"]))
    for b in sorted(set(swept) | set(left)):
        per_op = [len(points[n]) for n in swept[b]]
        mean = sum(per_op) / len(per_op) if per_op else 0
        print(f"{b}: {len(swept[b])} ops swept, {left[b]} names left out; (dtype, point) "
              f"pairs per op: mean {mean:.1f}, max {max(per_op, default=0)}")
    print("checks:", len(checks), dict(Counter(r.status.value for r in checks)))
    found = findings(checks)
    print("findings:", len(found), dict(Counter(f.cls for f in found)))
    print("  by class and family:", dict(Counter((f.cls, f.kind_family) for f in found)))
    print("  on ops whose own suite skips/xfails a gradient test:",
          dict(Counter(f.cls for f in found if f.known_upstream)))
    print("  ops with a confirmed finding:", len({f.op for f in found if f.cls == "confirmed"}))
    print("  by class and oracle (check = gradcheck.check, else the sweep's resolution checks):",
          dict(Counter((f.cls, _oracle(f.worst)) for f in found)))
    over = [r for r in checks if r.details.get("sweep", {}).get("overruled")]
    print("  gradcheck.check verdicts overruled by the resolution checks (false alarms):",
          len(over), "results on", len({r.name for r in over}), "ops")
    known = [r for r in checks if r.known]
    print("  known discrepancies matched:", dict(Counter(
        r.details.get("known_nature", "bug") for r in known)), "results on",
          len({r.name for r in known}), "ops")
    res = [r for r in checks if _oracle(r) != "check" and "point" in r.details.get("sweep", {})]
    print("  resolution-check results:", dict(Counter((_oracle(r), r.status.value)
                                                       for r in res)))
    if args.findings:
        for f in found:
            print(f"{f.cls:14} {f.op} [{f.kind_family}, {f.symptom}] x{f.count} "
                  f"{','.join(f.dtypes)} @ {','.join(f.points)}"
                  f"{'  (upstream skips)' if f.known_upstream else ''}: "
                  f"{f.worst.message[:120]}")


def _oracle(r) -> str:
    return str(r.details.get("sweep", {}).get("oracle") or "check")


if __name__ == "__main__":
    main()
