"""Wall time and peak memory of the default ``ci`` suite profile, serial and with ``-n 2``.

    python benchmarks/suite_profile.py                 # serial, then -n 2
    python benchmarks/suite_profile.py --workers 0     # serial only
    python benchmarks/suite_profile.py --root /path/to/checkout --profile thorough

Each run is ``python -m pytest suites --gradcheck-profile=<profile> -q -p no:cacheprovider
[-n N]`` in a subprocess, from the checkout root.  Memory is the peak of the summed resident
set size (RSS) of the whole process tree (pytest and its xdist workers), sampled every 50 ms
from /proc (a spike shorter than that can be missed).  Where ``suites/`` is missing, or the
plugin does not know the profile option, the script says so instead of measuring.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _tree_rss(pid: int) -> int:
    """Summed RSS (bytes) of ``pid`` and all its descendants; 0 if it is gone."""
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    break
        except OSError:
            continue
        stack += _children(p)
    return total


def measure(cmd: list[str], cwd: Path) -> tuple[float, int, int, str]:
    """(wall s, peak tree RSS bytes, exit code, output tail)."""
    peak = [0]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = proc.communicate()
    wall = time.perf_counter() - start
    sampler.join()
    tail = "\n".join(output.strip().splitlines()[-3:])
    return wall, peak[0], proc.returncode, tail


def _profile_supported(root: Path) -> bool:
    probe = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
                           cwd=root, capture_output=True, text=True)
    return "--gradcheck-profile" in probe.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="checkout to measure")
    ap.add_argument("--profile", default="ci")
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2],
                    help="0 = serial; N = pytest-xdist -n N")
    args = ap.parse_args()
    root = args.root.resolve()
    if not (root / "suites").is_dir():
        print(f"{root / 'suites'} does not exist on this branch: nothing to measure "
              "(the suites are written on another branch; run this after they are merged)")
        return 0
    if not _profile_supported(root):
        print("the pytest plugin here has no --gradcheck-profile option: nothing to measure")
        return 0
    print(f"suite profile {args.profile!r} in {root} (cpu count {os.cpu_count()})")
    print(f"{'run':10s} {'wall s':>8s} {'peak RSS (tree) MiB':>20s} {'exit':>5s}  result")
    for n in args.workers:
        cmd = [sys.executable, "-m", "pytest", "suites", f"--gradcheck-profile={args.profile}",
               "-q", "-p", "no:cacheprovider"] + (["-n", str(n)] if n else [])
        wall, peak, code, tail = measure(cmd, root)
        label = "serial" if not n else f"-n {n}"
        last = tail.splitlines()[-1] if tail else ""
        print(f"{label:10s} {wall:8.1f} {peak / 2**20:20.0f} {code:5d}  {last}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
