"""Measure the ulp error of correct elementwise derivatives in low precision (the bound of the
sweep's ``ulp`` check, ``gradcheck/sweep/resolution.py``, docs/error-model.md section 6):

    python benchmarks/resolution_bounds.py --backend torch --backend jax [--op GLOB ...]

For every elementwise op of the sweep inventories, every dtype below float64 it declares and
the default profile's points in bands where a low-precision rule is expected to hold
(``sample``, ``unit``, ``small``, ``large``, ``near_integer``, ``half_integer``,
``integer``, ``zeros_inside``), orders 1 and 2: the derivative per element in the dtype
(reverse mode, a cotangent of ones; forward mode per input) against the backend's float64
derivative at the same (dtype-rounded) inputs, rounded to the dtype, in ulps of the dtype.
Only points where the op's float64 derivative is shown right count ("correct ops"): the
sweep's ``scaled`` check passes there in float64 (order 1 and, for order 2, order 2).
Prints, per dtype and order, the number of elements, quantiles and the maximum, and the ops
with the largest errors; ``--json FILE`` writes every (op, dtype, band, order, path) maximum.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections import defaultdict

import numpy as np
from _common import setup

BANDS = ("sample", "unit", "small", "large", "near_integer", "half_integer", "integer",
         "zeros_inside")
LOW = ("float32", "float16", "bfloat16")


def main() -> None:
    setup()
    from gradcheck.core.dtypes import numpy_dtype
    from gradcheck.sweep import inventory
    from gradcheck.sweep import resolution as res
    from gradcheck.sweep.inventory import ELEMENTWISE
    from gradcheck.sweep.points import points
    from gradcheck.sweep.runner import _forward

    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", action="append", default=[])
    ap.add_argument("--op", action="append", default=[])
    ap.add_argument("--json")
    ap.add_argument("--band", action="append", default=[],
                    help=f"bands to measure (default {', '.join(BANDS)})")
    ap.add_argument("--dtype", action="append", default=[])
    args = ap.parse_args()
    rows = []
    start = time.perf_counter()
    warnings.simplefilter("ignore")
    for backend in args.backend or ["torch", "jax"]:
        inv = inventory(backend, args.op or None)
        ops = [o for o in inv.ops if o.family == ELEMENTWISE]
        print(f"{backend}: {len(ops)} elementwise ops", flush=True)
        for op in ops:
            modes = ("rev", "fwd") if op.fwd else ("rev",)
            before = len(rows)
            for dtype in [d for d in (args.dtype or LOW) if d in op.dtypes]:
                try:
                    pts, _ = points(op, dtype, "default", _forward(op))
                except Exception:
                    continue
                for p in pts:
                    if p.name not in (args.band or BANDS):
                        continue
                    for order in (1, 2) if op.order2 else (1,):
                        try:
                            with np.errstate(all="ignore"):
                                low_t = numpy_dtype(dtype)
                                xs = [a.astype(low_t).astype(np.float64) for a in p.arrays]
                                right = res.scaled_checks(op, xs, order, 1, ("rev",))[0]
                                if right.status.value != "passed":
                                    continue
                                for r in res.ulp_checks(op, xs, dtype, order, 1, modes):
                                    if r.details.get("max_ulps") is None:
                                        continue
                                    rows.append({"backend": backend, "op": op.name,
                                                 "dtype": dtype, "band": p.name,
                                                 "order": order,
                                                 "path": r.details["path"],
                                                 "max_ulps": r.details["max_ulps"],
                                                 "elements": r.details["components"]})
                        except Exception:
                            continue
            worst = max((r["max_ulps"] for r in rows[before:]), default=None)
            print(f"  {op.name}: {len(rows) - before} maxima, worst {worst}", flush=True)
    print(f"measured in {time.perf_counter() - start:.0f} s")
    _summary(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def _summary(rows: list[dict]) -> None:
    by: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for r in rows:
        by[(r["dtype"], r["order"])].append(r)
    qs = (0.5, 0.9, 0.99, 0.999)
    for (dtype, order), rs in sorted(by.items()):
        v = np.array([r["max_ulps"] for r in rs])
        fin = v[np.isfinite(v)]
        quant = ", ".join(f"q{q:g} {np.quantile(fin, q):.3g}" for q in qs) if fin.size else ""
        ops = len({r["op"] for r in rs})
        print(f"{dtype} order {order}: {len(rs)} (op, band, path) maxima on {ops} ops; "
              f"{quant}; max {v.max():.3g}; above 4: {int((v > 4).sum())}, above 16: "
              f"{int((v > 16).sum())}")
        for r in sorted(rs, key=lambda r: -r["max_ulps"])[:8]:
            print(f"    {r['max_ulps']:10.3g}  {r['op']} {r['band']} {r['path']}")


if __name__ == "__main__":
    main()
