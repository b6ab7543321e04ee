"""Cost as the input grows: the default check, the fast screen and torch's fast mode at
n = 1e3 .. 1e7, each in its own fresh process, and the cost of ``gradcheck.audit`` on a
model with 1e7 float64 parameters.

    python benchmarks/scale.py                          # n = 1e3, 1e4, 1e5, 1e6, 1e7; audit
    python benchmarks/scale.py --sizes 1e6 --reps 3     # one size, best of 3 processes each
    python benchmarks/scale.py --skip-audit --mutant-max-n 1e5

The function is ``f(x) = 2 tanh(x) + sin(x)`` in float64 on the CPU (torch adapter), at a
standard normal ``x`` of ``n`` elements.  Contenders:

* ``default``: ``gradcheck.check(f, x, backend="torch")`` (3 probes, reverse and forward mode,
  forward-vs-reverse and eager-vs-functional comparisons);
* ``fast p=1``: ``gradcheck.check(..., fast=True, probes=1)``;
* ``torch fast``: ``torch.autograd.gradcheck(f, (x,), fast_mode=True)``.

Each measurement is one fresh Python process (``--reps`` processes per contender, the fastest
reported; contenders interleaved, so each sees the same load; one torch and one BLAS thread)
that imports torch and
gradcheck, then times one call and reads its peak resident memory (``ru_maxrss``, the whole
process: torch's own ~0.5 GB included, as for torch's contender).  Two columns per contender:

* ``cold``: the call is the first derivative computation of the process, so it pays torch's
  lazy imports (for torch's forward-mode AD, ``torch._dynamo``: about 1.3-2 s on this machine,
  which torch's fast mode, reverse only, never loads);
* ``warm``: a call at n = 16 first (the same lazy imports), then the timed call at n: the
  cost that grows with n.

``warm cpu`` is the CPU time of the warm call (every contender is single-threaded, so on an
idle machine it is the wall time; on a shared one it leaves out the waiting for a core).
Ratios are to torch's fast mode in the same run and the same column.  ``caught`` is each tool's
verdict on the (1 + 1e-7) backward mutant of f (``_common.torch_mutant``) at that n, in a
fresh process too (up to ``--mutant-max-n``: a gradcheck failure runs the full oracle, whose
memory grows with n).  torch runs on one thread everywhere (``_common.setup``).

The audit: ``gradcheck.audit`` of a stack of ``nn.Linear`` layers with 1e7 float64 parameters
(``--audit-params``), mean squared error on one batch, in its own process: time, peak memory
and the number of forward and backward passes of the model.
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
TOOLS = ("default", "fast p=1", "torch fast")


def _f(x):
    import torch

    return torch.tanh(x) * 2 + torch.sin(x)


def _run_tool(tool: str, x, f, mutant: bool = False) -> bool:
    import torch

    if tool == "torch fast":
        t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        try:
            return bool(torch.autograd.gradcheck(f, (t,), fast_mode=True, raise_exception=False))
        except RuntimeError:
            return False
    import gradcheck

    kw = {} if tool == "default" else {"fast": True, "probes": 1}
    report = gradcheck.check(f, x, backend="torch", **kw)
    if tool == "default" and not mutant:
        # every comparison the default makes is there (the mutant, a custom autograd.Function
        # without a forward-mode rule, has no JVP and so no forward-vs-reverse comparison)
        kinds = {r.kind for r in report.results}
        assert {"vjp", "jvp", "fwd_rev", "eager_func"} <= kinds, kinds
    if mutant:  # caught: the reverse-mode comparison with FD failed
        return not any(r.kind == "vjp" and r.status.value == "failed" for r in report.results)
    return report.passed


def _rss_kib() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def child(tool: str, n: int, warm: bool, mutant: bool) -> None:
    """One measurement in this (fresh) process; prints one JSON line."""
    sys.path.insert(0, HERE)
    sys.path.insert(0, ROOT)
    import numpy as np
    from _common import setup, torch_mutant

    setup()
    import gradcheck  # noqa: F401  (imported before the clock, like torch)

    f = torch_mutant(_f, 1e-7) if mutant else _f
    if warm:
        _run_tool(tool, np.random.default_rng(1).standard_normal(16), f, mutant)
    x = np.random.default_rng(0).standard_normal(n)
    before = _rss_kib()
    t, c = time.perf_counter(), time.process_time()
    passed = _run_tool(tool, x, f, mutant)
    seconds, cpu = time.perf_counter() - t, time.process_time() - c
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_gb": peak / 2**20,
                      "added_gb": (peak - before) / 2**20, "passed": passed}))


def _env() -> dict[str, str]:
    """The children's environment: this checkout first on the path, one BLAS thread (NumPy's
    OpenBLAS threads spin between calls and, on a loaded machine, slow every NumPy operation
    of the process down several times; torch is on one thread too)."""
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
            "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS", "1")}


def _measure(tool: str, n: int, warm: bool, mutant: bool = False) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", tool, str(n)]
    cmd += ["--warm"] if warm else []
    cmd += ["--mutant"] if mutant else []
    env = _env()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _best(runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    return {"seconds": min(r["seconds"] for r in ok), "cpu": min(r["cpu"] for r in ok),
            "peak_gb": min(r["peak_gb"] for r in ok),
            "added_gb": min(r["added_gb"] for r in ok), "passed": ok[0]["passed"]}


def sizes_table(sizes: list[int], reps: int, mutant_max_n: int) -> None:
    print(f"f = 2 tanh(x) + sin(x), float64, CPU, one torch thread; seconds and peak RSS (GB) "
          f"of one call, each in a fresh process (fastest of {reps}); x = ratio to torch "
          f"fast mode in the same column; load average {os.getloadavg()[0]:.1f}")
    head = (f"{'n':>9s} {'tool':11s} {'cold s':>7s} {'x':>5s} {'warm s':>7s} {'x':>5s} "
            f"{'warm cpu':>8s} {'x':>5s} {'peak GB':>7s} {'x':>5s} {'+GB':>6s} {'correct':>7s} "
            f"{'(1+1e-7)':>8s}")
    print(head)
    for n in sizes:
        rows = {}
        for warm in (False, True):
            runs: dict[str, list[dict]] = {t: [] for t in TOOLS}
            for _ in range(reps):
                for tool in TOOLS:
                    runs[tool].append(_measure(tool, n, warm))
            for tool in TOOLS:
                rows.setdefault(tool, {})["warm" if warm else "cold"] = _best(runs[tool])
        caught = {}
        for tool in TOOLS:
            if n <= mutant_max_n:
                m = _measure(tool, n, warm=True, mutant=True)
                caught[tool] = ("error" if "error" in m else
                                "missed" if m["passed"] else "caught")
            else:
                caught[tool] = "not run"
        ref = rows["torch fast"]
        for tool in TOOLS:
            c, w = rows[tool]["cold"], rows[tool]["warm"]
            if "error" in c or "error" in w:
                print(f"{n:9d} {tool:11s} error: {c.get('error') or w.get('error')}")
                continue
            print(f"{n:9d} {tool:11s} {c['seconds']:7.3g} "
                  f"{c['seconds'] / ref['cold']['seconds']:5.2f} {w['seconds']:7.3g} "
                  f"{w['seconds'] / ref['warm']['seconds']:5.2f} {w['cpu']:8.3g} "
                  f"{w['cpu'] / ref['warm']['cpu']:5.2f} {w['peak_gb']:7.2f} "
                  f"{w['peak_gb'] / ref['warm']['peak_gb']:5.2f} {w['added_gb']:6.2f} "
                  f"{'ok' if w['passed'] else 'FAILED':>7s} {caught[tool]:>8s}")
        d = rows["default"]["warm"]
        if n == 10**6 and "error" not in d and "error" not in ref["warm"]:
            cpu, wall = d["cpu"] / ref["warm"]["cpu"], d["seconds"] / ref["warm"]["seconds"]
            mem = d["peak_gb"] / ref["warm"]["peak_gb"]
            met = max(cpu, wall) <= 3 and mem <= 2
            print(f"{'':9s} target at 1e6 (default within 3x the time and 2x the memory of "
                  f"torch fast): CPU {cpu:.2f}x, wall {wall:.2f}x, peak {mem:.2f}x: "
                  f"{'met' if met else 'not met'} (load average now {os.getloadavg()[0]:.1f})")
        sys.stdout.flush()


# -- the audit ------------------------------------------------------------------------------


def audit_child(params: int) -> None:
    """``gradcheck.audit`` of a stack of square ``nn.Linear`` layers with about ``params``
    float64 parameters, counting the model's forward and backward passes."""
    sys.path.insert(0, HERE)
    sys.path.insert(0, ROOT)
    from _common import setup

    setup()
    import torch

    import gradcheck

    width, depth = 1000, max(1, round(params / 1001_000))
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width, dtype=torch.float64), torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers)
    counts = {"forward": 0, "backward": 0}
    def forward_hook(module, inputs, out):
        counts["forward"] += 1
        if out.requires_grad:  # fires once per backward pass through the model's output
            out.register_hook(lambda g: counts.__setitem__("backward", counts["backward"] + 1))

    model.register_forward_hook(forward_hook)
    batch = (torch.randn(8, width, dtype=torch.float64), torch.randn(8, width,
                                                                     dtype=torch.float64))

    def loss_fn(m, b):
        x, y = b
        return ((m(x) - y) ** 2).mean()

    n = sum(p.numel() for p in model.parameters())
    before = _rss_kib()
    t = time.perf_counter()
    report = gradcheck.audit(model, loss_fn, batch, backend="torch")
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    statuses: dict[str, int] = {}
    for p in report.parameters:
        statuses[p.status.value] = statuses.get(p.status.value, 0) + 1
    print(json.dumps({"parameters": n, "tensors": len(report.parameters), "seconds": seconds,
                      "peak_gb": peak / 2**20, "added_gb": (peak - before) / 2**20,
                      "model_gb": n * 8 / 2**30, **counts, "passed": report.passed,
                      "summary": report.summary(), "flow": statuses}))


def audit_table(params: int) -> None:
    cmd = [sys.executable, os.path.abspath(__file__), "--audit-child", str(params)]
    env = _env()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    print()
    if out.returncode != 0:
        print("audit: error:", (out.stderr.strip().splitlines() or ["?"])[-1])
        return
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"gradcheck.audit, stack of nn.Linear(1000, 1000) + tanh, {r['parameters']:,} float64 "
          f"parameters in {r['tensors']} tensors ({r['model_gb']:.3f} GB), batch of 8: "
          f"{r['seconds']:.1f} s, peak RSS {r['peak_gb']:.2f} GB (+{r['added_gb']:.2f} GB "
          f"during the call), {r['forward']} forward and {r['backward']} backward passes of the "
          f"model; {r['summary']}; flow {r['flow']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e3, 1e4, 1e5, 1e6, 1e7])
    ap.add_argument("--reps", type=int, default=1, help="processes per contender (fastest)")
    ap.add_argument("--mutant-max-n", type=float, default=1e6)
    ap.add_argument("--audit-params", type=float, default=1e7)
    ap.add_argument("--skip-audit", action="store_true")
    ap.add_argument("--child", nargs=2, metavar=("TOOL", "N"), help=argparse.SUPPRESS)
    ap.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mutant", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--audit-child", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], int(float(a.child[1])), a.warm, a.mutant)
    elif a.audit_child:
        audit_child(int(a.audit_child))
    else:
        sizes_table([int(s) for s in a.sizes], a.reps, int(a.mutant_max_n))
        if not a.skip_audit:
            audit_table(int(a.audit_params))


if __name__ == "__main__":
    main()
