"""What makes the suites cheap in JAX, counted (no timing): one traced transform serves one VJP
and a batch of probes, the oracle's batches of different sizes share one batched evaluation,
and the padded rows never leak into the results."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")


def _counted(counter: list[int]):
    import jax.numpy as jnp

    def f(x, w):
        counter[0] += 1  # runs once per trace
        return jnp.tanh(x @ w), jnp.sum(jnp.sin(x) ** 2)

    return f


@pytest.fixture
def be():
    from gradcheck.engines.jax.backend import JaxBackend

    return JaxBackend()


def test_one_vjp_and_three_probes_share_one_trace(be):
    counter = [0]
    f = _counted(counter)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((3, 4)), rng.standard_normal((4, 2))]
    outs = be.evaluate(f, args, "cpu")
    cts = [rng.standard_normal((3,) + np.shape(o)) for o in outs]
    batched = be.vjp_batch(f, args, [0, 1], cts, "cpu")
    traced = counter[0]
    for b in range(3):
        row = be.vjp(f, args, [0, 1], [c[b] for c in cts], "cpu")
        for k in range(2):
            assert row[k].shape == args[k].shape
            np.testing.assert_allclose(row[k], batched[k][b], rtol=1e-14, atol=1e-15)
    assert counter[0] == traced  # the single VJP ran the batch's compiled transform
    tans = [rng.standard_normal((3,) + a.shape) for a in args]
    forward = be.jvp_batch(f, args, [0, 1], tans, "cpu")
    traced = counter[0]
    col = be.jvp(f, args, [0, 1], [t[1] for t in tans], "cpu")
    assert counter[0] == traced and [c.shape for c in col] == [np.shape(o) for o in outs]
    for k in range(2):
        np.testing.assert_allclose(col[k], forward[k][1], rtol=1e-14, atol=1e-15)


def test_batches_of_different_sizes_share_one_trace_and_keep_their_size(be):
    counter = [0]
    f = _counted(counter)
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 2))
    results = {}
    traces = []
    for n in (18, 42, 9, 64, 1, 8):
        X = rng.standard_normal((n, 3, 4))
        results[n] = (X, be.evaluate_batch(f, [X, w], [True, False], "cpu"))
        traces.append(counter[0])
    # vmap traces f once for the padded size 64 (9 to 64 rows) and once for the small bucket
    # of 8 (the fast screen's batches of 1 to 8 rows)
    assert traces == [1, 1, 1, 1, 2, 2]
    for n, (X, outs) in results.items():
        assert [o.shape[0] for o in outs] == [n, n]
        for r in (0, n - 1):
            ref = be.evaluate(f, [X[r], w], "cpu")
            for k in range(2):
                np.testing.assert_allclose(outs[k][r], ref[k], rtol=1e-14, atol=1e-15)


def test_a_wrong_rule_is_still_caught_through_the_shared_transforms():
    """The (1 + 1e-7) mutant of a custom VJP fails the reference-free checks (VJP vs FD) and
    the rounding check reads the same transform: padding hides nothing."""
    import jax.numpy as jnp

    import gradcheck

    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (jnp.sin(x), x), lambda x, ct: (ct * jnp.cos(x) * (1 + 1e-7),))
    x = np.random.default_rng(2).standard_normal(20)
    report = gradcheck.check(f, x, backend="jax", modes=("rev",))
    assert [r.status.value for r in report.results if r.kind == "vjp"] == ["failed"]
