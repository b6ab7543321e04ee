"""What glibc's allocator policy for large blocks costs a check at large n, and what keeping
freed blocks in the heap would buy, against torch's fast mode under each policy
(``docs/performance.md``, "Large arrays and the allocator").

    python benchmarks/allocator.py                   # n = 1e7, the passing check
    python benchmarks/allocator.py --sizes 1e6 1e7 --reps 2 --cases "gradcheck pass" \\
        "torch fast pass" "gradcheck borderline" "gradcheck tan pass"

glibc serves a block above its mmap threshold (128 KiB at first, raised as the process frees
such blocks, up to 32 MiB) with a fresh mapping and unmaps it when it is freed: every array
above 32 MiB (4.2e6 float64) is page-faulted afresh each time one is made, by NumPy and by
torch alike (``benchmarks/first_touch.py`` measures what a first touch costs).  The policy
``MALLOC_MMAP_THRESHOLD_=1073741824`` (read by glibc when a process starts) serves such
blocks from the heap instead and reuses them once freed.  Each case runs in a fresh process
(``benchmarks/cost_vs_torch_fast.py --child``) under the default policy and under that one;
printed: CPU seconds and peak memory of one warm call under each, and their ratios.
Nothing in gradcheck sets the policy: a process that sets it trades memory for time, the
figures say how much.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cost_vs_torch_fast as cost  # noqa: E402  (its --child runs each case)

HEAP: dict[str, str | None] = {"MALLOC_MMAP_THRESHOLD_": str(2**30)}
#: each policy's overrides of the child's environment (the default: the heap's variables unset)
POLICIES: dict[str, dict[str, str | None]] = {"default": {key: None for key in HEAP},
                                              "heap": HEAP}


def _versus(what: str, mine: dict | None, ref: dict | None) -> str | None:
    """``mine`` against ``ref`` in time and memory, one line (None where either is missing)."""
    if not mine or not ref or "error" in mine or "error" in ref:
        return None
    return (f"{what}: {mine['cpu'] / ref['cpu']:.2f}x time, "
            f"{mine['peak_gb'] / ref['peak_gb']:.2f}x memory")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e7])
    ap.add_argument("--reps", type=int, default=1, help="processes per case and policy")
    ap.add_argument("--cases", nargs="+", default=["gradcheck pass", "torch fast pass"],
                    help="cases of benchmarks/cost_vs_torch_fast.py")
    a = ap.parse_args()
    print(f"each case a fresh process, fastest of {a.reps}; load average "
          f"{os.getloadavg()[0]:.1f}; heap policy: "
          + " ".join(f"{k}={v}" for k, v in HEAP.items()))
    print(f"{'n':>9s} {'case':21s} {'cpu s':>8s} {'heap':>8s} {'ratio':>6s} "
          f"{'peak GB':>8s} {'heap':>8s} {'ratio':>6s}")
    for n in (int(s) for s in a.sizes):
        runs: dict[tuple[str, str], list[dict]] = {}
        for _ in range(a.reps):
            for case in a.cases:  # interleaved: each policy sees the same load
                for name, extra in POLICIES.items():
                    runs.setdefault((case, name), []).append(
                        cost._measure(case, n, env=extra))
        got = {key: cost._best(r) for key, r in runs.items()}
        for case in a.cases:
            d, h = got[(case, "default")], got[(case, "heap")]
            if "error" in d or "error" in h:
                print(f"{n:9d} {case:21s} error: {d.get('error') or h.get('error')}")
                continue
            print(f"{n:9d} {case:21s} {d['cpu']:8.3g} {h['cpu']:8.3g} "
                  f"{h['cpu'] / d['cpu']:6.2f} {d['peak_gb']:8.2f} {h['peak_gb']:8.2f} "
                  f"{h['peak_gb'] / d['peak_gb']:6.2f}")
        ref = {name: got.get(("torch fast pass", name)) for name in POLICIES}
        mine = {name: got.get(("gradcheck pass", name)) for name in POLICIES}
        lines = [_versus(f"passing check / torch fast mode, {name} policy", mine[name],
                         ref[name]) for name in POLICIES]
        lines.append(_versus("passing check under the heap policy / torch fast mode under "
                             "the default", mine["heap"], ref["default"]))
        for line in lines:
            if line is not None:
                print(f"{n:9d} {line}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
