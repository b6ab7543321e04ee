"""The model audit on the examples: correct models pass, each user-side bug class is caught with
a message naming it, and parameters are reported under the framework's registry names."""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.core.errors import InvalidArgument
from gradcheck.core.results import CheckKind, Status
from gradcheck.model_audit.flow import AuditReport, FlowStatus, audit

torch = pytest.importorskip("torch")


def _one(report: AuditReport, name: str, kind: str):
    found = [r for r in report.results if r.name == name and r.kind == kind]
    assert len(found) == 1, f"{name}/{kind}: {[(r.name, r.kind) for r in report.results]}"
    return found[0]


def _bug(result, bug: str) -> None:
    assert result.status is Status.FAILED, result.message
    assert result.message.startswith(f"[{bug}]"), result.message


# -- DQN: intended stop, leak, double-backward clipping --------------------------------------

@pytest.fixture(scope="module")
def dqn():
    from examples import dqn_target

    return dqn_target


def test_dqn_correct_agent_passes_with_registry_names(dqn):
    report = dqn.run()
    assert report.passed, [r.message for r in report.failures]
    names = [n for n, _ in dqn.Agent().named_parameters()]
    assert [p.name for p in report.parameters] == names
    for p in report.parameters:
        want = (FlowStatus.BLOCKED_AS_INTENDED if p.name.startswith("target.")
                else FlowStatus.FLOWS)
        assert p.status is want, p.message
        if want is FlowStatus.FLOWS:
            assert p.gradient_check is Status.PASSED
        else:
            assert p.fd_dependence > p.fd_noise  # the loss depends on it; the stop is intended
    step = _one(report, "train_step.effective_step", CheckKind.SEMANTIC.value)
    assert step.details["effective_factor"] == pytest.approx(1.0, rel=1e-5)


def test_dqn_target_without_no_grad_leaks(dqn):
    report = dqn.run(loss=dqn.leaky_td_loss)
    leaks = [p.name for p in report.parameters if p.status is FlowStatus.LEAK]
    assert leaks == [n for n, _ in dqn.Agent().target.named_parameters(prefix="target")]
    _bug(_one(report, "target.head.weight", CheckKind.FLOW.value), "stop-gradient that leaks")


def test_double_backward_clipping_is_caught(dqn):
    report = dqn.run(step=dqn.double_backward_step)
    r = _one(report, "train_step.effective_step", CheckKind.SEMANTIC.value)
    _bug(r, "double-backward clipping that doubles the step")
    s = r.details["clip_factor"]
    assert s < 1 and r.details["effective_factor"] == pytest.approx((1 + s) / s, rel=1e-4)
    assert "(1 + s) / s" in r.message
    assert _one(report, "train_step.repeatable", CheckKind.SEMANTIC.value).status is \
        Status.PASSED


def test_step_without_zero_grad_is_not_repeatable(dqn):
    def no_reset_step(agent, batch):
        opt = torch.optim.SGD(agent.online.parameters(), lr=dqn.LR)
        dqn.td_loss(agent, batch).backward()  # BUG: no zero_grad: last step's grads remain
        opt.step()

    from gradcheck.model_audit.flow import TrainStep

    report = audit(dqn.Agent(), dqn.td_loss, dqn.make_batch(), backend="torch",
                   stop_gradient=("target",), train_step=TrainStep(no_reset_step, lr=dqn.LR))
    r = _one(report, "train_step.repeatable", CheckKind.SEMANTIC.value)
    _bug(r, "reset that does not reset")
    assert r.details["factor"] == pytest.approx(2.0, rel=1e-4)


# -- blocked gradients -----------------------------------------------------------------------

def test_host_round_trip_blocks_preprocessing():
    from examples import preprocessing_roundtrip as ex

    report = ex.run(ex.Pipeline)
    for name in ("pre.scale", "pre.shift"):
        p = report[name]
        assert p.status is FlowStatus.BLOCKED_UNINTENTIONALLY
        assert p.ad_norm == 0 and p.fd_dependence > 1e3 * p.fd_noise
        r = _one(report, name, CheckKind.FLOW.value)
        _bug(r, "host round trip blocks gradients")
        assert "Tensor.tolist()" in r.message and "Tensor.item()" in r.message
        assert "preprocessing_roundtrip.py:" in r.message
    assert report["head.weight"].status is FlowStatus.FLOWS
    fixed = ex.run(ex.FixedPipeline)
    assert fixed.passed, [r.message for r in fixed.failures]


class _DetachedEmbedding(torch.nn.Module):
    """The input projection is detached before the body: its weights never learn."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Linear(3, 4, dtype=torch.float64)
        self.body = torch.nn.Linear(4, 1, dtype=torch.float64)

    def forward(self, x, detach=True):
        h = self.embed(x)
        return self.body(torch.tanh(h.detach() if detach else h)).squeeze(-1)


def _regression(model, batch, **kw):
    x, y = batch
    return ((model(x, **kw) - y) ** 2).mean()


def _batch():
    g = torch.Generator().manual_seed(5)
    return torch.randn(16, 3, generator=g, dtype=torch.float64), torch.randn(16, generator=g,
                                                                           dtype=torch.float64)


def test_detach_in_input_path_is_caught():
    report = audit(_DetachedEmbedding(), _regression, _batch(), backend="torch")
    for name in ("embed.weight", "embed.bias"):
        r = _one(report, name, CheckKind.FLOW.value)
        _bug(r, "detach in the input path")
        assert "graph cut: Tensor.detach()" in r.message and "test_flow.py:" in r.message
    assert report["body.weight"].status is FlowStatus.FLOWS
    ok = audit(_DetachedEmbedding(), lambda m, b: _regression(m, b, detach=False), _batch(),
               backend="torch")
    assert ok.passed, [r.message for r in ok.failures]


def test_declared_stop_is_accepted_and_unknown_names_rejected():
    report = audit(_DetachedEmbedding(), _regression, _batch(), backend="torch",
                   stop_gradient=("embed",))
    assert report.passed and report["embed.weight"].status is FlowStatus.BLOCKED_AS_INTENDED
    with pytest.raises(InvalidArgument, match="names no parameter"):
        audit(_DetachedEmbedding(), _regression, _batch(), backend="torch",
              stop_gradient=("embedding",))


def test_unused_parameter_is_reported():
    model = _DetachedEmbedding()
    model.spare = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    report = audit(model, lambda m, b: _regression(m, b, detach=False), _batch(),
                   backend="torch")
    _bug(_one(report, "spare", CheckKind.FLOW.value), "parameter without gradient or effect")
    assert report["spare"].fd_dependence == 0.0


def test_audit_restores_the_model():
    model = _DetachedEmbedding()
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    from examples.dqn_target import LR

    def step(m, b):
        opt = torch.optim.SGD(m.parameters(), lr=LR)
        opt.zero_grad()
        _regression(m, b, detach=False).backward()
        opt.step()

    audit(model, lambda m, b: _regression(m, b, detach=False), _batch(), backend="torch",
          train_step=step)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert all(p.grad is None for p in model.parameters())


# -- gradient-norm monitor -------------------------------------------------------------------

def test_loss_proxy_gradient_norm_is_caught():
    from examples import grad_norm_proxy as ex

    report = ex.run(ex.proxy_monitor)
    r = _one(report, "grad_norm", CheckKind.GRAD_NORM.value)
    _bug(r, "loss-proxy gradient norm")
    assert "sqrt(|loss|)" in r.message
    assert r.expected == pytest.approx(report.grad_norm)
    good = ex.run(ex.true_monitor)
    assert good.passed, [x.message for x in good.failures]


def test_partial_norm_is_named():
    from examples import grad_norm_proxy as ex

    def encoder_only(model, batch):
        ex.mse(model, batch).backward()
        return float(torch.cat([p.grad.ravel() for p in model.encoder.parameters()]).norm())

    r = _one(ex.run(encoder_only), "grad_norm", CheckKind.GRAD_NORM.value)
    _bug(r, "reported norm is not the global L2 norm")


# -- JAX: key-path names, scan, an undeclared stop_gradient ---------------------------------

def test_ssm_scan_names_and_undeclared_stop():
    pytest.importorskip("jax")
    from examples import ssm_scan as ex

    report = ex.run()
    assert report.passed, [r.message for r in report.failures]
    assert {p.name for p in report.parameters} == {
        f"{layer}.{k}" for layer in ("ssm_0", "ssm_1") for k in ("A", "B", "C", "delta")
    } | {"readout.w", "readout.b"}
    frozen = ex.run(ex.frozen_decay_loss)
    assert [p.name for p in frozen.parameters
            if p.status is FlowStatus.BLOCKED_UNINTENTIONALLY] == ["ssm_0.A"]
    r = _one(frozen, "ssm_0.A", CheckKind.FLOW.value)
    _bug(r, "detach in the input path")
    assert "lax.stop_gradient" in r.message


def test_jax_host_round_trip_is_an_error_not_a_silent_block():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    params = {"w": jnp.asarray(np.array([0.5, -1.0]))}

    def loss(p, x):
        scale = float(np.asarray(p["w"]).sum())  # host round trip under tracing
        return jnp.sum(p["w"] * x) * scale

    report = audit(params, loss, jnp.asarray(np.array([1.0, 2.0])), backend="jax")
    r = _one(report, "backward", CheckKind.FLOW.value)
    assert r.status is Status.ERROR and r.message.startswith("[host round trip")
    assert "TracerArrayConversionError" in r.message


def test_jax_loss_with_python_control_flow_falls_back_to_eager():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    params = {"w": jnp.asarray(np.array([0.5, -1.0]))}

    def loss(p, x):
        if p["w"].sum() > 0:  # not jittable; fine under jax.grad
            return jnp.sum(p["w"] * x) ** 2
        return jnp.sum(jnp.sin(p["w"] * x))

    report = audit(params, loss, jnp.asarray(np.array([1.0, 2.0])), backend="jax")
    assert report.passed and report["w"].gradient_check is Status.PASSED


def test_bad_model_and_raising_loss():
    with pytest.raises(InvalidArgument, match="model="):
        audit([1, 2], _regression, _batch(), backend="torch")

    def broken(model, batch):
        raise RuntimeError("shape mismatch in my loss")

    report = audit(_DetachedEmbedding(), broken, _batch(), backend="torch")
    r = _one(report, "backward", CheckKind.FLOW.value)
    assert r.status is Status.ERROR and "shape mismatch in my loss" in r.message


@pytest.mark.parametrize("factor, ok", [(1.0, True), (1.0 + 1e-6, False)])
def test_numpy_audit_checks_hand_gradients(factor, ok):
    from gradcheck.backends.training import NumpyLoss

    x = np.array([0.3, -1.2, 2.0])
    loss = NumpyLoss(lambda p, b: float(np.sum(np.sin(p["w"] * b))),
                     lambda p, b: {"w": factor * b * np.cos(p["w"] * b)})
    report = audit({"w": np.array([0.5, 1.0, -0.7])}, loss, x, backend="numpy")
    assert report.passed is ok
    if not ok:
        _bug(_one(report, "w", CheckKind.VJP.value), "gradient disagrees with finite differences")


# -- issue 32 class 3: user code cannot end the audit ----------------------------------------


def test_a_system_exit_in_the_loss_is_an_error_result_not_the_end_of_the_run():
    model = _DetachedEmbedding()

    def exits(m, batch):
        raise SystemExit(3)

    rep = audit(model, exits, _batch(), backend="torch")
    errors = [r for r in rep.results if r.status is Status.ERROR]
    assert errors and "SystemExit: 3" in errors[0].message
    # the run goes on: the same model audits normally afterwards
    assert audit(model, _regression, _batch(), backend="torch").results


def test_a_system_exit_in_the_training_step_is_an_error_result():
    def step_exits(m, batch):
        raise SystemExit("stop")

    rep = audit(_DetachedEmbedding(), _regression, _batch(), backend="torch", train_step=step_exits)
    assert any(r.status is Status.ERROR and "SystemExit: stop" in r.message
               for r in rep.results)


def test_keyboard_interrupt_in_the_loss_still_stops_the_audit():
    def interrupted(m, batch):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        audit(_DetachedEmbedding(), interrupted, _batch(), backend="torch")
