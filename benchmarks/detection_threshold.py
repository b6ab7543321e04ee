"""Detection threshold: which ``(1 + delta)`` backward errors each tool catches, in one run.

Run:  python benchmarks/detection_threshold.py [--seeds 5] [--programs 300] [--quick]

The custom op is ``y = x sin(x)`` with a hand-written backward scaled by ``1 + delta``:
a ``torch.autograd.Function`` for gradcheck (torch backend) and ``torch.autograd.gradcheck``
(slow and fast mode, default eps/atol/rtol), a ``jax.custom_vjp`` for
``jax.test_util.check_grads`` (reverse mode, default settings).  Inputs are standard normal
``(8, 8)`` arrays from seeds ``0..seeds-1``; a cell reads "caught k/seeds".  ``delta = 0`` is the
correct op: anything but 0 there is a false positive.

float32 is shown both ways: the backward wrong in every dtype, and wrong only when it computes in
float32 (correct float64 rule - only a low-precision rounding check can see it).

Then, on the random smooth programs of ``benchmarks/random_programs.py`` (numpy backend,
hand-written rules): false positives over ``--fp`` correct programs per dtype with the largest
discrepancy/allowed ratio per check, and detection rates of scaled backwards.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gradcheck  # noqa: E402
from benchmarks import random_programs as rp  # noqa: E402

DELTAS = (0.0, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9)


def torch_op(delta: float, only: str | None):
    import torch

    class XSin(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x * torch.sin(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            s = 1 + delta if only is None or x.dtype == getattr(torch, only) else 1.0
            return g * (torch.sin(x) + x * torch.cos(x)) * s

    return XSin.apply


def jax_op(delta: float, only: str | None):
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def xsin(x):
        return x * jnp.sin(x)

    def bwd(x, g):
        s = 1 + delta if only is None or x.dtype.name == only else 1.0
        return (g * (jnp.sin(x) + x * jnp.cos(x)) * jnp.asarray(s, x.dtype),)

    xsin.defvjp(lambda x: (xsin(x), x), bwd)
    return xsin


def caught_gradcheck(delta, only, x):
    return bool(gradcheck.check(torch_op(delta, only), x, backend="torch",
                                modes=("rev",)).failures)  # caught: a failure, not an abstention


def _torch_tool(fast: bool):
    def caught(delta, only, x):
        import torch

        t = torch.as_tensor(x).requires_grad_(True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ok = torch.autograd.gradcheck(torch_op(delta, only), (t,), fast_mode=fast,
                                              raise_exception=False)
            except Exception:  # noqa: BLE001 - any refusal counts as "not passed"
                ok = False
        return not ok

    return caught


def caught_check_grads(delta, only, x):
    import jax.numpy as jnp
    from jax.test_util import check_grads

    try:
        check_grads(jax_op(delta, only), (jnp.asarray(x),), order=1, modes=("rev",))
    except AssertionError:
        return True
    return False


TOOLS = {
    "gradcheck": caught_gradcheck,
    "torch slow": _torch_tool(False),
    "torch fast": _torch_tool(True),
    "jax check_grads": caught_check_grads,
}


def delta_table(dtype: str, only: str | None, seeds: int) -> None:
    xs = [np.random.default_rng(s).standard_normal((8, 8)).astype(dtype) for s in range(seeds)]
    title = f"{dtype}, backward wrong {'only in ' + only if only else 'in every dtype'}"
    print(f"\n{title}  (caught / {seeds} inputs)")
    print(f"{'delta':>8s} " + " ".join(f"{t:>16s}" for t in TOOLS))
    for delta in DELTAS:
        cells = []
        for caught in TOOLS.values():
            k = sum(bool(caught(delta, only, x)) for x in xs)
            cells.append(f"{k}/{seeds}" + (" FALSE POS." if delta == 0 and k else ""))
        print(f"{delta:8.0e} " + " ".join(f"{c:>16s}" for c in cells))


def false_positives(n: int) -> None:
    print(f"\nfalse positives: {n} random smooth programs per dtype, numpy backend, correct rules")
    for dtype in ("float64", "float32"):
        start = time.perf_counter()
        scan = rp.false_positive_scan(range(n), dtype)
        ratios = ", ".join(f"{k} {v:.3g}" for k, v in sorted(scan.max_ratio.items()))
        print(f"  {dtype}: {scan.checks} checks, {len(scan.not_passed)} not passed; "
              f"max discrepancy/allowed: {ratios}  ({time.perf_counter() - start:.0f}s)")
        for line in scan.not_passed[:3]:
            print(f"    {line[:200]}")


def program_detection(n: int) -> None:
    print(f"\ndetection on {n} random smooth programs (numpy backend, reverse mode)")
    for dtype, delta, only in (("float64", 1e-7, None), ("float64", 1e-8, None),
                               ("float32", 1e-4, None), ("float32", 1e-3, "float32"),
                               ("float32", 1e-4, "float32"), ("float32", 1e-5, "float32")):
        caught = 0
        for seed in range(n):
            prog = rp.random_program(seed)
            args = [a.astype(dtype) for a in prog.inputs]
            report = gradcheck.check(rp.numpy_function(prog, delta, only), *args,
                                     backend="numpy", modes=("rev",), seed=seed)
            caught += bool(report.failures)  # an abstention is not a catch
        where = f"only in {only}" if only else "in every dtype"
        print(f"  {dtype} delta {delta:.0e} wrong {where:14s}: caught {caught}/{n} "
              f"({100 * caught / n:.1f}%)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--programs", type=int, default=300)
    parser.add_argument("--fp", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="2 seeds, 50 programs, fp 200")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.programs, args.fp = 2, 50, 200
    gradcheck.get_backend("jax")  # x64 on before any jax array exists
    delta_table("float64", None, args.seeds)
    delta_table("float32", None, args.seeds)
    delta_table("float32", "float32", args.seeds)
    false_positives(args.fp)
    program_detection(args.programs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
