"""How fast a 20,000-check report is written, read, rendered and loaded in headless Chromium.

    python benchmarks/report_load.py [--checks 20000] [--repeats 5]

Test data: real ``gradcheck.check`` results (NumPy hand-derived rules including mutants, plus
torch and jax functions when installed), replicated with varied op names and seeds to the
requested count (~300 ops, about 10% not passing, as a catalog run would produce).

Printed: stream write/read time, Python render time, HTML size; in Chromium the load time
(navigation start to the page's ``gradcheck-ready`` mark: JSON parsed, table rendered), as the
median of ``--repeats`` loads, next to the same measurement for a 100-check report (the anchor:
what any report costs to open), and the time of a status filter and of a sort over all rows.
Target: the 20,000-check report loads in under 2 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gradcheck  # noqa: E402
from gradcheck import stream  # noqa: E402
from gradcheck.report import write_report  # noqa: E402
from tests.support.chromium import Browser, find_chromium  # noqa: E402
from tests.support.report_data import numpy_results  # noqa: E402


def base_results() -> list:
    results = numpy_results()
    x = np.random.default_rng(0).normal(size=(3, 4))
    with stream.suspended():
        try:
            import torch

            results += gradcheck.check(torch.tanh, x, backend="torch", order=2).results
            results += gradcheck.check(torch.sin, x, backend="torch", dtype="float32").results
        except ImportError:
            pass
        try:
            import jax.numpy as jnp

            results += gradcheck.check(jnp.tanh, x, backend="jax").results
            results += gradcheck.check(jnp.cos, x, backend="jax", dtype="float32").results
        except ImportError:
            pass
    return results


def synthetic(n: int) -> list:
    base = base_results()
    return [replace(base[k % len(base)], name=f"{base[k % len(base)].name}_{(k // len(base)) % 30}",
                    seed=k, test_id=f"suites/test_ops.py::test_op[{k}]") for k in range(n)]


def load_ms(b: Browser, url: str, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        b.navigate("about:blank")
        b.navigate(url)
        b.wait_for("document.documentElement.dataset.ready")
        out.append(b.evaluate("performance.getEntriesByName('gradcheck-ready')[0].startTime"))
    return out


def interaction_ms(b: Browser) -> tuple[float, float]:
    filt = b.evaluate("(() => { const t = performance.now(); const s = "
                      "document.getElementById('f-status'); s.value = 'failed';"
                      "s.dispatchEvent(new Event('change')); s.value = '';"
                      "s.dispatchEvent(new Event('change')); return (performance.now() - t) / 2;"
                      "})()")
    sort = b.evaluate("(() => { const t = performance.now(); document.querySelector("
                      "'th[data-sort=ratio]').click(); return performance.now() - t; })()")
    return filt, sort


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checks", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    results = synthetic(args.checks)
    tmp = Path(tempfile.mkdtemp(prefix="gc-bench-"))
    path = tmp / "big" / "results.jsonl"
    t = time.perf_counter()
    with stream.using(path) as s:
        for r in results:
            s.record(r)
    t_write = time.perf_counter() - t
    t = time.perf_counter()
    data = stream.read_streams([path])
    t_read = time.perf_counter() - t
    t = time.perf_counter()
    big = write_report(data, tmp / "big").html
    t_render = time.perf_counter() - t
    small = write_report(stream.StreamData(checks=data.checks[:100]), tmp / "small").html
    counts = data.counts()
    print(f"checks: {len(data.checks)} ({', '.join(f'{v} {k}' for k, v in counts.items() if v)})")
    print(f"stream write: {t_write:.2f} s ({t_write / len(results) * 1e6:.0f} us/result), "
          f"read: {t_read:.2f} s, render html+junit: {t_render:.2f} s, "
          f"index.html: {big.stat().st_size / 1e6:.1f} MB")
    chromium = find_chromium()
    if chromium is None:
        print("chromium not installed: browser timings skipped")
        return
    with Browser(chromium) as b:
        anchor = load_ms(b, small.as_uri(), args.repeats)
        loads = load_ms(b, big.as_uri(), args.repeats)
        filt, sort = interaction_ms(b)
    med, med0 = statistics.median(loads), statistics.median(anchor)
    print(f"chromium load, 100 checks (anchor): median {med0:.0f} ms")
    print(f"chromium load, {len(results)} checks: median {med:.0f} ms "
          f"(min {min(loads):.0f}, max {max(loads):.0f}; {med / med0:.1f}x the anchor); "
          f"target < 2000 ms: {'met' if med < 2000 else 'NOT met'}")
    print(f"status filter over all rows: {filt:.0f} ms; sort by ratio: {sort:.0f} ms")


if __name__ == "__main__":
    main()
