"""The training-step checks over the model protocol (gradcheck.model_audit.remote_step), run
against an in-process fake peer (remote_step_fake.py): every deliberately broken step is caught
by its check with its factor named, and its correct twin passes every check."""

from __future__ import annotations

import types

import pytest

from gradcheck.backends.wire import ProtocolError, RemoteError, RemoteUnsupported
from gradcheck.core.results import Status
from gradcheck.model_audit.remote_step import check_step
from gradcheck.semantics.context import BugClass, ProbeContext
from tests.model_audit.remote_step_fake import NAMES, FakeModel

SGD = {"kind": "sgd", "lr": 0.1}
ADAMW = {"kind": "adamw", "lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
         "weight_decay": 0.01}
VANILLA = {"kind": "vanilla", "lr": 0.05, "batch": 4, "clip": 0.01, "l1": 1e-3, "l2": 1e-2}
VANILLA_PLAIN = {"kind": "vanilla", "lr": 0.05, "batch": 1, "clip": None, "l1": 0.0, "l2": 0.0}
OPTIMIZERS = {"sgd": SGD, "adamw": ADAMW, "vanilla": VANILLA, "vanilla_plain": VANILLA_PLAIN}
REPRO = "gradcheck model --command 'cargo run --example mlp' --seed 0"


def run(peer, dtype: str = "float64", *, steps: int = 1, sample: int = 16):
    ctx = ProbeContext(types.SimpleNamespace(name="fake-model", dtypes=(dtype,)), "cpu", dtype,
                       0, reproducer=REPRO)
    describe = peer.request("model.describe", {"dtype": dtype})
    grads = peer.request("model.grads", {"dtype": dtype, "arrays": False})["grads"]
    logged = check_step(ctx, peer, describe, dtype, grads, steps=steps, sample=sample)
    return ctx.results, logged


def by_name(results) -> dict:
    out = {r.name: r for r in results}
    assert len(out) == len(results), "a check emitted twice"
    return out


def failing(results) -> set[str]:
    return {r.name for r in results if r.status in (Status.FAILED, Status.ERROR)}


ALL_STEP = {"grad_norm", "step.clip", "step.repeatable",
            *(f"step.applied[{k}]" for k in NAMES), *(f"step.effective[{k}]" for k in NAMES)}


# -- the correct step: no false alarm ---------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
@pytest.mark.parametrize("max_norm", [None, 10.0, 1.0])
def test_correct_step_passes_every_check(dtype, opt, max_norm):
    results, logged = run(FakeModel(optimizer=OPTIMIZERS[opt], max_norm=max_norm), dtype)
    r = by_name(results)
    assert set(r) == ALL_STEP
    bad = {k: v.message for k, v in r.items() if v.status is not Status.PASSED
           and k != "step.clip"}
    assert not bad
    if max_norm is None:
        assert r["step.clip"].status is Status.SKIPPED
        assert "no clip declared" in r["step.clip"].message
    else:
        assert r["step.clip"].status is Status.PASSED, r["step.clip"].message
        assert "both clip branches ran" in r["step.clip"].message
    assert logged == pytest.approx(float(r["grad_norm"].details["grad_norm"]), rel=1e-5)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("opt", ["adamw", "vanilla", "sgd"])
def test_correct_step_float32_several_runs_of_steps(seed, opt):
    """float32, a clip active at the default, three steps in a row (state threaded): the
    allowances come from the error model, and no seed gives a false alarm."""
    results, _ = run(FakeModel(optimizer=OPTIMIZERS[opt], max_norm=1.0, seed=seed), "float32",
                     steps=3)
    assert not failing(results), [r.message for r in results if r.status is Status.FAILED]


def test_the_first_step_clipping_branch_default_and_the_pass_through_experiment():
    results, _ = run(FakeModel(optimizer=SGD, max_norm=1.0))
    msg = by_name(results)["step.clip"].message
    assert "at the default max_norm 1 (clipping" in msg and "(pass-through, s = 1)" in msg


def test_cost_is_three_step_experiments():
    peer = FakeModel(optimizer=ADAMW, max_norm=10.0)
    run(peer)
    assert peer.calls.get("model.step") == 3  # run, the clip's other branch, repeat
    assert "model.loss" not in peer.calls  # asked for only to diagnose a wrong norm


def test_vanilla_states_the_effective_rate():
    results, _ = run(FakeModel(optimizer=VANILLA, max_norm=None))
    msg = by_name(results)["step.effective[fc1.weight]"].message
    assert "VanillaSolver(lr=0.05, batch=4, clip=0.01, l1=0.001, l2=0.01)" in msg
    assert "effective rate lr / batch = 0.0125" in msg


# -- each broken step fails its own checks, named --------------------------------------------

APPLIED = {f"step.applied[{k}]" for k in NAMES}
EFFECTIVE = {f"step.effective[{k}]" for k in NAMES}
MUTANTS = {
    # variant: (failing checks, the check that names it, its bug class, text naming the factor)
    "double_backward": (APPLIED | {"grad_norm"}, "step.applied[fc1.weight]",
                        BugClass.DOUBLED_SECOND_BACKWARD, "factor 2: a second backward"),
    "two_pass_clip_accumulating": (APPLIED | {"step.clip"}, "step.clip",
                                   BugClass.DOUBLE_BACKWARD_CLIP, "factor (1 + s) / s = 5"),
    "no_clip": ({"step.clip"}, "step.clip", BugClass.CLIP_IGNORES_THRESHOLD, "factor 1/s = 4"),
    "clip_twice": ({"step.clip"}, "step.clip", BugClass.RECEIVED_GRADIENT_SCALED,
                   "factor s = 0.25"),
    "per_tensor_clip": ({"step.clip"}, "step.clip", BugClass.CLIP_CHANGES_DIRECTION,
                        "per-tensor factors"),
    "swapped_names": ({"step.applied[fc1.weight]", "step.applied[fc2.weight]", "step.clip"},
                      "step.applied[fc2.weight]", BugClass.WRONG_NAME,
                      "gradient of a same-shape tensor"),
    "generic_names": ({"step.applied[fc2.bias]"}, "step.applied[fc2.bias]", BugClass.WRONG_NAME,
                      "received nothing under 'fc2.bias'"),
    "norm_from_loss": ({"grad_norm"}, "grad_norm", BugClass.LOSS_PROXY_NORM, "sqrt(|loss|)"),
    "post_clip_logged_as_pre": ({"grad_norm"}, "grad_norm", BugClass.PRE_POST_CLIP_MIXUP,
                                "post-clip"),
    "stale_grads": ({"step.repeatable"}, "step.repeatable", BugClass.STALE_STATE,
                    "2 x the first call"),
    "sgd_twice": (EFFECTIVE, "step.effective[fc2.bias]", BugClass.TWO_UPDATES,
                  "two optimizer updates"),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("variant", sorted(MUTANTS))
def test_mutant_fails_exactly_its_checks_and_correct_twin_passes(variant, dtype):
    expect, main, bug, text = MUTANTS[variant]
    twin, _ = run(FakeModel("correct", optimizer=SGD, max_norm=10.0), dtype)
    assert not failing(twin)
    results, _ = run(FakeModel(variant, optimizer=SGD, max_norm=10.0), dtype)
    assert failing(results) == expect
    f = by_name(results)[main]
    assert f.details["bug_class"] == bug.value, f.message
    assert text in f.message
    # what was compared, by how much, the allowed error, how to reproduce
    if "received nothing" not in f.message:
        assert "actual" in f.message and "allowed" in f.message and f.allowed > 0
    assert f.reproducer == REPRO


def test_two_pass_clip_at_s_1_is_factor_2():
    results, _ = run(FakeModel("two_pass_clip_accumulating", optimizer=SGD, max_norm=10.0))
    assert "two-pass clip on an accumulating engine at s = 1" in \
        by_name(results)["step.applied[fc1.weight]"].message


def test_float64_norm_accumulated_in_float32_is_named():
    results, _ = run(FakeModel("norm_in_float32", optimizer=SGD, max_norm=10.0))
    assert failing(results) == {"grad_norm"}
    f = by_name(results)["grad_norm"]
    assert f.details["bug_class"] == BugClass.LOW_PRECISION_NORM.value
    # the same norm is right for a float32 build
    assert not failing(run(FakeModel("norm_in_float32", optimizer=SGD, max_norm=10.0),
                           "float32")[0])


@pytest.mark.parametrize("opt", ["adamw", "sgd", "vanilla"])
def test_wider_model_sequential_float32_sums_no_false_alarm(opt):
    """A norm summed sequentially in float32 over 8,320 elements (the worst summation order)
    with the clip acting, three steps: inside the sqrt(N) growth of the allowance."""
    peer = FakeModel(optimizer=OPTIMIZERS[opt], max_norm=0.5, width=64, sequential_sums=True)
    results, _ = run(peer, "float32", steps=3, sample=64)
    assert not failing(results), [r.message for r in results if r.status is Status.FAILED]
    assert max(r.discrepancy_ratio or 0.0 for r in results) < 0.1


def test_double_backward_norm_is_named_twice_the_norm():
    results, _ = run(FakeModel("double_backward", optimizer=SGD, max_norm=10.0))
    msg = by_name(results)["grad_norm"].message
    assert "twice the norm" in msg


@pytest.mark.parametrize("opt", ["adamw", "vanilla"])
def test_two_updates_named_under_other_optimizers(opt):
    results, _ = run(FakeModel("sgd_twice", optimizer=OPTIMIZERS[opt], max_norm=10.0))
    assert failing(results) == EFFECTIVE
    for n in EFFECTIVE:
        assert by_name(results)[n].details["bug_class"] == BugClass.TWO_UPDATES.value


def test_stale_gradients_under_an_acting_clip_are_repeated_where_it_does_not_act():
    """A clip normalises the stale 2 g to the same size: the repeat experiment moves the knob
    so that the factor shows."""
    results, _ = run(FakeModel("stale_grads", optimizer=SGD, max_norm=1.0))
    f = by_name(results)["step.repeatable"]
    assert f.status is Status.FAILED and "2 x the first call" in f.message
    assert "(the clip does not act there)" in f.message
    results, _ = run(FakeModel("stale_grads", optimizer=SGD, max_norm=1.0, knob=False))
    f = by_name(results)["step.repeatable"]
    assert f.status is Status.FAILED and "can still be stale + fresh" in f.message


def test_stale_gradients_over_a_run_are_stale_plus_fresh_at_step_two():
    results, _ = run(FakeModel("stale_grads", optimizer=SGD, max_norm=10.0), steps=2)
    assert failing(results) == APPLIED | {"step.repeatable"}
    f = by_name(results)["step.applied[fc1.weight]"]
    assert f.details["bug_class"] == BugClass.STALE_STATE.value
    assert "step 2 of 2" in f.message and "stale + fresh" in f.message


# -- skips with a reason, errors --------------------------------------------------------------

def test_no_knob_leaves_a_branch_unexercised_as_a_skip():
    results, _ = run(FakeModel("no_clip", optimizer=SGD, max_norm=10.0, knob=False))
    r = by_name(results)["step.clip"]
    assert r.status is Status.SKIPPED and "clipping branch never ran" in r.message


def test_unobserved_optimizer_and_no_logged_norm_skip():
    results, logged = run(FakeModel(optimizer=None, max_norm=10.0, logs_norm=False))
    assert logged is None
    r = by_name(results)
    assert {n for n, v in r.items() if v.status is Status.SKIPPED} == \
        APPLIED | EFFECTIVE | {"grad_norm", "step.clip", "step.repeatable"}
    assert "logs no gradient norm" in r["grad_norm"].message


def test_declared_but_unobserved_optimizer_skips_what_needs_its_input():
    results, _ = run(FakeModel(optimizer=ADAMW, max_norm=1.0, observed=False,
                               which="post_clip"))
    r = by_name(results)
    assert {n for n, v in r.items() if v.status is Status.SKIPPED} == APPLIED | EFFECTIVE | {
        "step.clip", "step.repeatable"}
    assert "observed" in r["step.effective[fc1.weight]"].message
    assert "observed" in r["step.clip"].message
    # the post-clip norm is judged against the declared clip's s ||g||
    assert r["grad_norm"].status is Status.PASSED, r["grad_norm"].message
    assert "not observed" in r["grad_norm"].message


def test_step_that_never_calls_the_optimizer():
    results, _ = run(FakeModel("never_steps", optimizer=SGD, max_norm=10.0))
    f = by_name(results)["step.applied[fc1.weight]"]
    assert f.status is Status.FAILED and "never called the observed optimizer" in f.message
    assert APPLIED <= failing(results)


def test_model_without_step_skips_every_step_check():
    peer = FakeModel(optimizer=SGD)
    d = {**peer.request("model.describe", {"dtype": "float64"}), "step": False}
    ctx = ProbeContext(types.SimpleNamespace(name="fake-model"), "cpu", "float64", 0)
    assert check_step(ctx, peer, d, "float64", {}) is None
    assert {r.status for r in ctx.results} == {Status.SKIPPED}
    assert {r.name for r in ctx.results} == ALL_STEP


class _Refusing(FakeModel):
    def __init__(self, exc, **kw):
        super().__init__(**kw)
        self.exc = exc

    def request(self, method, params):
        if method == "model.step":
            raise self.exc
        return super().request(method, params)


@pytest.mark.parametrize("exc,status", [
    (RemoteUnsupported("model.step", "unsupported", "float32 refused"), Status.SKIPPED),
    (RemoteError("model.step", "engine_error", "shape mismatch in step"), Status.ERROR)])
def test_remote_refusal_and_engine_error(exc, status):
    results, _ = run(_Refusing(exc, optimizer=SGD, max_norm=1.0))
    assert {r.status for r in results} == {status}
    assert all(exc.remote_message in r.message for r in results)


def test_malformed_answer_is_a_protocol_error():
    class Broken(FakeModel):
        def request(self, method, params):
            out = super().request(method, params)
            if method == "model.step":
                del out["steps"][0]["tensors"]["fc1.bias"]["grad"]
            return out

    with pytest.raises(ProtocolError, match="sampled array 'grad'"):
        run(Broken(optimizer=SGD))


# -- the declared optimizer ------------------------------------------------------------------

def test_adam_state_lost_between_steps_is_named():
    results, _ = run(FakeModel("optimizer_state_lost", optimizer=ADAMW, max_norm=10.0), steps=3)
    assert failing(results) == EFFECTIVE
    f = by_name(results)["step.effective[fc1.weight]"]
    assert f.details["bug_class"] == BugClass.OPTIMIZER_STATE_LOST.value
    assert "step 2 of 3" in f.message
    twin, _ = run(FakeModel(optimizer=ADAMW, max_norm=10.0), steps=3)
    assert not failing(twin)


def test_solver_rate_off_by_the_batch_is_stated():
    decl = {**VANILLA, "clip": None, "l1": 0.0, "l2": 0.0}
    results, _ = run(FakeModel("solver_ignores_batch", optimizer=decl))
    assert failing(results) == EFFECTIVE
    msg = by_name(results)["step.effective[fc1.weight]"].message
    assert "moved 4 x the declared update" in msg and "effective rate 0.2" in msg
    twin, _ = run(FakeModel(optimizer=decl))
    assert not failing(twin)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_vanilla_order_is_gorgonia_v0_9_18s(dtype):
    """Regularisation before the batch division and the clamp (solvers.go), not after: with
    both active the two orders differ and the check tells them apart."""
    decl = {**VANILLA, "clip": 0.05, "l2": 0.5}
    results, _ = run(FakeModel("vanilla_clamp_first", optimizer=decl), dtype)
    assert failing(results) & EFFECTIVE
    assert not failing(run(FakeModel(optimizer=decl), dtype)[0])

