"""Per-check wall time of gradcheck vs torch.autograd.gradcheck (slow and fast mode) and
jax.test_util.check_grads, with each tool's verdict on (1 + delta) mutants beside its time.

    python benchmarks/speed_vs_anchors.py                  # n = 10, 100, 1000, 10000
    python benchmarks/speed_vs_anchors.py --sizes 1000 --reps 15
    python benchmarks/speed_vs_anchors.py --slow-max-n 10000   # torch slow mode at 10^4 too
    python benchmarks/speed_vs_anchors.py --sizes 1000 10000 --clock cpu --skip-part2

Part 1, per function (elementwise chain, dense layer, logsumexp) and size: the fastest of
``--reps`` interleaved runs of each tool on the correct function (see ``_common``), its ratio
to torch's fast mode, whether it (wrongly) rejected the correct function, and whether it
caught the mutants whose backward pass is scaled by 1 + delta, delta = 1e-3, 1e-5, 1e-7.
Mutants are reverse-mode bugs, so every tool judges them in reverse mode ("caught" = the
tool's reverse-mode comparison failed); torch mutants are custom autograd.Functions, jax
mutants ``jax.custom_vjp`` functions.

Part 2, full-Jacobian localization at n = 1000 (``--localize-n``): gradcheck on the
delta = 1e-7 torch mutant with and without localization (their difference is the
localization: batched AD Jacobian + FD Jacobian, column-compressed where the pattern is sparse,
+ worst elements), against torch's slow mode (which always builds the full Jacobian) on the
same mutant, interleaved (fastest of ``--localize-reps`` rounds).  Beside the times: the FD
Jacobian's evaluations of f (points, batched) and the number of calls torch's slow mode makes
to f.  Besides the three functions of part 1, two sparse ones: a stencil and a block softmax.
"""

from __future__ import annotations

import argparse

from _common import (
    DELTAS,
    fmt_ms,
    interleaved,
    jax_check_grads_passes,
    jax_mutant,
    once,
    setup,
    sparse_workloads,
    torch_gradcheck_passes,
    torch_mutant,
    workloads,
)


def _tools(w, slow: bool, only: tuple[str, ...] = ()) -> dict[str, tuple]:
    """name -> (timing thunk on the correct function, verdict(f_torch, f_jax) -> passed)."""
    import torch

    import gradcheck

    xt = torch.tensor(w.x, dtype=torch.float64, requires_grad=True)
    x = w.x
    tools = {
        "torch.gradcheck fast": (
            lambda: torch.autograd.gradcheck(w.torch_fn, (xt,), fast_mode=True),
            lambda ft, fj: torch_gradcheck_passes(ft, x, fast=True)),
    }
    if slow:
        tools["torch.gradcheck slow"] = (
            lambda: torch.autograd.gradcheck(w.torch_fn, (xt,)),
            lambda ft, fj: torch_gradcheck_passes(ft, x, fast=False))
    tools.update({
        "jax check_grads fwd+rev": (
            lambda: jax_check_grads_passes(w.jax_fn, x, ("fwd", "rev")),
            lambda ft, fj: jax_check_grads_passes(fj, x, ("rev",))),
        "jax check_grads rev": (
            lambda: jax_check_grads_passes(w.jax_fn, x, ("rev",)),
            lambda ft, fj: jax_check_grads_passes(fj, x, ("rev",))),
    })
    # gradcheck: each configuration with each backend's version of the function
    configs = {"default": {}, "rev 1 probe": {"modes": ("rev",), "probes": 1},
               "fast": {"fast": True}, "fast rev 1 probe": {"modes": ("rev",), "probes": 1,
                                                            "fast": True}}
    for backend, fn in (("torch", w.torch_fn), ("jax", w.jax_fn)):
        for label, kw in configs.items():
            verdict_kw = {k: v for k, v in kw.items() if k != "modes"}  # _vjp_passes: rev
            tools[f"gradcheck[{backend}] {label}"] = (
                lambda fn=fn, backend=backend, kw=kw: gradcheck.check(fn, x, backend=backend,
                                                                      **kw),
                lambda ft, fj, backend=backend, vk=verdict_kw: _vjp_passes(
                    ft if backend == "torch" else fj, x, backend, vk))
    if only:
        tools = {k: v for k, v in tools.items() if k.startswith("torch.gradcheck") or
                 any(o in k for o in only)}
    return tools


def _vjp_passes(f, x, backend: str, kw: dict) -> bool:
    """gradcheck's reverse-mode verdict (the VJP check) on ``f``."""
    import gradcheck

    report = gradcheck.check(f, x, backend=backend, modes=("rev",), **kw)
    return not any(r.kind == "vjp" and r.status.value == "failed" for r in report.results)


def _correct_verdict(name: str, thunk) -> str:
    """'ok' if the tool accepts the correct function, else 'FALSE ALARM'."""
    import gradcheck

    try:
        out = thunk()
    except Exception:  # torch raises GradcheckError, jax AssertionError
        return "FALSE ALARM"
    if isinstance(out, gradcheck.Report):
        return "ok" if not out.failures else "FALSE ALARM"
    return "ok" if out in (True, None) else "FALSE ALARM"


def part1(sizes: list[int], reps: int, slow_max_n: int, clock: str,
          only: tuple[str, ...] = (), stat: str = "min") -> None:
    which = "fastest" if stat == "min" else "median"
    print(f"Part 1: per-check {clock} time on the correct function ({which} of interleaved "
          "runs), ratio to torch fast mode, and verdicts on (1 + delta) mutants")
    head = f"{'function':12s} {'n':>6s} {'tool':34s} {'ms':>9s} {'x fast':>7s} {'correct':>11s}"
    print(head + "".join(f" {'d=' + format(d, 'g'):>7s}" for d in DELTAS))
    for n in sizes:
        for w in workloads(n):
            tools = _tools(w, slow=n <= slow_max_n, only=only)
            times = interleaved({k: v[0] for k, v in tools.items() if "slow" not in k},
                                reps=reps, clock=clock, stat=stat)
            if "torch.gradcheck slow" in tools:
                times["torch.gradcheck slow"], _ = once(tools["torch.gradcheck slow"][0])
            mutants = {d: (torch_mutant(w.torch_fn, d), jax_mutant(w.jax_fn, d)) for d in DELTAS}
            for name, (thunk, verdict) in tools.items():
                caught = ["caught" if not verdict(*mutants[d]) else "missed" for d in DELTAS]
                print(f"{w.name:12s} {n:6d} {name:34s} {fmt_ms(times[name])} "
                      f"{times[name] / times['torch.gradcheck fast']:7.2f} "
                      f"{_correct_verdict(name, thunk):>11s}"
                      + "".join(f" {c:>7s}" for c in caught))
            if n > slow_max_n:
                print(f"{'':12s} {n:6d} torch.gradcheck slow: not run (n > --slow-max-n)")
        print()


class _CountCalls:
    """``f`` with a counter of its (forward) calls; vmap-batched calls count once."""

    def __init__(self, f):
        self.f, self.calls = f, 0

    def __call__(self, x):
        self.calls += 1
        return self.f(x)


def part2(n: int, reps: int) -> None:
    import os

    import torch

    from gradcheck.backends.registry import get_backend
    from gradcheck.numeric import CheckConfig, run_numeric_checks

    print(f"Part 2: full-Jacobian localization at n = {n} (delta = 1e-7 torch mutant); wall "
          f"time, fastest of {reps} interleaved rounds; load average {os.getloadavg()[0]:.1f}")
    print(f"{'function':14s} {'m x n':>10s} {'with loc.':>10s} {'without':>9s} {'loc.':>9s} "
          f"{'torch slow':>11s} {'slow/loc.':>10s} {'FD evals':>9s} {'slow calls':>11s}  "
          "FD Jacobian; worst element (AD vs FD)")
    be = get_backend("torch")
    for w in workloads(n) + sparse_workloads(n):
        f = torch_mutant(w.torch_fn, 1e-7)
        xt = torch.tensor(w.x, dtype=torch.float64, requires_grad=True)

        def run(localize: bool, f=f, w=w):
            cfg = CheckConfig(modes=("rev",), probes=1, localize=localize)
            return run_numeric_checks(be, f, [w.x], device="cpu", dtype="float64", config=cfg)

        def slow(f=f, xt=xt):
            return torch.autograd.gradcheck(f, (xt,), raise_exception=False)

        t = interleaved({"on": lambda: run(True), "off": lambda: run(False), "slow": slow},
                        reps=reps, budget_s=60.0)
        vjp = next(r for r in run(True) if r.kind == "vjp")
        counted = _CountCalls(f)
        torch.autograd.gradcheck(counted, (xt,), raise_exception=False)
        m = int(torch.as_tensor(w.torch_fn(torch.as_tensor(w.x))).numel())
        loc = max(t["on"] - t["off"], 1e-9)
        worst = (f"{vjp.worst[0].index}: {vjp.worst[0].actual:.9g} vs {vjp.worst[0].expected:.9g}"
                 if vjp.worst else "no element over")
        print(f"{w.name:14s} {f'{m}x{n}':>10s} {fmt_ms(t['on']):>10s} {fmt_ms(t['off']):>9s} "
              f"{fmt_ms(loc):>9s} {fmt_ms(t['slow']):>11s} {t['slow'] / loc:10.1f} "
              f"{vjp.details.get('fd_evaluations', '-'):>9} {counted.calls:>11d}  "
              f"{vjp.details.get('fd_jacobian', vjp.details.get('localized', '-'))}; {worst}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 10000])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--slow-max-n", type=int, default=1000,
                    help="largest n at which torch's slow mode is timed (one run)")
    ap.add_argument("--localize-n", type=int, default=1000)
    ap.add_argument("--localize-reps", type=int, default=3,
                    help="interleaved rounds of part 2 (torch's slow mode takes seconds)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: process CPU time, robust to a shared machine (part 1 only)")
    ap.add_argument("--only", nargs="*", default=[],
                    help="part 1: only the tools whose name contains one of these (torch's "
                         "gradcheck always runs), e.g. --only 'fast rev'")
    ap.add_argument("--stat", choices=("min", "median"), default="min",
                    help="part 1: each tool's fastest round (default) or its median round")
    ap.add_argument("--skip-part1", action="store_true")
    ap.add_argument("--skip-part2", action="store_true")
    args = ap.parse_args()
    setup()
    if not args.skip_part1:
        part1(args.sizes, args.reps, args.slow_max_n, args.clock, tuple(args.only),
              args.stat)
    if not args.skip_part2:
        part2(args.localize_n, args.localize_reps)


if __name__ == "__main__":
    main()
