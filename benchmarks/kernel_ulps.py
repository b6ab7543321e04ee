"""Measure the ``kernel_ulp`` check on correct kernels (docs/error-model.md section 4c, class d):

    python benchmarks/kernel_ulps.py --backend torch [--dtype bfloat16 ...] [--order 2]
        [--op GLOB ...] [--mode fwd]

Every catalog op the backend implements, in each dtype asked for that it declares (float16 and
bfloat16 where it declares float32), at its seeded sample point and its special points: the
``kernel_ulp`` verdicts of its forward, reverse-mode (and with ``--mode fwd`` forward-mode)
calls (:func:`gradcheck.numeric.kernel_ulps.kernel_checks`; the non-differentiable arguments
held fixed).  Printed: every failing verdict (the kernel, its inputs, got and the correctly
rounded value), then per dtype the number of kernel elements judged and, over them, the
distribution of the error each needs as a multiple of ``eps32 (|f| + sum |x_i df/dx_i|)``
beyond half the gap to the next value and the underflow term (``need``: what
``KERNEL_EPS32`` would have to be for that element to pass; at most 0 for a correctly rounded
element).

    python benchmarks/kernel_ulps.py --exhaustive bfloat16   (or float16, float32)

With ``--backend jax`` the same through jax's ops (:func:`_unary_jax`).  Every finite
float16/bfloat16 value of magnitude 1e-6..1e4 (float32: 200000
log-uniform samples) through each unary op of :data:`UNARY` and its backward (seeded normal
cotangents): per kernel (and the op it
ran in), how many elements are off and the worst one (its inputs, got, the correctly rounded
value, float64).  This is the measurement behind ``gradcheck.engines.torch.kernels.KNOWN`` and
``gradcheck.engines.jax.kernels.KNOWN`` (the kernels measured off, each citing its finding).
"""

from __future__ import annotations

import time
import warnings
from collections import defaultdict

import numpy as np
from _common import catalog_cases, catalog_parser, setup


def _unary():
    import torch

    F = torch.nn.functional
    ops = {n: getattr(torch, n) for n in [
        "sin", "cos", "tan", "exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sqrt",
        "rsqrt", "tanh", "sigmoid", "erf", "erfc", "erfinv", "lgamma", "digamma", "atan",
        "asin", "acos", "asinh", "acosh", "atanh", "sinh", "cosh", "reciprocal", "i0", "sinc",
        "square", "abs", "neg", "trunc"]}
    sp = torch.special
    ops.update({
        "i0e": sp.i0e, "i1": sp.i1, "i1e": sp.i1e, "logit": torch.logit, "ndtr": sp.ndtr,
        "ndtri": sp.ndtri, "log_ndtr": sp.log_ndtr, "erfcx": sp.erfcx, "entr": sp.entr,
        "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu,
        "softplus": F.softplus, "mish": F.mish, "hardswish": F.hardswish,
        "hardsigmoid": F.hardsigmoid, "elu": F.elu, "selu": F.selu, "celu": F.celu,
        "logsigmoid": F.logsigmoid, "relu6": F.relu6, "leaky_relu": F.leaky_relu,
        "softsign": F.softsign, "tanhshrink": F.tanhshrink,
        "xlogy": lambda t: torch.xlogy(t, t * t + 1), "pow3": lambda t: t ** 3,
        "pow_half": lambda t: t.abs() ** 0.5, "atan2": lambda t: torch.atan2(t, 1 - t),
        "hypot": lambda t: torch.hypot(t, 1 - t), "div": lambda t: t / (1.5 - t),
        "polygamma1": lambda t: torch.polygamma(1, t),
        "mvlgamma": lambda t: torch.mvlgamma(t.abs() + 2, 1)})
    return ops


def _unary_jax():
    import jax
    import jax.numpy as jnp

    nn, sp = jax.nn, jax.scipy.special
    ops = {n: getattr(jnp, n) for n in [
        "sin", "cos", "tan", "exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sqrt",
        "tanh", "arctan", "arcsin", "arccos", "arcsinh", "arccosh", "arctanh", "sinh", "cosh",
        "reciprocal", "sinc", "square", "abs", "cbrt"]}
    ops.update({
        "rsqrt": jax.lax.rsqrt, "sigmoid": nn.sigmoid, "erf": sp.erf, "erfc": sp.erfc,
        "erfinv": sp.erfinv, "lgamma": sp.gammaln, "digamma": sp.digamma, "i0e": sp.i0e,
        "i1e": sp.i1e, "logit": sp.logit, "ndtr": sp.ndtr, "ndtri": sp.ndtri,
        "log_ndtr": sp.log_ndtr, "entr": sp.entr,
        "gelu": lambda t: nn.gelu(t, approximate=False), "gelu_tanh": nn.gelu,
        "silu": nn.silu, "softplus": nn.softplus, "mish": nn.mish,
        "hard_swish": nn.hard_swish, "elu": nn.elu, "selu": nn.selu, "celu": nn.celu,
        "log_sigmoid": nn.log_sigmoid, "relu6": nn.relu6, "soft_sign": nn.soft_sign,
        "xlogy": lambda t: sp.xlogy(t, t * t + 1), "pow3": lambda t: t ** 3,
        "pow_half": lambda t: jnp.abs(t) ** 0.5, "atan2": lambda t: jnp.arctan2(t, 1 - t),
        "hypot": lambda t: jnp.hypot(t, 1 - t), "div": lambda t: t / (1.5 - t),
        "mul": lambda t: t * (1.5 - t), "add": lambda t: t + (1.5 - t * t)})
    return ops


def _values(dtype: str, rng: np.random.Generator) -> np.ndarray:
    import ml_dtypes

    if dtype in ("float16", "bfloat16"):
        t = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
        allv = np.arange(-32768, 32768).astype(np.int16).view(t)
        mag = np.abs(allv.astype(np.float64))
        return allv[np.isfinite(mag) & (mag < 1e4) & (mag > 1e-6)]
    m = 10 ** rng.uniform(-6, 4, size=200000) * rng.choice([-1, 1], size=200000)
    return m.astype(np.float32)


def _traces_torch(dtype: str, rng: np.random.Generator):
    import torch

    from gradcheck.engines.torch import kernels

    dt = getattr(torch, dtype)
    vals = _values(dtype, rng)
    allv = torch.from_numpy(vals.astype(np.float32)).to(dt)
    for name, f in _unary().items():
        x = allv.clone().requires_grad_(True)

        def run(f=f, x=x):
            y = f(x)
            g = torch.from_numpy(rng.normal(size=tuple(y.shape)).astype(np.float32)).to(dt)
            torch.autograd.grad(y, x, g, allow_unused=True)

        try:
            yield name, kernels.trace(run).calls
        except Exception as exc:
            print(f"{name}: {type(exc).__name__}: {str(exc)[:100]}")


def _traces_jax(dtype: str, rng: np.random.Generator):
    import jax
    import jax.numpy as jnp

    from gradcheck.engines.jax import kernels

    jax.config.update("jax_enable_x64", True)
    vals = _values(dtype, rng)
    x = jnp.asarray(vals)
    for name, f in _unary_jax().items():
        def run(x, g, f=f):
            y, pullback = jax.vjp(f, x)
            return y, pullback(g.astype(y.dtype))

        rec = kernels.Recorder()
        try:
            rec.run(run, x, jnp.asarray(rng.normal(size=x.shape).astype(vals.dtype)))
            yield name, rec.calls
        except Exception as exc:
            print(f"{name}: {type(exc).__name__}: {str(exc)[:100]}")


def exhaustive(dtype: str, backend: str) -> None:
    from gradcheck.numeric import kernel_ulps

    rng = np.random.default_rng(0)
    traces = (_traces_jax if backend == "jax" else _traces_torch)(dtype, rng)
    stats: dict = defaultdict(lambda: [0, 0, 0.0, None])
    for name, calls in traces:
        for c in calls:
            j = kernel_ulps.judge(c)
            bad = j.judged & (j.ratio > 1)
            s = stats[(c.op, name)]
            s[0] += int(j.judged.sum())
            s[1] += int(bad.sum())
            if bad.any():
                k = int(np.argmax(np.where(j.judged, j.ratio, 0)))
                u = float(kernel_ulps.ulps_between(c.got.ravel()[k:k + 1], j.want[k:k + 1],
                                                   c.dtype)[0])
                if s[3] is None or abs(u) > abs(s[2]):
                    s[2] = u
                    s[3] = ([float(o.ravel()[k]) for o in c.operands],
                            float(c.got.ravel()[k]), float(j.want[k]), float(j.exact[k]))
    for (op, name), (n, b, u, ex) in sorted(stats.items()):
        if b:
            print(f"{op} (in {name}): {b} of {n} off, worst {u:+g} ulps: inputs {ex[0]}, got "
                  f"{ex[1]!r}, correctly rounded {ex[2]!r}, float64 {ex[3]!r}")


def main() -> None:
    setup()
    from gradcheck.backends.kernels import KernelTrace
    from gradcheck.backends.registry import get_backend
    from gradcheck.core.results import Status
    from gradcheck.harness.runner import case_inputs
    from gradcheck.numeric import kernel_ulps
    from gradcheck.numeric.resolution import Subject

    p = catalog_parser()
    p.add_argument("--mode", action="append", default=["rev"])
    p.add_argument("--exhaustive", choices=["float32", "float16", "bfloat16"])
    a = p.parse_args()
    if a.exhaustive:
        warnings.simplefilter("ignore")
        exhaustive(a.exhaustive, a.backend)
        return
    dtypes = a.dtype or ["float32", "float16", "bfloat16"]
    backend = get_backend(a.backend)
    needs: dict[str, list[np.ndarray]] = defaultdict(list)
    runs, failed, errors = defaultdict(int), defaultdict(int), 0
    worst_ops: dict[str, list[tuple[float, str]]] = defaultdict(list)
    began = time.perf_counter()
    warnings.simplefilter("ignore")
    orig_trace = backend.trace_kernels

    def recording(run):  # the verdicts' traces, kept for the need distribution
        tr = orig_trace(run)
        if isinstance(tr, KernelTrace):
            for c in tr.calls:
                j = kernel_ulps.judge(c)
                with np.errstate(all="ignore"):
                    allowance = kernel_ulps.KERNEL_EPS32 * (
                        kernel_ulps.EPS32 * c.terms.ravel()
                        + kernel_ulps.TINY32 * kernel_ulps._size(c))
                    gap = j.allowed - allowance
                    tiny = kernel_ulps.KERNEL_EPS32 * kernel_ulps.TINY32 * kernel_ulps._size(c)
                    need = ((np.abs(c.got.ravel() - j.exact) - gap - tiny)
                            / (kernel_ulps.EPS32 * c.terms.ravel()))
                ok = j.judged & np.isfinite(need)
                needs[c.dtype].append(need[ok])
                if ok.any():
                    worst_ops[c.dtype].append((float(need[ok].max()), c.op))
        return tr

    backend.trace_kernels = recording  # type: ignore[method-assign]
    for spec, fn, dtype, case in catalog_cases(a.backend, backend, a.op, dtypes, a.order):
        args = [np.asarray(x) for x in case_inputs(case)]
        diff = list(spec.diff_args if spec.diff_args is not None
                    else range(len(args)))
        if not all(np.issubdtype(args[k].dtype, np.floating) for k in diff):
            continue

        native = getattr(backend, "to_native", None)

        def f(*xs, fn=fn, args=args, diff=diff, native=native):
            full = [native(x, "cpu") if native is not None else x for x in args]
            for k, x in zip(diff, xs, strict=True):
                full[k] = x
            return fn(*full)

        fixed_args = [x for k, x in enumerate(args) if k not in diff]
        if any(np.issubdtype(x.dtype, np.floating) for x in fixed_args):
            # fixed float arguments would stay float64 in a low-precision call
            continue
        try:
            vs = kernel_ulps.kernel_checks(Subject(backend, f), [args[k] for k in diff],
                                           dtype, a.order, case.seed, a.mode)
        except Exception as exc:
            errors += 1
            print(f"{case.id}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        runs[dtype] += 1
        for v in vs:
            if v.status is Status.FAILED:
                failed[dtype] += 1
                print(f"{case.id} order {a.order}: {v.message('kernel_ulp')[-700:]}")
    for dtype in dtypes:
        allneed = np.concatenate(needs[dtype]) if needs[dtype] else np.zeros(0)
        if not allneed.size:
            continue
        q = np.quantile(allneed, [0.5, 0.9, 0.99, 0.999, 1.0])
        top = sorted(worst_ops[dtype], reverse=True)[:8]
        print(f"{dtype}: {runs[dtype]} runs, {failed[dtype]} failing verdicts; "
              f"{allneed.size} kernel elements judged, need (x eps32 of the terms beyond half "
              f"a gap) median {q[0]:.3g} q90 {q[1]:.3g} q99 {q[2]:.3g} q99.9 {q[3]:.3g} max "
              f"{q[4]:.3g}; elements above {kernel_ulps.KERNEL_EPS32:g}: "
              f"{int((allneed > kernel_ulps.KERNEL_EPS32).sum())}; worst: "
              + ", ".join(f"{op} {n:.3g}" for n, op in top))
    print(f"{errors} errors ({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
