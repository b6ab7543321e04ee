"""What a page costs the first time a process touches it, with and without NumPy's
transparent-huge-page hint, against touching it again after a free (``docs/cost-model.md``,
"Where the time goes at 1e7"; ``gradcheck/numeric/pages.py``).

    python benchmarks/first_touch.py            # 80 MB arrays (1e7 float64), 12 of them
    python benchmarks/first_touch.py --mb 8     # 1e6 float64

Each mode is a fresh process (NumPy's default, which asks for huge pages on arrays of 4 MB
or more, and ``NUMPY_MADVISE_HUGEPAGE=0``): it fills ``--count`` new arrays of ``--mb`` MB
(its resident size grows by each), frees them, and fills as many again (the kernel hands back
pages this process just released).  CPU time per array and per MB, and the ratios.  Where the
kernel's ``transparent_hugepage/defrag`` stalls a hinted fault for compaction, the first
touch with the hint costs several times the first touch without it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def _fill(count: int, elements: int) -> tuple[float, list[np.ndarray]]:
    start = time.process_time()
    arrays = [np.ones(elements) for _ in range(count)]
    return time.process_time() - start, arrays


def child(count: int, elements: int) -> None:
    first, arrays = _fill(count, elements)
    del arrays
    again, arrays = _fill(count, elements)
    del arrays
    print(json.dumps({"first": first, "again": again}))


def _thp() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/defrag") as fh:
            return fh.read().strip()
    except OSError:
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=80.0, help="size of each array, MB")
    ap.add_argument("--count", type=int, default=12, help="arrays per round")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    elements = int(a.mb * 1e6 / 8)
    if a.child:
        child(a.count, elements)
        return
    mb = a.count * elements * 8 / 1e6
    print(f"{a.count} arrays of {elements * 8 / 1e6:.0f} MB ({mb:.0f} MB) per round, CPU time; "
          f"transparent_hugepage/defrag: {_thp()}")
    got = {}
    for mode, hint in (("NumPy's huge-page hint (default)", "1"), ("without the hint", "0")):
        env = {**os.environ, "NUMPY_MADVISE_HUGEPAGE": hint}
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--mb",
                              str(a.mb), "--count", str(a.count)], env=env, check=True,
                             capture_output=True, text=True)
        got[hint] = r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"  {mode}:")
        print(f"    first touch:      {r['first'] / a.count * 1e3:8.1f} ms per array, "
              f"{r['first'] / mb * 1e3:6.2f} ms per MB")
        print(f"    again after free: {r['again'] / a.count * 1e3:8.1f} ms per array, "
              f"{r['again'] / mb * 1e3:6.2f} ms per MB")
    print(f"  first touch, hint / without: {got['1']['first'] / max(got['0']['first'], 1e-9):.1f}x")


if __name__ == "__main__":
    main()
