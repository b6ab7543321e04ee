"""Known discrepancies found by the sweep: data, matched by backend, op glob, check kind, dtype
and point.  A failed sweep result matching an entry is shown as ``known`` (``details["known"]``
holds the reason, ``details["upstream"]`` the upstream link where one exists) and does not fail
the run; every entry was confirmed by the triage's independent evidence (docs/sweep.md).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownFinding:
    backend: str
    op: str  # a glob over qualified names
    reason: str
    kinds: tuple[str, ...] = ("*",)
    dtypes: tuple[str, ...] = ("*",)
    points: tuple[str, ...] = ("*",)
    upstream: str = ""
    #: ``bug`` (a wrong derivative, verified standalone: tests/sweep/test_known.py pins it
    #: with a strict xfail) or ``by_design`` (the backend defines it so; the reason says why)
    nature: str = "bug"

    def details(self) -> dict[str, str]:
        """What a matching failed result's ``details`` get: ``known`` (the reason),
        ``known_nature`` and, where there is one, ``upstream``."""
        out = {"known": self.reason, "known_nature": self.nature}
        if self.upstream:
            out["upstream"] = self.upstream
        return out


def _any(value: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(value, g) for g in globs)


KNOWN: tuple[KnownFinding, ...] = (
    KnownFinding(
        "torch", "torch.linalg.det",
        "the tape backward of det at a singular matrix of rank n-1 is wrong (a standalone "
        "3x3 with two equal rows: .backward() returns all zeros, torch.func.grad and central "
        "differences return the adjugate, +-0.25); torch.func.vjp is right (docs/sweep.md)",
        kinds=("vjp", "eager_func"), points=("ties",),
        upstream="https://github.com/pytorch/pytorch/issues/104675"),
    KnownFinding(
        "torch", "torch.addcdiv",
        "reverse mode w.r.t. tensor2 is -inf where the derivative -value*tensor1/tensor2^2 is "
        "finite (tensor1 = 1e-300, tensor2 = 3e-300: -1.1e299; tensor2^2 underflows to 0); "
        "plain division gets it right", kinds=("vjp", "jvp", "fwd_rev", "eager_func"),
        points=("tiny", "subnormal")),
    KnownFinding(
        "torch", "torch.asinh",
        "the derivative 1/sqrt(1 + x^2) is 0 for |x| above ~1e154 (x^2 overflows) where "
        "1/|x| is representable (x = 1e200: 1e-200); jax.numpy.arcsinh does the same",
        kinds=("vjp", "jvp"), points=("huge",)),
    KnownFinding(
        "jax", "jax.[ln]*.a*sinh",  # jax.numpy.asinh/arcsinh, jax.lax.asinh
        "the derivative is 0 for |x| above ~1e154 (x^2 overflows) where 1/|x| is "
        "representable; torch.asinh does the same", kinds=("vjp", "jvp"), points=("huge",),
        upstream="https://github.com/jax-ml/jax/issues/40634"),
    KnownFinding(
        "torch", "torch*acosh",
        "the derivative 1/sqrt(x^2 - 1) is 0 for x above ~1e154 (x^2 overflows) where 1/x is "
        "representable (x = 1e200: 1e-200); jax.numpy.acosh does the same (found by the "
        "scaled check, confirmed by the element-level mpmath evidence)",
        kinds=("vjp", "jvp"), points=("huge",)),
    KnownFinding(
        "jax", "jax.[ln]*.a*cosh",  # jax.numpy.acosh/arccosh, jax.lax.acosh
        "the derivative is 0 for x above ~1e154 (x^2 overflows) where 1/x is representable; "
        "torch.acosh does the same", kinds=("vjp", "jvp"), points=("huge",),
        upstream="https://github.com/jax-ml/jax/issues/40634"),
    KnownFinding(
        "jax", "jax.numpy.sinc",
        "the derivative is -inf at |x| below ~1e-160 (x = 1e-300: the true value is "
        "-pi^2 x / 3 = -3.3e-300; 1e-100 and above are right)", kinds=("vjp", "jvp", "fwd_rev"),
        points=("tiny", "subnormal")),
    KnownFinding(
        "jax", "jax.*expm1",
        "the derivative is 0 at x = -100 where exp(-100) = 3.7e-44 is representable: it is "
        "computed from the saved output as expm1(x) + 1, which cancels to 0 once exp(x) is "
        "below eps (the mpmath check; FD and the projected checks cannot resolve it)",
        kinds=("vjp", "jvp"), points=("large",),
        upstream="https://github.com/jax-ml/jax/issues/39794"),
    KnownFinding(
        "jax", "jax.nn.[es]elu",
        "the derivative for x < 0 is 0 at x = -100 where alpha exp(-100) (3.7e-44 for elu) is "
        "representable: computed from the saved output, which cancels as for expm1; "
        "torch.nn.functional.elu gives 3.7e-44 (selu: jax-ml/jax#39796)",
        kinds=("vjp", "jvp"), points=("large",),
        upstream="https://github.com/jax-ml/jax/issues/39795"),
    KnownFinding(
        "torch", "torch*expm1",
        "the derivative is 0 at x = -100 where exp(-100) = 3.7e-44 is representable (computed "
        "as the saved output + 1, as in jax)", kinds=("vjp", "jvp"), points=("large",),
        upstream="https://github.com/pytorch/pytorch/issues/192406"),
    KnownFinding(
        "jax", "jax.scipy.special.spence",
        "the derivative log(x) / (1 - x) is off for small x: by 2e-5 at x = 1e-12, 8e-4 at "
        "1e-15 and by exactly -1 from about 1e-20 down to the smallest normal number "
        "(-709.396 at 2.2e-308, true -708.396); the forward is right",
        kinds=("vjp", "jvp"), points=("tiny", "subnormal")),
    KnownFinding(
        "jax", "jax.scipy.special.exp[i1]",
        "the forward never returns on an array that mixes a tiny and an O(1) argument "
        "(float64 expi([-1e-10, 1.0]), exp1([1e-113, 1.0]); float32 too), though each "
        "element alone evaluates at once: the sweep's worker hangs at the tiny band and is "
        "killed (a crash result with symptom hang)", kinds=("call",), points=("crash",),
        upstream="https://github.com/jax-ml/jax/issues/21760"),
    KnownFinding(
        "jax", "jax.scipy.special.gammainc*",
        "the forward's run time grows with the argument where a and x are close (float64 "
        "gammainc(1e15, 1e15): 2.7 s, returning 0.352 where P(a, a) -> 1/2; scipy: 0.5000000042) "
        "and gammainc(1e200, 1e200) never returns: the sweep's worker hangs at the huge band "
        "and is killed (a crash result with symptom hang); gammaincc at that point gives nan",
        kinds=("call",), points=("crash",)),
    KnownFinding(
        "jax", "jax.lax.igamma",
        "the primitive under jax.scipy.special.gammainc: igamma(1e200, 1e200) never returns "
        "(the sweep's worker is killed at the huge band)", kinds=("call",), points=("crash",)),
    KnownFinding(
        "torch", "torch.cholesky_inverse",
        "forward mode is wrong at an ordinary lower-triangular factor (4x4 with a dominant "
        "diagonal: the JVP is off by 40% of the FD's scale) while reverse mode is right: the "
        "JVP rule multiplies the inverse and the factor in the wrong order",
        kinds=("jvp", "fwd_rev", "jvp_of_vjp", "jvp_of_jvp"),
        upstream="https://github.com/pytorch/pytorch/issues/196682"),
    # by design: the backend defines these derivatives so (the failures are the sweep's
    # question, not a wrong rule); each reason says where that is defined
    KnownFinding(
        "torch", "torch.nn.functional.hardsigmoid",
        "the float64 derivative on (-3, 3) is 0.1666666716337204, the float32 rounding of "
        "1/6: 3.0e-8 relative off in float64 (the forward is right)",
        kinds=("vjp", "jvp", "fwd_rev", "eager_func", "rounding")),
    KnownFinding(
        "torch", "torch.linalg.cholesky_ex",
        "outside the documented domain: the forward reads only the lower triangle of a "
        "Hermitian input, while forward mode uses the whole tangent (right for symmetric "
        "tangents: 2e-10 off central differences; the sweep's directions move the upper "
        "triangle too). OpInfo's torch.linalg.cholesky sample symmetrizes its input, "
        "cholesky_ex's does not; the catalog records the same for cholesky "
        "(docs/known-discrepancies.md)", nature="by_design",
        kinds=("jvp", "fwd_rev", "jvp_of_vjp", "jvp_of_jvp")),
    KnownFinding(
        "torch", "torch.nextafter",
        "at a tie (x == y) torch defines the derivative w.r.t. x as 0, in reverse and forward "
        "mode ('the function is constant at that point', the rule proposed in pytorch PR "
        "#148820), where nextafter(x, y) = x + O(ulp) on both sides has slope 1 (jax's "
        "review of its own rule says 1); 1 off the ties. The sweep's points repeat values "
        "across the two inputs at most bands", nature="by_design",
        kinds=("vjp", "jvp", "fwd_rev", "eager_func", "rounding"),
        upstream="https://github.com/pytorch/pytorch/pull/148820"),
    KnownFinding(
        "torch", "torch.normal*",
        "sampling: torch defines the gradient of normal w.r.t. mean/std as zero "
        "(derivatives.yaml), while OpInfo's fixed seed makes the forward look deterministic "
        "to finite differences", nature="by_design"),
    KnownFinding(
        "torch", "torch.bernoulli", "sampling: no gradient w.r.t. p by design; FD steps leave "
        "p's domain [0, 1] at the zero point", nature="by_design"),
    KnownFinding(
        "torch", "torch.scatter_reduce.am*",
        "ties: torch splits the gradient of amax/amin evenly between equal maxima "
        "(documented for scatter_reduce with include_self), half of what one-sided FD sees",
        nature="by_design", points=("zero", "near_integer", "ties", "integer")),
    KnownFinding(
        "torch", "torch.polar",
        "outside the documented domain: abs must be non-negative; at negative abs the forward "
        "accepts it but the backward assumes abs >= 0 (OpInfo skips its gradient tests too)",
        nature="by_design"),
    KnownFinding(
        "torch", "torch.nn.functional.max_unpool*",
        "duplicate indices in OpInfo's samples: the forward keeps one writer, the gradient "
        "goes to all (OpInfo skips the gradient tests for that reason)", nature="by_design"),
    KnownFinding(
        "torch", "torch.as_strided_scatter",
        "overlapping memory in the sample: the result depends on write order, no derivative "
        "(OpInfo skips its gradient tests)", nature="by_design"),
)


def lookup(backend: str, op: str, kind: str, dtype: str, point: str) -> KnownFinding | None:
    """The first entry matching this result, or None."""
    for k in KNOWN:
        if (k.backend == backend and fnmatch.fnmatchcase(op, k.op) and _any(kind, k.kinds)
                and _any(dtype, k.dtypes) and _any(point, k.points)):
            return k
    return None
