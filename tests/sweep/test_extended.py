"""Extended-precision derivatives (gradcheck/oracle/extended.py) and the element-level mpmath
evidence of the triage: a derivative far below the function's value (expm1'(-100) = 3.7e-44
next to expm1(-100) = -1) needs the precision raised, not 30 fixed digits; with it, the
triage confirms a rule that returns 0 there, and passes the correct one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gradcheck.core.results import CheckResult, Status
from gradcheck.oracle.extended import RULES, derivative, value
from gradcheck.sweep import Op
from gradcheck.sweep.evidence import mpmath_evidence
from gradcheck.sweep.inventory import ELEMENTWISE
from gradcheck.sweep.triage import classify
from tests.support.torch_rules import sin_with_jvp

mpmath = pytest.importorskip("mpmath")
torch = pytest.importorskip("torch")


def test_fixed_thirty_digits_lose_a_derivative_far_below_the_value():
    """The old way (30 digits, mpmath's own absolute step) is wrong at expm1(-100): this is
    the case the raised precision exists for."""
    with mpmath.workdps(30):
        fixed = float(mpmath.diff(lambda t: mpmath.expm1(t), mpmath.mpf(-100.0)))
    assert fixed != pytest.approx(math.exp(-100), rel=1e-3, abs=0)
    d = derivative(RULES["expm1"], -100.0)
    assert d is not None and d.value == pytest.approx(math.exp(-100), rel=1e-15, abs=0)
    assert d.bits > 100 and d.error <= 2.0 ** -60 * abs(d.value)
    d2 = derivative(RULES["expm1"], -100.0, 2)
    assert d2 is not None and d2.value == pytest.approx(math.exp(-100), rel=1e-15, abs=0)


@pytest.mark.parametrize(("leaf", "x", "order", "want"), [
    ("spence", 1e-25, 1, math.log(1e-25)),             # Li2(1 - x): the argument cancels
    ("sin", 1e100, 1, float(mpmath.cos(mpmath.mpf(1e100)))),  # an absolute step, 433 bits
    ("sin", 1e-300, 1, 1.0),                           # a relative step: no 300 extra digits
    ("log", 1e-300, 2, None),                          # f'' = -1e600 overflows: abstains
    ("exp", -720.0, 1, math.exp(-720)),                # subnormal, exact
    ("atanh", 0.9999999, 2, 2 * 0.9999999 / (1 - 0.9999999 ** 2) ** 2),
])
def test_derivative_at_hard_points(leaf, x, order, want):
    d = derivative(RULES[leaf], x, order)
    if want is None:
        assert d is None
    else:
        assert d is not None and d.value == pytest.approx(want, rel=1e-9, abs=0), d


def test_derivative_abstains_outside_the_domain_and_without_budget():
    assert derivative(RULES["sqrt"], 0.0) is None     # sqrt(-h) is complex
    assert derivative(RULES["log"], -1.0) is None
    assert derivative(RULES["expm1"], -100.0, budget_s=0.0) is None
    assert value(RULES["erfcx"], -27.0) is None        # exp(729) overflows float64
    assert value(RULES["ndtri"], 0.3) == pytest.approx(-0.5244005127080407, rel=1e-14)


def _expm1(zero_below: float = -math.inf, nan_above: float = math.inf):
    """expm1 whose backward is ``exp(x)``, but 0 below ``zero_below`` (the cancellation of
    ``(expm1(x) + 1)`` taken to its end) and nan above ``nan_above``."""

    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.expm1(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            d = torch.where(x < zero_below, torch.zeros_like(x), torch.exp(x))
            return g * torch.where(x > nan_above, torch.nan, d)

    return F.apply


X = np.array([-100.0, 0.3, -0.7, 1.2, 0.05, -2.0])


def _op(fn, leaf="expm1"):
    return Op("mutant.expm1", "torch", fn, (X.copy(),), family=ELEMENTWISE, fwd=False,
              order2=False, leaf=leaf)


def _finding(actual, expected):
    return CheckResult(kind="vjp", status=Status.FAILED, backend="torch", dtype="float64",
                       name="mutant.expm1", actual=actual, expected=expected)


def test_element_level_evidence_confirms_the_zero_and_passes_the_rule():
    """Projected FD, and a check that passed the same reverse mode, both call the mutant
    right (3.7e-44 is invisible beside O(1) components); the mpmath evidence, whose forward
    matches the op's, sees the element and decides."""
    mutant = mpmath_evidence(_op(_expm1(-50.0)), [X])
    right = mpmath_evidence(_op(_expm1()), [X])
    assert mutant["forward_matches"] and right["forward_matches"]
    assert mutant["max_relative_error"] == 1.0 and mutant["at"] == -100.0
    assert right["max_relative_error"] <= 1e-14
    projected = {"fd": {"fd_families_agree": True, "ad_vs_fd": 1e-14}}
    passed_beside = [CheckResult(kind="vjp", status=Status.PASSED, backend="torch",
                                 dtype="float64", name="mutant.expm1",
                                 details={"sweep": {"oracle": "scaled"}})]
    finding = _finding(0.0, 3.7e-44)
    assert classify(finding, {**projected, "mpmath": mutant}, passed_beside) == "confirmed"
    assert classify(finding, {**projected, "mpmath": right}, passed_beside) == "false_alarm"
    # without the element-level evidence the projected sources call the mutant right
    assert classify(finding, projected, passed_beside) == "false_alarm"


def test_a_mapping_whose_forward_differs_does_not_decide():
    """Under the leaf name ``gelu``, the tanh approximation is a different function: mpmath's
    exact gelu disagrees with its derivative, but its forward does not match, so it is one
    vote among the others, not the decision."""
    x = np.array([0.3, -0.7, 1.2, -2.0])
    op = Op("tanh.gelu", "torch", lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
            (x,), family=ELEMENTWISE, fwd=False, order2=False, leaf="gelu")
    ev = mpmath_evidence(op, [x])
    assert not ev["forward_matches"] and ev["max_relative_error"] > 1e-8
    projected = {"fd": {"fd_families_agree": True, "ad_vs_fd": 1e-13}}
    assert classify(_finding(0.5, 0.5000001), {**projected, "mpmath": ev}, []) == "unresolved"


def test_the_check_does_not_judge_an_op_with_other_fixed_arguments():
    """OpInfo's softplus sample fixes ``beta``: mpmath's softplus is another function there.
    The check compares forwards first and judges nothing (it failed softplus'' by 0.5 at 0
    before); plain softplus is judged and passes at both orders."""
    from gradcheck.sweep.resolution import mpmath_checks

    x = np.array([0.0, 0.3, -1.2, 2.0])
    beta3 = Op("softplus.beta3", "torch", lambda t: torch.nn.functional.softplus(t, beta=3),
               (x,), family=ELEMENTWISE, fwd=False, order2=True, leaf="softplus")
    plain = Op("torch.nn.functional.softplus", "torch", torch.nn.functional.softplus, (x,),
               family=ELEMENTWISE, fwd=False, order2=True, leaf="softplus")
    for order in (1, 2):
        assert mpmath_checks(beta3, [x], order, 1) == []
        judged = mpmath_checks(plain, [x], order, 1)
        assert judged and all(r.status is Status.PASSED for r in judged), judged


def test_order_two_evidence_is_element_level_too():
    """tanh''(-100) = 1.1e-86 is representable; torch's rule, from the saved output, gives 0.
    The order-2 evidence sees it (the triage had only projected sources at order 2); exp'' is
    right everywhere."""
    x = np.array([-100.0, 0.3, -0.7, 1.2])
    tanh = Op("torch.tanh", "torch", torch.tanh, (x,), family=ELEMENTWISE, fwd=False,
              order2=True, leaf="tanh")
    exp = Op("torch.exp", "torch", torch.exp, (x,), family=ELEMENTWISE, fwd=False,
             order2=True, leaf="exp")
    wrong = mpmath_evidence(tanh, [x], 2)
    right = mpmath_evidence(exp, [x], 2)
    assert wrong["forward_matches"] and wrong["order"] == 2
    assert wrong["max_relative_error"] == 1.0 and wrong["at"] == -100.0
    assert wrong["mpmath"] == pytest.approx(8 * math.exp(-200), rel=1e-6, abs=0)
    assert right["forward_matches"] and right["max_relative_error"] <= 1e-14


def test_a_zero_where_a_normal_number_is_due_is_wrong_even_near_underflow():
    """asinh'(1e302) = 1e-302 is a normal float64: a rule that gives 0 there is wrong (the
    evidence once excused every value below 1e-300); below the smallest normal number the
    absolute rounding excuses it (i0e'(1e300) underflows)."""
    x = np.array([1e302, 0.5])

    class Zero(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return torch.asinh(t)

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return g * torch.where(t.abs() > 1e154, torch.zeros_like(t),
                                   1 / torch.sqrt(1 + t * t))

    ev = mpmath_evidence(Op("zero.asinh", "torch", Zero.apply, (x,), family=ELEMENTWISE,
                            fwd=False, order2=False, leaf="asinh"), [x])
    assert ev["forward_matches"] and ev["max_relative_error"] == 1.0 and ev["at"] == 1e302
    y = np.array([1e300, 0.5])
    i0e = mpmath_evidence(Op("torch.special.i0e", "torch", torch.special.i0e, (y,),
                             family=ELEMENTWISE, fwd=False, order2=False, leaf="i0e"), [y])
    assert i0e["max_relative_error"] <= 1e-14


def test_reclassifying_a_stream_keeps_an_overruled_call_a_false_alarm():
    """One check call of the default sweep, as stored (jax.lax.atan2 at the `small` band):
    gradcheck.check failed the VJP and the JVP against the same FD values, the scaled check
    passed both, the evidence says right, so the sweep overruled all four (stored as
    inconclusive).  Classifying the stored stream again must give the same answer; it gave
    `confirmed` for the JVPs when the overruled VJPs were read as not failed."""
    from pathlib import Path

    from gradcheck.sweep.triage import reclassified

    path = Path(__file__).resolve().parents[1] / "support" / "data" / "sweep_overruled_call.jsonl"
    call = [CheckResult.from_json(line) for line in path.read_text().splitlines() if line]
    overruled = [r for r in call if r.details.get("sweep", {}).get("overruled")]
    assert {r.kind for r in overruled} == {"vjp", "jvp"} and len(overruled) == 4
    again = reclassified(call)
    classes = {(r.kind, r.input_index): r.details["triage"]["class"] for r in again
               if "triage" in r.details}
    assert set(classes.values()) == {"false_alarm"}, classes


def test_a_nan_past_the_elements_mpmath_judges_is_counted_as_unjudged():
    """The evidence judges the first ``limit`` elements; a nan derivative after them (jax's
    mish at 1e300, element 70 of 100) is counted, so its agreement elsewhere decides nothing."""
    x = np.array([0.3, -0.7, 0.05, 1.2])
    op = Op("twin.expm1", "torch", _expm1(nan_above=1.0), (x,), family=ELEMENTWISE, fwd=False,
            order2=False, leaf="expm1")
    ev = mpmath_evidence(op, [x], limit=3)
    assert ev["elements"] == 3 and ev["max_relative_error"] <= 1e-14
    assert ev["unjudged_nonfinite"] == 1
    assert mpmath_evidence(op, [x[:3]])["unjudged_nonfinite"] == 0


def test_the_fd_evidence_judges_the_forward_path_too():
    """A forward-mode finding is judged on forward mode along the evidence's direction: a
    rule off by 1e-4 there is seen, its twin agrees with the FD as reverse mode does."""
    from gradcheck.sweep.evidence import fd_evidence

    x = np.array([0.3, -0.7, 1.2, 2.0])
    for scale, off in ((1.0, False), (1 + 1e-4, True)):
        op = Op("twin.sin", "torch", sin_with_jvp(scale), (x,), family=ELEMENTWISE,
                fwd=True, order2=False)
        ev = fd_evidence(op, [x], seed=3)
        assert ev["fd_families_agree"] and ev["ad_vs_fd"] <= 1e-9
        assert (ev["fwd_vs_fd"] > 1e-6) is off, ev
