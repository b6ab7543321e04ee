"""Cost and detection power of ``gradcheck model`` (the model protocol) as the model grows.

Runs :func:`gradcheck.audit_process` on the reference peer's ``big`` model
(``tests/support/model_peer.py --variant big --size N``: 4 tensors, an O(N) elementwise loss)
at N = 1e3, 1e5 and (``--big``) 1e7 parameters, and prints:

1. the cost of a full check without the step (float64 FD + float32 rounding, 4 global
   directions, 1 per tensor): forwards the program evaluated, requests, bytes over the pipe both
   ways, wall time; next to the bytes one FD Jacobian would need with the full-vector protocol
   the model audit's fixed children speak (every FD point a whole parameter vector:
   ``fd_jacobian`` at 7 levels, 2 x 7 + 2 points per coordinate, n float64 values each as
   base64: 16 n^2 x 32/3 bytes; computed, not run);
2. detection power: the fraction of seeded mutants caught (any ``grad``/``flow`` result failed)
   over ``--trials`` seeds (the directions' seed and the mutant's position both vary): one wrong
   element of layer.0.weight, a dense random error on layer.2.weight whose norm is 3x and 10x
   the correct run's allowance of that tensor's check (divided by the direction's scale, so the
   projected error is ~N(0, (c x allowance)^2)), and a 2x factor on layer.1.weight.

Run: ``python benchmarks/model_protocol_cost.py [--big] [--trials 20]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gradcheck import Status  # noqa: E402
from gradcheck.model_audit.remote import audit_process  # noqa: E402

PEER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                    "support", "model_peer.py")


def command(size: int, *extra: str) -> list[str]:
    return [sys.executable, PEER, "--variant", "big", "--size", str(size), *extra]


def old_jacobian_bytes(n: int) -> float:
    """One FD Jacobian with full parameter vectors over the pipe: 16 points per coordinate,
    n float64 values each, base64 (4/3 x 8 bytes per value); JSON framing left out."""
    return 16.0 * n * n * 8 * 4 / 3


def caught(report, own: str | None = None) -> bool:
    """Any gradient or flow check failed (``own``: that one check)."""
    return any(r.status is Status.FAILED and (r.name == own if own else
                                               r.name.startswith(("grad", "flow")))
               for r in report.results)


def human(b: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB", "EB"):
        if b < 1000:
            return f"{b:.3g} {unit}"
        b /= 1000
    return f"{b:.3g} ZB"


def cost(size: int) -> tuple[dict, object]:
    t = time.perf_counter()
    r = audit_process(command(size), step=False, request_timeout=600)
    wall = time.perf_counter() - t
    bad = [x.name for x in r.results if not x.ok]
    tr = r.traffic
    return {"n": size, "forwards": r.forwards, "requests": tr.total_requests,
            "bytes": tr.total_bytes, "wall": wall, "old": old_jacobian_bytes(size),
            "false_alarms": bad}, r


def allowance(report, name: str) -> float:
    return next(x.allowed for x in report.results if x.name == name)


def power(size: int, base, trials: int) -> dict[str, tuple[float, float]]:
    """Per mutant: (caught by any check, caught by its own tensor's check)."""
    n_t = size // 4
    a2 = allowance(base, "grad[layer.2.weight]")
    a0 = allowance(base, "grad[layer.0.weight]")
    s = 0.25  # the directions' scale: the power of two nearest the tensors' rms (~0.3)
    cases = {
        "one element, 3x allowance": ("grad[layer.0.weight]", lambda k: (
            "--wrong-element", str((k * 7919) % n_t), "--wrong-delta", str(3 * a0 / s))),
        "dense, 1x allowance": ("grad[layer.2.weight]", lambda k: (
            "--dense-norm", str(1 * a2 / s), "--dense-seed", str(k))),
        "dense, 3x allowance": ("grad[layer.2.weight]", lambda k: (
            "--dense-norm", str(3 * a2 / s), "--dense-seed", str(k))),
        "dense, 10x allowance": ("grad[layer.2.weight]", lambda k: (
            "--dense-norm", str(10 * a2 / s), "--dense-seed", str(k))),
        "2x factor": ("grad[layer.1.weight]", lambda k: ("--factor", "2")),
    }
    out = {}
    for label, (own, extra) in cases.items():
        hits = mine = 0
        for k in range(trials):
            r = audit_process(command(size, *extra(k)), step=False, dtypes=("float64",),
                              seed=k, request_timeout=600)
            hits += caught(r)
            mine += caught(r, own)
        out[label] = (hits / trials, mine / trials)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", action="store_true", help="also N = 1e7 (minutes, ~2 GB)")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--no-cost", action="store_true", help="only the detection power")
    args = ap.parse_args()
    sizes = [10**3, 10**5] + ([10**7] if args.big else [])
    if args.no_cost:
        for n in sizes[:2]:
            _show_power(n, audit_process(command(n), step=False, dtypes=("float64",),
                                         request_timeout=600), args.trials)
        return
    print("| N | forwards | requests | bytes over the pipe | wall | one full-vector FD "
          "Jacobian | false alarms |")
    print("|---|---|---|---|---|---|---|")
    bases = {}
    for n in sizes:
        c, r = cost(n)
        bases[n] = r
        print(f"| {n:.0e} | {c['forwards']} | {c['requests']} | {human(c['bytes'])} | "
              f"{c['wall']:.1f} s | {human(c['old'])} | {len(c['false_alarms'])} |", flush=True)
    print()
    for n in sizes[:2]:
        _show_power(n, bases[n], args.trials)


def _show_power(n: int, base, trials: int) -> None:
    print(f"detection power at N={n:.0e} over {trials} seeds (caught / trials): | mutant | any "
          "check | its tensor's own check (1 direction) |", flush=True)
    for label, (anyc, own) in power(n, base, trials).items():
        print(f"| {label} | {anyc:.2f} | {own:.2f} |", flush=True)


if __name__ == "__main__":
    main()
