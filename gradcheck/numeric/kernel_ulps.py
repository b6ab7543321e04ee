"""The ``kernel_ulp`` check: each elementwise kernel a function runs below float64, judged on its
own inputs against the correctly rounded float64 value (docs/error-model.md section 4c, class d).

A whole chain of low-precision operations rounds at every step, so a user's composite in
bfloat16 is many ulps from its correctly rounded float64 value while every step is right; the
``ulp`` check (:func:`gradcheck.numeric.resolution.ulp_checks`) therefore allows
:data:`~gradcheck.numeric.resolution.ULP_BOUND` units of the whole derivative.  One *kernel*
rounds once: a correct float16/bfloat16 kernel computes in float32 from its inputs (which
float32 holds exactly) and rounds the float32 result to its dtype; a correct float32 kernel
computes to within a few float32 ulps (libm-class accuracy) and returns that.  So where the
adapter can trace its engine's kernels (:meth:`gradcheck.backends.base.Backend.trace_kernels`,
:class:`gradcheck.backends.kernels.KernelCall`), every element of every elementwise kernel's
output is judged on the kernel's own inputs:

    |got - exact| <= A + g / 2,
    A = KERNEL_EPS32 * (eps32 * (|f| + sum_i |x_i df/dx_i|) + tiny32 * (1 + sum_i |x_i|))

``exact`` the same op in float64 on the same inputs, ``A`` the float32 computation's error
(a backward-stable kernel returns ``f(x (1 + a)) (1 + b)`` with ``|a|, |b|`` a few ``eps32``:
the terms are the op's own conditioning, so a kernel near a zero of ``f`` or with cancellation
gets what its float32 arithmetic can do; an intermediate below the smallest normal float32
``tiny32`` is off by up to ``tiny32``, carried by factors of the inputs' size), and ``g`` the
gap between ``got`` and its neighbour in the dtype towards ``exact``: ``got`` is the correct
rounding of some value within ``A`` of ``exact``.  Where ``A`` is far below the dtype's ulp
(bfloat16 and float16 outputs: ``2^-21`` relative against ``2^-8`` and ``2^-11`` per ulp) only
the correctly rounded value passes, or either neighbour where the exact value is within ``A``
of a rounding midpoint: a kernel 1 ulp off is caught at every element whose exact value is not
that close to a midpoint.  A NaN where the exact value is not NaN fails; an element whose exact
value is NaN, or whose terms cannot be estimated (not finite), is not judged, nor is one where
the float64 op is not smooth at the inputs' scale (its second difference at ``x (1 +- 2^-20)``
above its first difference plus ``A``: a pole or a jump, where float64's own value is no
reference).  Ops the adapter does not trace as elementwise kernels (reductions, matrix
products; those after :data:`gradcheck.backends.kernels.ELEMENT_BUDGET` elements in one trace)
are not judged; the verdict names them.  The kernels each engine's table records as measured
off the correctly rounded value (:data:`gradcheck.engines.torch.kernels.KNOWN`,
:data:`gradcheck.engines.jax.kernels.KNOWN`: torch's bfloat16 ``rsqrt``, XLA's float16
``asinh``) are judged too; where one fails and no other kernel does, the verdict fails as
that known finding of the engine (its ``known`` mark: the report shows it as known, and the
message says which kernel, how many ulps, and where the finding is recorded).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradcheck.backends.kernels import KernelCall, KernelTrace
from gradcheck.core.dtypes import numpy_dtype
from gradcheck.core.results import Status
from gradcheck.core.taxonomy import CheckKind
from gradcheck.numeric.resolution import ComponentVerdict, Subject, rounded

#: the dtypes whose kernels are judged (float32 too: a float32 kernel's own error is
#: KERNEL_EPS32 eps32 of its terms, which a kernel some ulps off exceeds)
KERNEL_DTYPES = ("float32", "float16", "bfloat16")
#: the error of a correct float32 kernel computation, in units of eps32 of the op's terms
#: (``|f| + sum_i |x_i df/dx_i|``): libm-class float32 kernels are within 1-4 ulps (Sleef's
#: u10 functions 1.0 ulp, u35 3.5 ulps); measured on the catalog ops in float32, float16 and
#: bfloat16 (``benchmarks/kernel_ulps.py``, docs/error-model.md section 4c)
KERNEL_EPS32 = 4.0
EPS32 = 2.0 ** -23
#: the smallest normal float32: an intermediate below it is off by up to this much (a
#: subnormal, or flushed to zero), carried to the output by factors of the inputs' size
#: (``silu(-89) = x sigmoid(x)``)
TINY32 = 2.0 ** -126
_BITS = {"float32": (np.int32, 0x7FFFFFFF), "float16": (np.int16, 0x7FFF),
         "bfloat16": (np.int16, 0x7FFF)}


@dataclass(frozen=True)
class Judged:
    """One kernel call's elements: the ratio ``|got - exact| / allowed`` (inf for a NaN or an
    infinity where neither the exact value nor its allowance gives one), the allowed error,
    the correctly rounded value, and which elements are judged."""

    call: KernelCall
    ratio: np.ndarray
    allowed: np.ndarray
    want: np.ndarray
    judged: np.ndarray
    exact: np.ndarray  # the reference each element was judged against


def ulps_between(got: np.ndarray, want: np.ndarray, dtype: str) -> np.ndarray:
    """Signed count of ``dtype`` numbers from ``want`` to ``got`` (both representable)."""
    t = numpy_dtype(dtype)
    it, mask = _BITS[dtype]

    def ordinal(a: np.ndarray) -> np.ndarray:
        bits = np.asarray(a, dtype=np.float64).astype(t).view(it).astype(np.int64)
        mag = bits & mask
        return np.where(bits < 0, -mag, mag)

    return ordinal(got) - ordinal(want)


def judge(call: KernelCall) -> Judged:
    """The elements of one kernel call against its float64 counterpart (module docstring);
    where the call has a second reference (:attr:`KernelCall.cast`: its wider inputs rounded
    to the output dtype first), each element against the closer of the two."""
    first = _judge(call, call.exact.ravel())
    if call.cast is None:
        return first
    other = _judge(call, call.cast.ravel())
    better = other.ratio < first.ratio
    return Judged(call, np.where(better, other.ratio, first.ratio),
                  np.where(better, other.allowed, first.allowed),
                  np.where(better, other.want, first.want), first.judged & other.judged,
                  np.where(better, other.exact, first.exact))


def _size(call: KernelCall) -> np.ndarray:
    """``1 + sum_i |x_i|`` per element: what an intermediate's absolute underflow is carried
    by."""
    size = np.ones(call.got.size)
    for o in call.operands:
        size = size + np.abs(np.asarray(o, dtype=np.float64).ravel())
    return size


def _judge(call: KernelCall, exact: np.ndarray) -> Judged:
    t = numpy_dtype(call.dtype)
    got = call.got.ravel()
    with np.errstate(all="ignore"):
        allowance = KERNEL_EPS32 * (EPS32 * call.terms.ravel() + TINY32 * _size(call))
        want = rounded(exact, call.dtype)
        toward = np.where(exact > got, np.inf, -np.inf).astype(t)
        gap = np.abs(np.nextafter(got.astype(t), toward).astype(np.float64) - got)
        allowed = allowance + gap / 2
        diff = np.abs(got - exact)
        ratio = np.where(diff == 0, 0.0, diff / allowed)
        # an infinity is right where it is the rounding of a value within the allowance
        inf_ok = (np.isinf(got) & ((rounded(exact + allowance, call.dtype) == got)
                                   | (rounded(exact - allowance, call.dtype) == got)))
        ratio = np.where(np.isinf(got) | np.isinf(exact),
                         np.where((got == exact) | inf_ok, 0.0, np.inf), ratio)
        ratio = np.where(np.isnan(got), np.inf, ratio)
        # the float64 values at x (1 +- 2^-20) are those of a smooth function (a second
        # difference within the first and the allowance): not at a pole, where float64's own
        # value is as far off as the kernel's (trigamma at -1: 6.6e32 in float64)
        smooth = call.second.ravel() <= call.first.ravel() + allowance
    judged = ~np.isnan(exact) & ((np.isfinite(allowance) & smooth) | np.isinf(exact))
    return Judged(call, ratio, allowed, want, judged, exact)


def verdict(trace: KernelTrace, path: str, order: int, dtype: str) -> ComponentVerdict:
    """One verdict over every kernel ``trace`` holds: the worst element of any kernel, a kernel
    the engine's table knows to be off (:attr:`KernelCall.known`) only where no other fails;
    failed on such a kernel, the verdict carries its known mark (``extra["known"]``)."""
    items = [judge(c) for c in trace.calls]
    total = sum(int(j.judged.size) for j in items)
    n_judged = sum(int(j.judged.sum()) for j in items)
    kernels = sorted({j.call.op for j in items if j.judged.any()})
    untraced = [f"{op} x{count}" for op, count in trace.untraced]
    what = (f"each elementwise kernel's output ({path}) vs the same op in float64 on the same "
            f"inputs, correctly rounded; allowed |got - exact| <= {KERNEL_EPS32:g} (eps32 (|f| "
            "+ sum_i |x_i df/dx_i|) + tiny32 (1 + sum_i |x_i|)) + half the gap to the next "
            "value in the output dtype (a float32 computation, then one rounding)")
    extra: dict[str, Any] = {"kernel_path": path, "kernels": kernels, "dtype": dtype,
                             "not_judged": untraced}
    if untraced:
        what += f"; not judged (not elementwise kernels): {', '.join(untraced)}"
    if n_judged == 0:
        return ComponentVerdict(CheckKind.ROUNDING, order, "kernel_ulp", Status.INCONCLUSIVE,
                                what, 0, total, extra=extra)
    # a kernel the engine's table knows to be off fails only where every other kernel passes:
    # a new defect is never hidden behind a known one
    fresh = _worst([j for j in items if j.call.known is None])
    known = _worst([j for j in items if j.call.known is not None])
    worst, k, ratio = fresh if fresh is not None and fresh[2] > 1.0 else max(
        (w for w in (fresh, known) if w is not None), key=lambda w: w[2])
    call = worst.call
    got, exact = float(call.got.ravel()[k]), float(worst.exact[k])
    status = Status.FAILED if ratio > 1.0 else Status.PASSED
    want = float(worst.want[k])
    ulps = (float(ulps_between(np.array([got]), np.array([want]), call.dtype)[0])
            if np.isfinite(got) and np.isfinite(want) else float("inf"))
    operands = [float(o.ravel()[k]) for o in call.operands]
    extra.update({"op": call.op, "node": call.node, "kernel_dtype": call.dtype, "element": k,
                  "operands": operands, "correctly_rounded": want, "ulps": ulps,
                  "allowance": float(KERNEL_EPS32 * (EPS32 * call.terms.ravel()[k]
                                                     + TINY32 * _size(call)[k])),
                  "allowance_source": f"a float32 computation within {KERNEL_EPS32:g} eps32 of "
                                      "the op's terms, rounded once to the output dtype"})
    if call.reproduce is not None:
        extra["reproducer"] = call.reproduce(k)
    if status is Status.FAILED:
        what += (f"; worst: kernel {call.op} ({call.node}) in {call.dtype}, output element {k}"
                 f" of inputs {operands}: got {got!r}, correctly rounded {want!r} ({ulps:+g} "
                 f"ulps), float64 {exact!r}")
        if "reproducer" in extra:
            what += f"; reproduce: {extra['reproducer']}"
        if call.known is not None:  # the engine's defect: reported as its known finding
            mark = call.known.mark(call.op, call.dtype)
            what += f"; known: {mark.reason}"
            extra.update(mark.to_dict())
    d = abs(got - exact) if np.isfinite(got) else float("inf")
    return ComponentVerdict(CheckKind.ROUNDING, order, "kernel_ulp", status, what, n_judged,
                            total, k, got, exact, d, d / abs(exact) if exact else None,
                            float(worst.allowed[k]), ratio, extra)


def _worst(items: Sequence[Judged]) -> tuple[Judged, int, float] | None:
    """The judged element with the largest ratio over ``items`` (None where none is judged)."""
    best: tuple[Judged, int, float] | None = None
    for j in items:
        if not j.judged.any():
            continue
        ratios = np.where(j.judged, j.ratio, 0.0)
        k = int(np.argmax(ratios))
        if best is None or float(ratios[k]) > best[2]:
            best = (j, k, float(ratios[k]))
    return best


def kernel_checks(subject: Subject, arrays: Sequence[np.ndarray], dtype: str, order: int,
                  seed: int, modes: Sequence[str]) -> list[ComponentVerdict]:
    """The ``kernel_ulp`` verdicts of ``subject`` at ``arrays`` (rounded to ``dtype``): order 1
    its forward, reverse-mode and (with ``"fwd"`` in ``modes``) forward-mode calls, order 2 the
    reverse and forward mode of its VJP function; none where the adapter cannot trace kernels
    or ``dtype`` is not in :data:`KERNEL_DTYPES`."""
    backend, device = subject.backend, subject.device
    if dtype not in KERNEL_DTYPES:
        return []
    t = numpy_dtype(dtype)
    rng = np.random.default_rng(seed + 35)

    def normal(shape: tuple[int, ...]) -> np.ndarray:
        return rounded(rng.normal(size=shape), dtype).astype(t)

    xs = [rounded(a, dtype).astype(t) for a in arrays]
    n = len(xs)
    diff = list(range(n))
    fn: Callable[..., Any] = subject.fn
    fixed: list[np.ndarray] = []
    if order == 2:
        fixed = [normal(np.shape(o)) for o in backend.evaluate(subject.fn, xs, device)]
        fn = backend.vjp_function(subject.fn, diff, n)
    args = [*xs, *fixed]
    cots = [normal(np.shape(o)) for o in backend.evaluate(fn, args, device)]
    names = ("forward", "reverse mode", "forward mode") if order == 1 else (
        None, "reverse-over-reverse", "forward-over-reverse")
    paths: list[tuple[str, Callable[[], Any]]] = []
    if names[0] is not None:
        paths.append((names[0], lambda: backend.evaluate(fn, args, device)))
    paths.append((names[1], lambda: backend.vjp(fn, args, diff, cots, device)))
    if "fwd" in modes:
        tans = [normal(np.shape(x)) for x in xs]
        paths.append((names[2], lambda: backend.jvp(fn, args, diff, tans, device)))
    out = []
    for path, run in paths:
        trace = backend.trace_kernels(run)
        if not isinstance(trace, KernelTrace):
            return []
        out.append(verdict(trace, path, order, dtype))
    return out
