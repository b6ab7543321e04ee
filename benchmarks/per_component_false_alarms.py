"""Count the false alarms the per-component stage of ``check`` adds on correct functions (the
catalog's ops, whose derivatives the suites establish; docs/error-model.md section 4c):

    python benchmarks/per_component_false_alarms.py --backend torch [--dtype float16 ...]
        [--order 2] [--op GLOB ...] [--tiny 1e-17]

Every catalog op the backend implements, in each dtype asked for that the op declares (float16
and bfloat16 where the op declares float32), at its seeded sample point and its special points,
is checked by the numeric pipeline with the stage (the default ``CheckConfig``).  A result of
the stage (``details["per_component"]``) that failed where the op has no known discrepancy for
that check is printed, and the counts of runs, of runs where the stage recorded a result, of
failures it added, and of those that are a kernel of the engine's own table of kernels measured
off (a known mark, ``result.known``: counted, not printed) are printed at the end.
``--tiny S`` moves the points (the sample and the special points) to inputs with a component
tiny against the others: the first element of every input of two or more elements times ``S``
(class c of docs/error-model.md section 4c: the stage's scaled check then runs on every op
whose magnitudes so span ``2^26``).
"""

from __future__ import annotations

import time
import warnings

from _common import catalog_cases, catalog_parser, setup


def main() -> None:
    setup()
    from gradcheck.backends.registry import get_backend
    from gradcheck.core.results import Status
    from gradcheck.harness.runner import case_inputs
    from gradcheck.numeric import CheckConfig, run_numeric_checks

    p = catalog_parser()
    p.add_argument("--tiny", type=float)
    a = p.parse_args()
    dtypes = a.dtype or ["float64", "float32", "float16", "bfloat16"]
    backend = get_backend(a.backend)
    runs = ran = added = engine_known = 0
    began = time.perf_counter()
    warnings.simplefilter("ignore")
    for spec, fn, dtype, case in catalog_cases(a.backend, backend, a.op, dtypes, a.order):
        cfg = CheckConfig(order=a.order, seed=case.seed, probes=3, name=spec.name,
                          test_id=case.id, only_inputs=spec.diff_args)
        try:
            results = run_numeric_checks(backend, fn, tiny(case_inputs(case), a.tiny),
                                         device="cpu",
                                         dtype=dtype, config=cfg)
        except Exception as exc:
            print(f"{case.id}: {type(exc).__name__}: {exc}")
            continue
        runs += 1
        mine = [r for r in results if r.details.get("per_component")]
        ran += bool(mine)
        for r in mine:
            if r.status is not Status.FAILED:
                continue
            if spec.known_for(a.backend, dtype, r.kind.value, case.point):
                continue
            if r.known:  # a kernel of the engine's table, off here
                engine_known += 1
                continue
            added += 1
            print(f"{case.id} order {r.order}: {r.message[:400]}")
    print(f"{runs} runs, {ran} with a recorded per-component result, {added} failures added, "
          f"{engine_known} known engine kernels off ({time.perf_counter() - began:.0f} s)")


def tiny(inputs, scale):
    """``inputs`` with the first element of each one of two or more elements times ``scale``
    (unchanged without one)."""
    import numpy as np

    if scale is None:
        return inputs
    out = []
    for a in inputs:
        a = np.array(a, copy=True)
        if a.size >= 2 and np.issubdtype(a.dtype, np.floating):
            a.reshape(-1)[0] *= scale
        out.append(a)
    return tuple(out)


if __name__ == "__main__":
    main()
