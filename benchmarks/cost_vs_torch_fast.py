"""What a check costs, passing and failing, against ``torch.autograd.gradcheck(fast_mode=True)``
in the same run: time and peak memory at n = 1e3 .. 1e7 (issue 33, ``docs/cost-model.md``).

    python benchmarks/cost_vs_torch_fast.py                 # n = 1e3, 1e4, 1e5, 1e6, 1e7
    python benchmarks/cost_vs_torch_fast.py --quick         # n = 1e3, 1e4, 1e5
    python benchmarks/cost_vs_torch_fast.py --sizes 1e6     # one size

The function is ``f(x) = 2 tanh(x) + sin(x)``, float64, CPU, one torch thread and one BLAS
thread, at a standard normal ``x`` of ``n`` elements.  The cases, at each ``n``:

* ``gradcheck pass``: ``gradcheck.check(f, x, backend="torch")``, the default check;
* ``gradcheck fail``: the same on ``f`` with its backward scaled by ``1 + 1e-7`` (a custom
  autograd.Function, ``_common.torch_mutant``): the failing path (a clear failure confirmed
  by two more projected estimates, ``gradcheck/numeric/projected_failure.py``, then
  localization on a budget; anything not clear: the full oracle, the second estimate, the
  estimate without crossed elements);
* ``gradcheck borderline``: the default check of a correct ``f = tan(x)`` (a user's lambda),
  whose elements near a pole (about one in ten within 0.1 of one; the closest about
  ``2 / n`` away) spoil the screen's one table: the screen's split estimates them apart at
  smaller steps (``gradcheck/numeric/screen_split.py``), else the full oracle runs;
* ``gradcheck split alone``: the borderline check without its per-component stage
  (``resolution=False``): ``tan``'s outputs near a pole, 1e5 and more, and its smallest
  inputs span more than ``2^26``, so the check runs the scaled checks of
  ``docs/error-model.md`` 4c, whether or not the screen declines; this is the split's own
  cost;
* ``gradcheck twin pass``: the failing case's correct twin, the same custom
  autograd.Function with its backward scaled by ``1 + 0`` (each VJP recomputes ``f``'s
  pullback: about a forward and a backward pass of ``f``, where torch's own backward of
  ``f`` is a backward pass alone), so that failing and passing differ only in the error;
* ``gradcheck nd pass`` / ``gradcheck nd twin pass`` / ``gradcheck nd fail``: a function
  that is not elementwise, ``2 tanh(x) + sin(roll(x, 1))``, its custom autograd.Function
  with a correct backward, and the same with its backward wrong at one element (element
  ``n // 3`` of the gradient scaled by ``1 + ND_DELTA``, a boundary bug): the diagonal
  hypothesis is rejected and the failing check localizes from the transposed VJP, or by
  bisection (``gradcheck/numeric/bisection.py``);
* ``gradcheck tan pass``: the default check of the same ``tan`` at points where the screen
  passes (``x / 4``: the largest of 1e7 Gaussian points, about 5.6, becomes 1.4, 0.17 from
  the pole), the passing check of the borderline case's own function (``tan`` costs about
  1.5 times the evaluation of ``2 tanh(x) + sin(x)`` in torch);
* ``gradcheck fast pass`` / ``gradcheck fast twin pass`` / ``gradcheck fast fail``: the
  ``pass``, ``twin pass`` and ``fail`` cases checked with ``fast=True, modes=("rev",)``, what
  torch's fast mode checks (reverse mode; no forward-vs-reverse or eager-vs-functional
  comparison), with the default's 3 probes: a clear failure is confirmed by projected
  estimates as in the default check;
* ``torch fast pass`` / ``torch fast fail`` / ``torch fast borderline`` / ``torch fast tan
  pass``: ``torch.autograd.gradcheck(fast_mode=True)`` on the same four (it misses the
  mutant: it passes it).

Each case is one fresh process (``--reps`` of them, the fastest kept) that imports torch and
gradcheck, runs the case once at n = 16 (torch's lazy imports, which the first derivative of a
process pays), then times one call at ``n``: wall and CPU time, and its peak memory, the
process's ``ru_maxrss`` (torch's own ~0.5 GB included, as for torch's contender), and the
memory added during the call (peak minus the resident size before it).  Ratios:

* ``x torch``: to torch's fast mode on the same function in the same run (time: CPU time, the
  cost on a shared machine without the waiting for a core; memory: peak RSS);
* ``/pass``: gradcheck's failing check to the passing check of its correct twin (the same
  custom backward, right), the borderline check to the passing check of its own function
  (``tan pass``; the target: at most 3x, time and memory); ``/plain pass``: a failing check
  (and a twin) to the passing check of ``f`` without the custom backward (torch's own
  derivative of ``f``, whose VJPs cost less); ``/f pass``: the borderline check to the
  passing check of ``2 tanh(x) + sin(x)``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CASES = ("gradcheck pass", "gradcheck twin pass", "gradcheck fail", "gradcheck borderline",
         "gradcheck split alone", "gradcheck tan pass", "gradcheck nd pass",
         "gradcheck nd twin pass", "gradcheck nd fail", "gradcheck fast pass",
         "gradcheck fast twin pass", "gradcheck fast fail", "torch fast pass", "torch fast fail",
         "torch fast borderline", "torch fast tan pass")
#: ``fast=True`` cases: what torch's fast mode checks (reverse mode only), 3 probes
FAST = {"fast": True, "modes": ("rev",)}
#: the non-diagonal mutant's error at its one wrong element (relative)
ND_DELTA = 0.5
#: the case whose passing check a case's ``/pass`` is against
BASE = {"gradcheck fail": "gradcheck twin pass", "gradcheck borderline": "gradcheck tan pass",
        "gradcheck split alone": "gradcheck tan pass",
        "gradcheck nd fail": "gradcheck nd twin pass",
        "gradcheck fast fail": "gradcheck fast twin pass",
        "torch fast fail": "torch fast pass", "torch fast borderline": "torch fast tan pass"}
#: ... and the passing check of the same function without the custom backward (``/plain``)
PLAIN = {"gradcheck fail": "gradcheck pass", "gradcheck nd fail": "gradcheck nd pass",
         "gradcheck twin pass": "gradcheck pass", "gradcheck nd twin pass": "gradcheck nd pass",
         "gradcheck fast fail": "gradcheck fast pass",
         "gradcheck fast twin pass": "gradcheck fast pass"}
#: the torch fast mode case a gradcheck case's ``x torch`` is against
TORCH = {"gradcheck pass": "torch fast pass", "gradcheck fail": "torch fast fail",
         "gradcheck borderline": "torch fast borderline",
         "gradcheck split alone": "torch fast borderline",
         "gradcheck tan pass": "torch fast tan pass",
         "gradcheck fast pass": "torch fast pass", "gradcheck fast fail": "torch fast fail"}


def _f(x):
    import torch

    return torch.tanh(x) * 2 + torch.sin(x)


def _f_nd(x):
    import torch

    return torch.tanh(x) * 2 + torch.sin(torch.roll(x, 1))


def _f_border(x):
    import torch

    return torch.tan(x)


def _rss_kib() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _run(case: str, x, f) -> dict:
    """One call of ``case``; its verdict and what the result says."""
    import torch

    if case.startswith("torch"):
        t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        try:
            ok = bool(torch.autograd.gradcheck(f, (t,), fast_mode=True, raise_exception=False))
        except RuntimeError:
            ok = False
        return {"passed": ok}
    import gradcheck

    # the split alone: without the per-component stage, which tan's extreme values run
    # whether or not the screen declines (docs/error-model.md 4c)
    report = gradcheck.check(f, x, backend="torch", resolution=not case.endswith("alone"),
                             **(FAST if case.startswith("gradcheck fast ") else {}))
    vjp = next((r for r in report.results if r.kind == "vjp"), None)
    errors = [r.message for r in report.results if r.status.value == "error"]
    return {"passed": report.passed,
            "worst": [list(w.index) for w in vjp.worst] if vjp is not None else [],
            "localized": vjp.localized if vjp is not None else None,
            # which path decided it: a failure "projected" (docs/error-model.md 2c) or
            # "full"; a pass by the "screen", its "split" (2d) or the "full" check
            "path": None if vjp is None else _path(vjp),
            "statuses": {str(r.kind.value): r.status.value for r in report.results},
            "errors": errors}


def _path(r) -> str:
    if r.status.value == "failed":
        return str(r.details.get("failure_path", "full"))
    if r.details.get("screen", r.details.get("fast_screen")) != "passed":
        return "full"
    return "split" if "screen_split" in r.details else "screen"


def child(case: str, n: int, limit_gb: float | None = None) -> None:
    """One measurement in this fresh process; prints one JSON line.  ``limit_gb``: the
    process's address space is capped there (a case that needs more ends in MemoryError,
    reported as an error, instead of pushing a shared machine into swap or the OOM killer)."""
    if limit_gb:
        cap = int(limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    sys.path.insert(0, HERE)
    sys.path.insert(0, ROOT)
    import numpy as np
    from _common import setup, torch_element_mutant, torch_mutant

    setup()
    import gradcheck  # noqa: F401  (imported before the clock, like torch)

    f = (torch_element_mutant(_f_nd, ND_DELTA, n // 3) if case == "gradcheck nd fail"
         else torch_element_mutant(_f_nd, 0.0, n // 3) if case == "gradcheck nd twin pass"
         else _f_nd if case == "gradcheck nd pass"
         else torch_mutant(_f, 1e-7) if case.endswith("fail")
         else torch_mutant(_f, 0.0) if case in ("gradcheck twin pass", "gradcheck fast twin pass")
         else _f_border if case.endswith(("borderline", "alone", "tan pass")) else _f)
    _run(case, np.random.default_rng(1).standard_normal(16), f)  # warm: lazy imports
    x = np.random.default_rng(0).standard_normal(n)
    if case.endswith("tan pass"):
        x /= 4  # away from tan's poles: the screen passes
    before = _rss_kib()
    t, c = time.perf_counter(), time.process_time()
    out = _run(case, x, f)
    seconds, cpu = time.perf_counter() - t, time.process_time() - c
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_gb": peak / 2**20,
                      "added_gb": (peak - before) / 2**20, **out}))


def _env(overrides: dict[str, str | None] | None = None) -> dict[str, str]:
    """The child's environment: this one on one thread, with ``overrides`` (``None``: the
    variable unset)."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _measure(case: str, n: int, limit_gb: float | None = None,
             env: dict[str, str | None] | None = None) -> dict:
    """One fresh process of ``case`` at ``n`` (``env``: :func:`_env`'s overrides)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", case, str(n)]
    cmd += ["--memory-limit-gb", str(limit_gb)] if limit_gb else []
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(env), cwd=ROOT)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _best(runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    best = dict(min(ok, key=lambda r: r["cpu"]))
    for key in ("seconds", "peak_gb", "added_gb"):
        best[key] = min(r[key] for r in ok)
    return best


def _verdict(r: dict) -> str:
    """passed, FAILED, or ERROR where a result is an error (the check itself did not finish:
    a MemoryError under ``--memory-limit-gb``, say; its message is printed below the table)."""
    if r.get("errors"):
        return "ERROR"
    return "passed" if r["passed"] else "FAILED"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}"


def table(sizes: list[int], reps: int, limit_gb: float | None = None,
          cases: tuple[str, ...] = CASES) -> list[dict]:
    print(f"f = 2 tanh(x) + sin(x) (borderline: tan(x)), float64, CPU, one thread; each case "
          f"a fresh process, fastest of {reps}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'n':>9s} {'case':21s} {'wall s':>8s} {'cpu s':>8s} {'x torch':>7s} "
          f"{'/pass':>6s} {'peak GB':>7s} {'x torch':>7s} {'/pass':>6s} "
          f"{'+GB':>6s} {'verdict':>8s}  worst elements named (path)")
    rows = []
    for n in sizes:
        got: dict[str, dict] = {}
        runs: dict[str, list[dict]] = {c: [] for c in cases}
        for _ in range(reps):
            for case in cases:  # interleaved: each sees the same load
                runs[case].append(_measure(case, n, limit_gb))
        for case in cases:
            got[case] = _best(runs[case])
        for case in cases:
            r = got[case]
            if "error" in r:
                print(f"{n:9d} {case:21s} error: {r['error']}")
                continue
            ref = got.get(TORCH.get(case, ""), {"error": "no reference"})
            base = got.get(BASE.get(case, ""), {"error": "no base"})
            have_ref, versus = "error" not in ref, "error" not in base
            worst = r.get("worst")
            print(f"{n:9d} {case:21s} {r['seconds']:8.3g} {r['cpu']:8.3g} "
                  f"{_ratio(r['cpu'], ref['cpu']) if have_ref else '-':>7s} "
                  f"{r['cpu'] / base['cpu'] if versus else 1:6.2f} {r['peak_gb']:7.2f} "
                  f"{_ratio(r['peak_gb'], ref['peak_gb']) if have_ref else '-':>7s} "
                  f"{r['peak_gb'] / base['peak_gb'] if versus else 1:6.2f} "
                  f"{r['added_gb']:6.2f} {_verdict(r):>8s}  "
                  f"{worst[:3] if worst else ''}"
                  f"{' (' + r['path'] + ')' if r.get('path') else ''}")
            plain = got.get(PLAIN.get(case, ""), {"error": "no plain"})
            if "error" not in plain:
                print(f"{'':9s} {'':21s} /plain pass: {r['cpu'] / plain['cpu']:.2f} time, "
                      f"{r['peak_gb'] / plain['peak_gb']:.2f} memory (against the passing "
                      f"check of the same f without the custom backward)")
            other = got.get("gradcheck pass", {"error": "not run"})
            if case == "gradcheck borderline" and "error" not in other:
                print(f"{'':9s} {'':21s} /f pass: {r['cpu'] / other['cpu']:.2f} time, "
                      f"{r['peak_gb'] / other['peak_gb']:.2f} memory (against the passing "
                      f"check of 2 tanh(x) + sin(x))")
            rows.append({"n": n, "case": case, **r})
            for message in r.get("errors", []):
                print(f"{'':9s} {'':21s} error: {message[:300]}")
        sys.stdout.flush()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e3, 1e4, 1e5, 1e6, 1e7])
    ap.add_argument("--quick", action="store_true", help="n = 1e3, 1e4, 1e5 only")
    ap.add_argument("--reps", type=int, default=1, help="processes per case (the fastest)")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--memory-limit-gb", type=float,
                    help="cap each case's address space (a case over it is an error)")
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES),
                    help="these cases only (default: all; a ratio needs its reference case)")
    ap.add_argument("--child", nargs=2, metavar=("CASE", "N"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], int(float(a.child[1])), a.memory_limit_gb)
        return
    sizes = [1e3, 1e4, 1e5] if a.quick else a.sizes
    rows = table([int(s) for s in sizes], a.reps, a.memory_limit_gb,
                 tuple(c for c in CASES if c in a.cases))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
