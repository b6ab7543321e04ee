"""Known discrepancies found by the sweep: data, :class:`~gradcheck.core.known.KnownDiscrepancy`
records matched by backend, op glob (``subject``: a glob over qualified names), check kind,
dtype and point.  A failed sweep result matching an entry is shown as ``known`` (its
:meth:`~gradcheck.core.known.KnownDiscrepancy.mark`, its ``known_as``: the reason, the nature
and the upstream link where one exists) and does not fail the run; every
entry was confirmed by the triage's independent evidence (docs/sweep.md).  An entry's
``nature`` is ``bug`` (a wrong derivative, verified standalone: tests/sweep/test_known.py pins
it with a strict xfail) or ``by_design`` (the backend defines it so; the reason says why).
"""

from __future__ import annotations

from gradcheck.core.known import KnownDiscrepancy, find

KNOWN: tuple[KnownDiscrepancy, ...] = (
    KnownDiscrepancy(
        "torch", subject="torch.linalg.det",
        reason="the tape backward of det at a singular matrix of rank n-1 is wrong (a standalone "
               "3x3 with two equal rows: .backward() returns all zeros, torch.func.grad and "
               "central differences return the adjugate, +-0.25); torch.func.vjp is right "
               "(docs/sweep.md)",
        checks=("vjp", "eager_func"), points=("ties",),
        link="https://github.com/pytorch/pytorch/issues/104675"),
    KnownDiscrepancy(
        "torch", subject="torch.addcdiv",
        reason="reverse mode w.r.t. tensor2 is -inf where the derivative -value*tensor1/tensor2^2 "
               "is finite (tensor1 = 1e-300, tensor2 = 3e-300: -1.1e299; tensor2^2 underflows to "
               "0); forward mode (torch.func.jvp) and plain division get it right "
               "(docs/upstream/torch/addcdiv_backward_inf_when_tensor2_squared_underflows.py)",
        checks=("vjp", "fwd_rev", "eager_func"), points=("tiny", "subnormal")),
    KnownDiscrepancy(
        "torch", subject="torch.asinh",
        reason="the derivative 1/sqrt(1 + x^2) is 0 for |x| above ~1e154 (x^2 overflows) where "
               "1/|x| is representable (x = 1e200: 1e-200); jax.numpy.arcsinh does the same",
        checks=("vjp", "jvp"), points=("huge",)),
    KnownDiscrepancy(
        "jax", subject="jax.[ln]*.a*sinh",  # jax.numpy.asinh/arcsinh, jax.lax.asinh
        reason="the derivative is 0 for |x| above ~1e154 (x^2 overflows) where 1/|x| is "
               "representable; torch.asinh does the same",
        checks=("vjp", "jvp"), points=("huge",), link="https://github.com/jax-ml/jax/issues/40634"),
    KnownDiscrepancy(
        "torch", subject="torch*acosh",
        reason="the derivative 1/sqrt(x^2 - 1) is 0 for x above ~1e154 (x^2 overflows) where 1/x "
               "is representable (x = 1e200: 1e-200); jax.numpy.acosh does the same (found by the "
               "scaled check, confirmed by the element-level mpmath evidence)",
        checks=("vjp", "jvp"), points=("huge",)),
    KnownDiscrepancy(
        "jax", subject="jax.[ln]*.a*cosh",  # jax.numpy.acosh/arccosh, jax.lax.acosh
        reason="the derivative is 0 for x above ~1e154 (x^2 overflows) where 1/x is "
               "representable; torch.acosh does the same",
        checks=("vjp", "jvp"), points=("huge",), link="https://github.com/jax-ml/jax/issues/40634"),
    KnownDiscrepancy(
        "jax", subject="jax.numpy.sinc",
        reason="the derivative is wrong for |x| below ~1e-4 (true value -pi^2 x / 3 "
               "(1 - pi^2 x^2 / 10 + ...)): -inf below ~1e-155 (x = 1e-300: true -3.3e-300), "
               "then 0.0 or huge positive values up to 1e-15 (1.4e134 at 1e-150, 0.0 at 1e-100), "
               "-1.5e-6 at 1e-10 (true -3.3e-10), 2.3e-7 relative off at 1e-5, 1.9e-9 at 1e-4; "
               "right to ~1e-11 from 1e-3 up (also jax-ml/jax#40629)",
        checks=("vjp", "jvp", "fwd_rev"), points=("tiny", "subnormal"),
        link="https://github.com/jax-ml/jax/issues/34139"),
    KnownDiscrepancy(
        "jax", subject="jax.*expm1",
        reason="the derivative is 0 at x = -100 where exp(-100) = 3.7e-44 is representable: it is "
               "computed from the saved output as expm1(x) + 1, which cancels to 0 once exp(x) is "
               "below eps (the mpmath check; FD and the projected checks cannot resolve it)",
        checks=("vjp", "jvp"), points=("large",),
        link="https://github.com/jax-ml/jax/issues/39794"),
    KnownDiscrepancy(
        "jax", subject="jax.nn.[es]elu",
        reason="the derivative for x < 0 is 0 at x = -100 where alpha exp(-100) (3.7e-44 for elu) "
               "is representable: computed from the saved output, which cancels as for expm1; "
               "torch.nn.functional.elu gives 3.7e-44 (selu: jax-ml/jax#39796)",
        checks=("vjp", "jvp"), points=("large",),
        link="https://github.com/jax-ml/jax/issues/39795"),
    KnownDiscrepancy(
        "torch", subject="torch*expm1",
        reason="the derivative is 0 at x = -100 where exp(-100) = 3.7e-44 is representable "
               "(computed as the saved output + 1, as in jax)",
        checks=("vjp", "jvp"), points=("large",),
        link="https://github.com/pytorch/pytorch/issues/192406"),
    KnownDiscrepancy(
        "jax", subject="jax.scipy.special.spence",
        reason="the derivative log(x) / (1 - x) is off for small x: by 2e-5 at x = 1e-12, 8e-4 at "
               "1e-15, 0.11 at 1e-16 and by exactly -1 from about 1e-17 down to the smallest "
               "normal number "
               "(-709.396 at 2.2e-308, true -708.396); the forward is right",
        checks=("vjp", "jvp"), points=("tiny", "subnormal")),
    KnownDiscrepancy(
        "jax", subject="jax.scipy.special.exp[i1]",
        reason="the forward never returns on an array that mixes a tiny and an O(1) argument "
               "(float64 expi([-1e-10, 1.0]), exp1([1e-113, 1.0]); float32 too), though each "
               "element alone evaluates at once: the sweep's worker hangs at the tiny band and is "
               "killed (a crash result with symptom hang)",
        checks=("call",), points=("crash",), link="https://github.com/jax-ml/jax/issues/21760"),
    KnownDiscrepancy(
        "jax", subject="jax.scipy.special.gammainc*",
        reason="the forward's run time grows with the argument where a and x are close (float64 "
               "gammainc(1e15, 1e15): 2.7 s, returning 0.352 where P(a, a) -> 1/2; scipy: "
               "0.5000000042; 0.50093 at 1e12, 0.4766 at 1e13; gammaincc(1e12, 1e12) = 8.40, "
               "above 1) and gammainc(1e200, 1e200) never returns: the sweep's worker hangs "
               "at the huge band and is killed (a crash result with symptom hang); gammaincc at "
               "that point gives nan",
        checks=("call",), points=("crash",)),
    KnownDiscrepancy(
        "jax", subject="jax.lax.igamma",
        reason="the primitive under jax.scipy.special.gammainc: igamma(1e200, 1e200) never "
               "returns (the sweep's worker is killed at the huge band)",
        checks=("call",), points=("crash",)),
    KnownDiscrepancy(
        "torch", subject="torch.cholesky_inverse",
        reason="forward mode is wrong at an ordinary lower-triangular factor (4x4 with a dominant "
               "diagonal: the JVP is off by 40% of the FD's scale) while reverse mode is right: "
               "the JVP rule multiplies the inverse and the factor in the wrong order",
        checks=("jvp", "fwd_rev", "jvp_of_vjp", "jvp_of_jvp"),
        link="https://github.com/pytorch/pytorch/issues/196682"),
    KnownDiscrepancy(
        "torch", subject="torch.nn.functional.hardsigmoid",
        reason="the float64 derivative on (-3, 3) is 0.1666666716337204, the float32 rounding of "
               "1/6 (a single-precision constant in the float64 backward): 3.0e-8 relative off, "
               "where the float64 forward is exact; in float32 the derivative is the correctly "
               "rounded 1/6, right",
        checks=("vjp", "jvp", "fwd_rev", "eager_func", "rounding")),
    KnownDiscrepancy(
        "jax", subject="jax.numpy.hypot",
        reason="the derivative w.r.t. the larger argument is r/b instead of b/r at (1e200, 3e200) "
               "(1.0541, true 0.9487; d/da is right), the partials are nan and -inf at "
               "(1e-200, 3e-200) (true 0.316, 0.949) and the Hessian at (1e200, 3e200) has "
               "d2/da db = +1.05e-201, d2/db2 = 0 (true -9.5e-202, 3.2e-202); torch.hypot is "
               "right (the catalog records the same, gradcheck/ops/binary.py)",
        checks=("vjp", "jvp", "fwd_rev", "vjp_of_vjp", "jvp_of_vjp", "jvp_of_jvp"),
        points=("huge", "tiny")),
    # by design: the backend defines these derivatives so (the failures are the sweep's
    # question, not a wrong rule); each reason says where that is defined
    KnownDiscrepancy(
        "torch", subject="torch.linalg.cholesky_ex",
        reason="outside the documented domain: the forward reads only the lower triangle of a "
               "Hermitian input, while forward mode uses the whole tangent (right for symmetric "
               "tangents: 2e-10 off central differences; the sweep's directions move the upper "
               "triangle too). OpInfo's torch.linalg.cholesky sample symmetrizes its input, "
               "cholesky_ex's does not; the catalog records the same for cholesky "
               "(docs/known-discrepancies.md)",
        nature="by_design", checks=("jvp", "fwd_rev", "jvp_of_vjp", "jvp_of_jvp")),
    KnownDiscrepancy(
        "torch", subject="torch.linalg.cholesky_ex",
        reason="outside the domain: the tiny band fills the sample with values of both signs "
               "from 1e-308 to 1e-16, matrices that are not positive definite (negative "
               "diagonals: info = 1, the factorization stops at the first pivot and returns "
               "the partial factor); reverse mode gives inf or nan there against finite "
               "differences of ~1e-58, which a NaN ratio let pass before the shared verdict "
               "(docs/sweep.md, 'Discovery before and after the shared resolution checks')",
        nature="by_design", checks=("vjp", "vjp_of_vjp"), points=("tiny",)),
    KnownDiscrepancy(
        "torch", subject="torch.nextafter",
        reason="at a tie (x == y) torch defines the derivative w.r.t. x as 0, in reverse and "
               "forward mode ('the function is constant at that point', the rule proposed in "
               "pytorch PR #148820), where nextafter(x, y) = x + O(ulp) on both sides has slope 1 "
               "(jax's review of its own rule says 1); 1 off the ties. The sweep's points repeat "
               "values across the two inputs at most bands",
        nature="by_design", checks=("vjp", "jvp", "fwd_rev", "eager_func", "rounding"),
        link="https://github.com/pytorch/pytorch/pull/148820"),
    KnownDiscrepancy(
        "torch", subject="torch.normal*",
        reason="sampling: torch defines the gradient of normal w.r.t. mean/std as zero "
               "(derivatives.yaml), while OpInfo's fixed seed makes the forward look "
               "deterministic to finite differences",
        nature="by_design"),
    KnownDiscrepancy(
        "torch", subject="torch.bernoulli",
        reason="sampling: no gradient w.r.t. p by design; FD steps leave p's domain [0, 1] at the "
               "zero point",
        nature="by_design"),
    KnownDiscrepancy(
        "torch", subject="torch.scatter_reduce.am*",
        reason="ties: torch splits the gradient of amax/amin evenly between equal maxima "
               "(documented for scatter_reduce with include_self), half of what one-sided FD sees",
        nature="by_design", points=("zero", "near_integer", "ties", "integer")),
    KnownDiscrepancy(
        "torch", subject="torch.polar",
        reason="outside the documented domain: abs must be non-negative; at negative abs the "
               "forward accepts it but the backward assumes abs >= 0 (OpInfo skips its gradient "
               "tests too)",
        nature="by_design"),
    KnownDiscrepancy(
        "torch", subject="torch.nn.functional.max_unpool*",
        reason="duplicate indices in OpInfo's samples: the forward keeps one writer, the gradient "
               "goes to all (OpInfo skips the gradient tests for that reason)",
        nature="by_design"),
    KnownDiscrepancy(
        "torch", subject="torch.as_strided_scatter",
        reason="overlapping memory in the sample: the result depends on write order, no "
               "derivative (OpInfo skips its gradient tests)",
        nature="by_design"),
)


def lookup(backend: str, op: str, kind: str, dtype: str,
           point: str) -> KnownDiscrepancy | None:
    """The first entry matching this result, or None."""
    return find(KNOWN, backend, subject=op, check=kind, dtype=dtype, point=point)
