"""Bad scalar arguments of the public entry points are InvalidArgument, naming the argument."""

import numpy as np
import pytest

import gradcheck
from gradcheck.core.errors import InvalidArgument

X = np.linspace(0.1, 0.9, 4)


def _sin(x):
    return np.sin(x)


F = gradcheck.NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]),),
                            lambda a, t: (np.cos(a[0]) * t[0],), name="sin")

BAD = [("seed", -1), ("seed", "abc"), ("seed", 1.5), ("seed", True), ("seed", None),
       ("probes", "3"), ("probes", 0), ("probes", 2.0), ("probes", True),
       ("order", "2"), ("order", 2.0), ("order", True), ("order", 3),
       ("atol", "1e-3"), ("atol", -1.0), ("rtol", float("nan")), ("atol", True)]


@pytest.mark.parametrize(("name", "value"), BAD)
@pytest.mark.parametrize("entry", [gradcheck.check, gradcheck.assert_gradients])
def test_check_and_assert_reject_bad_scalars(entry, name, value):
    with pytest.raises(InvalidArgument, match=name):
        entry(F, X, backend="numpy", **{name: value})


@pytest.mark.parametrize("value", [-1, 0, float("inf"), float("nan"), "5", True])
def test_check_rejects_bad_timeouts(value):
    with pytest.raises(InvalidArgument, match="timeout"):
        gradcheck.check(F, X, backend="numpy", timeout=value)


def test_numpy_integers_are_integers():
    rep = gradcheck.check(F, X, backend="numpy", seed=np.int64(3), probes=np.int32(2),
                          order=np.int64(1), modes=("rev",))
    assert rep.passed and rep.decided and all(r.seed == 3 for r in rep.results)


@pytest.mark.parametrize(("name", "value"), [("seed", -1), ("seed", "abc"), ("seed", 1.5),
                                             ("examples", "3"), ("examples", 0)])
def test_check_semantics_rejects_bad_scalars(name, value):
    with pytest.raises(InvalidArgument, match=name):
        gradcheck.check_semantics("numpy", **{name: value})


@pytest.mark.parametrize("value", [-1, "abc", 1.5])
def test_audit_rejects_bad_seeds(value):
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(2, 1).double()
    with pytest.raises(InvalidArgument, match="seed"):
        gradcheck.audit(model, lambda m, b: m(b).sum(), torch.ones(3, 2, dtype=torch.float64),
                        backend="torch", seed=value)
