"""The fast screen (``gradcheck.check(fast=True)``) against the full check over the op catalog.

    python benchmarks/fast_screen.py                          # numpy, torch, jax; float64
    python benchmarks/fast_screen.py --backends torch --ops sin,matmul --delta 1e-7

For every catalog op, backend and point (the seeded random sample and every special point the
oracle can judge), float64, the same probes and seed as the suites, after one warm-up run
of the full check (compiles and caches): the full check's VJP/JVP verdicts and the fast
run's (screen, escalating to the full check where it cannot pass).  Printed: how often the
screen passed on its own, why it escalated, the total time of both, and every case where the
two verdicts differ.  The screen only passes, so a difference can only be a check the full
run fails and the screen passes: a discrepancy below the screen's floor.

``--delta D`` also runs each case's (1 + D) mutant (the backend's VJP scaled, as the
harness's mutant tests do) through both and counts what each caught.
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np

from gradcheck.backends.registry import get_backend
from gradcheck.harness.runner import RANDOM, Case, case_inputs
from gradcheck.numeric import CheckConfig, run_numeric_checks
from gradcheck.ops import catalog

_KINDS = ("vjp", "jvp")


class _Scaled:
    """A backend whose VJPs are scaled by ``1 + delta`` (every other call delegated)."""

    def __init__(self, be, delta: float):
        self._be, self._d = be, delta

    def __getattr__(self, name):
        return getattr(self._be, name)

    def vjp(self, *a, **k):
        return [np.asarray(g) * (1 + self._d) for g in self._be.vjp(*a, **k)]

    def vjp_batch(self, *a, **k):
        return [np.asarray(g) * (1 + self._d) for g in self._be.vjp_batch(*a, **k)]


_CATEGORIES = (("error estimate", "FD error estimate above the screen's floor"),
               ("kink", "suspected kink"), ("not finite", "non-finite FD estimate"),
               ("raised", "an adapter or the function raised"),
               ("covers float64", "not a float64 rule check"), ("ratio", "disagreement"))


def _category(why: str) -> str:
    return next((label for key, label in _CATEGORIES if key in why), why or "no VJP/JVP result")


def _verdicts(results) -> dict[tuple, str]:
    return {(r.kind, r.output_index, r.input_index): r.status.value for r in results
            if r.kind in _KINDS}


def _run(be, case: Case, fn, inputs, fast: bool, modes=("rev", "fwd")):
    spec = catalog.get_spec(case.op)
    cfg = CheckConfig(modes=modes, seed=case.seed, probes=3, name=case.op,
                      only_inputs=spec.diff_args, fast=fast, localize=False)
    t = time.process_time()
    res = run_numeric_checks(be, fn, list(inputs), device="cpu", dtype="float64", config=cfg)
    return res, time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="numpy,torch,jax")
    ap.add_argument("--ops", default="", help="comma-separated op names (default: all)")
    ap.add_argument("--delta", type=float, default=0.0)
    args = ap.parse_args()
    ops = [o for o in args.ops.split(",") if o] or list(catalog.names())
    reasons: collections.Counter[str] = collections.Counter()
    totals = collections.Counter()
    caught = collections.Counter()
    diffs = []
    for bname in args.backends.split(","):
        be = get_backend(bname)
        for op in ops:
            spec = catalog.get_spec(op)
            fn = be.op(op)
            if fn is None or "float64" not in spec.dtypes:
                continue
            points = [RANDOM] + [sp.name for sp in spec.special if sp.fd]
            for point in points:
                case = Case(bname, "cpu", "float64", op, point)
                inputs = case_inputs(case)
                _run(be, case, fn, inputs, False)  # warm-up: compiles, caches
                fast, t_fast = _run(be, case, fn, inputs, True)
                full, t_full = _run(be, case, fn, inputs, False)
                totals["cases"] += 1
                totals["t_full"] += t_full
                totals["t_fast"] += t_fast
                totals[f"t_full {bname}"] += t_full
                totals[f"t_fast {bname}"] += t_fast
                screens = {r.details.get("fast_screen") for r in fast if r.kind in _KINDS}
                if screens == {"passed"}:
                    totals["screen passed"] += 1
                else:
                    why = next((s for s in screens if s and s.startswith("escalated")), "")
                    reasons[_category(why)] += 1
                vf, vq = _verdicts(full), _verdicts(fast)
                if vf != vq:
                    diffs.append((case.id, vf, vq, [r.message for r in full
                                                    if r.kind in _KINDS and
                                                    r.status.value != "passed"][:2]))
                if args.delta:
                    mut = _Scaled(be, args.delta)
                    for label, fast_flag in (("full", False), ("fast", True)):
                        res, _ = _run(mut, case, fn, inputs, fast_flag, modes=("rev",))
                        if any(r.kind == "vjp" and r.status.value == "failed" for r in res):
                            caught[label] += 1
                    caught["mutants"] += 1
    print(f"cases: {totals['cases']}; the screen passed on its own in "
          f"{totals['screen passed']} ({totals['screen passed'] / max(totals['cases'], 1):.1%})")
    print(f"process CPU time: full {totals['t_full']:.1f} s, fast {totals['t_fast']:.1f} s "
          f"(ratio {totals['t_fast'] / max(totals['t_full'], 1e-9):.2f})")
    for bname in args.backends.split(","):
        print(f"  {bname}: full {totals[f't_full {bname}']:.1f} s, fast "
              f"{totals[f't_fast {bname}']:.1f} s")
    print("escalations by reason:")
    for why, k in reasons.most_common():
        print(f"  {k:5d}  {why}")
    print(f"verdicts that differ (full vs fast): {len(diffs)}")
    for d in diffs:
        print("  ", d)
    if args.delta:
        print(f"(1 + {args.delta:g}) mutants of the reverse mode: {caught['mutants']}; caught by "
              f"the full check {caught['full']}, by the fast run {caught['fast']}")


if __name__ == "__main__":
    main()
