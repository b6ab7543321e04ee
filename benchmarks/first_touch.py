"""What a page costs the first time a process touches it, against touching it again after a free
(``docs/cost-model.md``, "Where the time goes at 1e7").

    python benchmarks/first_touch.py            # 80 MB arrays (1e7 float64), 12 of them
    python benchmarks/first_touch.py --mb 8     # 1e6 float64

A fresh process fills ``--count`` new arrays of ``--mb`` MB each (its resident size grows by
each), frees them, and fills as many again (the allocator returns them to the system and maps
them anew, but the kernel hands back pages this process just released).  CPU time per array
and per MB, both rounds, and their ratio.  On a machine where growing the resident size is
expensive (a virtual machine whose host backs guest pages on first touch), the peak memory a
check adds, not its arithmetic, is much of its time at large ``n``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _fill(count: int, elements: int) -> tuple[float, list[np.ndarray]]:
    start = time.process_time()
    arrays = [np.ones(elements) for _ in range(count)]
    return time.process_time() - start, arrays


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=80.0, help="size of each array, MB")
    ap.add_argument("--count", type=int, default=12, help="arrays per round")
    a = ap.parse_args()
    elements = int(a.mb * 1e6 / 8)
    first, arrays = _fill(a.count, elements)
    del arrays
    again, arrays = _fill(a.count, elements)
    del arrays
    mb = a.count * elements * 8 / 1e6
    print(f"{a.count} arrays of {elements * 8 / 1e6:.0f} MB ({mb:.0f} MB), CPU time:")
    print(f"  first touch:       {first / a.count * 1e3:8.1f} ms per array, "
          f"{first / mb * 1e3:6.2f} ms per MB")
    print(f"  again after free:  {again / a.count * 1e3:8.1f} ms per array, "
          f"{again / mb * 1e3:6.2f} ms per MB")
    print(f"  ratio:             {first / max(again, 1e-9):8.1f}x")


if __name__ == "__main__":
    main()
