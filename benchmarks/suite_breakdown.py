"""Where the time of a suite run goes: per check component, backend, dtype, op and test kind.

    python benchmarks/suite_breakdown.py --json breakdown.json -- \\
        suites/test_numeric.py --gradcheck-profile ci -q -p no:cacheprovider

Runs pytest in this process with a small instrumenting plugin.  Suite tests of one case share
one memoized run, so a test's own duration says little (the first test of a case pays for all
of them); instead the components of a run are timed where they are called:

* ``prepare``: the evaluations at the point (``gradcheck/numeric/prepare.py``),
* ``fd``: the finite-difference oracle (``fd.directional_derivatives``, all its evaluations),
* ``vjp`` / ``eager_func`` / ``jvp``: the batched AD calls of the projected checks,
* ``rounding``: the low-precision and float64 VJPs of the rounding check,
* ``localize``: the full Jacobians of a failed check,
* ``order2``: the second-order sub-run (its own FD and AD calls are nested under it),
* ``agreement``: the reference / cross-backend / cross-device comparisons,
* ``search``: the Hypothesis search (its numeric runs nested under it).

Each component's *exclusive* CPU and wall time is attributed to the innermost component running
(nesting is tracked with a stack), keyed by the case's backend, dtype and op.  JAX's own
tracing / lowering / compile durations (``jax.monitoring``) are summed per component too.  The
CPU clock is the process's (``time.process_time``): robust to the load of a shared machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

_JAX_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "jax_trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "jax_lower",
    "/jax/core/compile/backend_compile_duration": "jax_compile",
}


class Breakdown:
    """The instrumenting plugin: a stack of running components and per-key totals."""

    def __init__(self) -> None:
        self.stack: list[list] = []  # [component, key, wall0, cpu0, child_wall, child_cpu]
        self.excl: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        self.jax: dict[tuple, float] = defaultdict(float)
        self.tests: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        self.case_key: tuple = ("?", "?", "?")
        self._install()

    # -- timing ---------------------------------------------------------------------------
    def wrap(self, module, attr: str, component: str) -> None:
        original = getattr(module, attr)
        plugin = self

        def timed(*args, **kwargs):
            return plugin._timed(component, original, *args, **kwargs)

        setattr(module, attr, timed)

    def _install(self) -> None:
        from gradcheck.harness import runner
        from gradcheck.numeric import compare, first_order, run
        from gradcheck.oracle import fd
        from gradcheck.plugin import search

        self.wrap(run, "prepare", "prepare")
        self.wrap(fd, "directional_derivatives", "fd")
        self.wrap(first_order, "forward", "jvp")
        self.wrap(first_order, "rounding_samples", "rounding")
        self.wrap(compare, "localize", "localize")
        self.wrap(run, "second_order", "order2")
        self.wrap(first_order, "first_order", "first_order_rest")
        self.wrap(runner, "_agreement", "agreement")
        self.wrap(search, "search_case", "search")
        self.wrap(first_order, "reverse", "vjp")
        self.wrap(first_order, "alternatives", "eager_func")
        try:
            import jax.monitoring as jm
        except ImportError:
            return

        def listener(event: str, duration: float, **_: object) -> None:
            name = _JAX_EVENTS.get(event)
            if name:
                comp = self.stack[-1][0] if self.stack else "outside"
                self.jax[(name, comp) + self.case_key] += duration

        jm.register_event_duration_secs_listener(listener)

    def _timed(self, component, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``, its wall and CPU time exclusive of nested timed calls
        added to ``component``'s slot for the current case."""
        self.stack.append([component, self.case_key, time.perf_counter(), time.process_time(),
                           0.0, 0.0])
        try:
            return fn(*args, **kwargs)
        finally:
            comp, key, w0, c0, cw, cc = self.stack.pop()
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            slot = self.excl[(comp,) + key]
            slot[0] += wall - cw
            slot[1] += cpu - cc
            slot[2] += 1
            if self.stack:
                self.stack[-1][4] += wall
                self.stack[-1][5] += cpu

    # -- pytest hooks ---------------------------------------------------------------------
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        case = item.callspec.params.get("gradcheck_case") if hasattr(item, "callspec") else None
        if case is not None:
            c = case.case
            self.case_key = (c.backend, c.dtype, c.op)
        w0, c0 = time.perf_counter(), time.process_time()
        yield
        kind = item.originalname if hasattr(item, "originalname") else item.name
        slot = self.tests[kind]
        slot[0] += time.process_time() - c0
        slot[1] += 1
        self.case_key = ("?", "?", "?")
        del w0

    # -- summary --------------------------------------------------------------------------
    def summary(self) -> dict:
        def group(index: int) -> dict:
            out: dict = defaultdict(lambda: [0.0, 0.0])
            for key, (w, c, _) in self.excl.items():
                k = key[index] if isinstance(index, int) else tuple(key[i] for i in index)
                out[str(k)][0] += w
                out[str(k)][1] += c
            return dict(sorted(out.items(), key=lambda kv: -kv[1][1]))

        jax_tot: dict = defaultdict(float)
        for (name, comp, *_), d in self.jax.items():
            jax_tot[f"{name} in {comp}"] += d
        return {
            "component": group(0),
            "backend": group(1),
            "component x backend": group((0, 1)),
            "component x backend x dtype": group((0, 1, 2)),
            "op": dict(list(group(3).items())[:40]),
            "jax": dict(sorted(jax_tot.items(), key=lambda kv: -kv[1])),
            "test kind (cpu s, n)": dict(self.tests),
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None, help="write the breakdown here")
    ap.add_argument("pytest_args", nargs="*")
    ns = ap.parse_args()
    plugin = Breakdown()
    w0, c0 = time.perf_counter(), time.process_time()
    code = pytest.main(ns.pytest_args, plugins=[plugin])
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    out = {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": peak, **plugin.summary()}
    for section, rows in out.items():
        if not isinstance(rows, dict):
            print(f"{section}: {rows:.1f}")
            continue
        print(f"\n== {section} (wall s, cpu s) ==")
        for k, v in list(rows.items())[:25]:
            print(f"  {k:60s} " + (f"{v[0]:9.1f} {v[1]:9.1f}" if isinstance(v, list)
                                   else f"{v:9.1f}"))
    if ns.json:
        ns.json.write_text(json.dumps(out, indent=1))
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
