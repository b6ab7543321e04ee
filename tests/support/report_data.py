"""Realistic check results for the report tests and benchmark: real ``gradcheck.check`` runs on
small NumPy functions with hand-derived rules, some correct and some deliberately broken."""

from __future__ import annotations

import functools

import numpy as np

import gradcheck
from gradcheck import NumpyFunction, stream
from gradcheck.core.results import CheckResult
from gradcheck.engines.numpy.backend import NumpyBackend


def _elementwise(name, f, df, scale=1.0):
    """A NumPy function whose VJP/JVP is ``df`` times ``scale`` (scale != 1: a mutant)."""
    return NumpyFunction(
        forward=lambda x: f(x),
        vjp=lambda args, cts: (scale * df(args[0]) * cts[0],),
        jvp=lambda args, tans: (df(args[0]) * tans[0],),
        name=name,
    )


def _matmul(scale=1.0):
    return NumpyFunction(
        forward=lambda a, b: a @ b,
        vjp=lambda args, cts: (cts[0] @ args[1].T * scale, args[0].T @ cts[0]),
        jvp=lambda args, t: (t[0] @ args[1] + args[0] @ t[1],),
        name="matmul" if scale == 1.0 else "matmul_mutant",
    )


def _raising(args, cts):
    raise RuntimeError("backward exploded: <script>alert('vjp')</script>")


FUNCTIONS = {
    "sin": _elementwise("sin", np.sin, np.cos),
    "tanh": _elementwise("tanh", np.tanh, lambda x: 1 - np.tanh(x) ** 2),
    "exp": _elementwise("exp", np.exp, np.exp),
    "tanh_mutant": _elementwise("tanh_mutant", np.tanh, lambda x: 1 - np.tanh(x) ** 2, 1.001),
    "sin_sign_bug": _elementwise("sin_sign_bug", np.sin, np.cos, -1.0),
    "abs": _elementwise("abs", np.abs, np.sign),
    "raising": NumpyFunction(forward=np.cos, vjp=_raising, name="raising"),
}


def numpy_results(seed: int = 0) -> list[CheckResult]:
    """Results of checking every function of :data:`FUNCTIONS` (float64 and float32) and a
    matrix product (correct and mutant), ``abs`` at its kink."""
    return list(_cached(seed))


@functools.lru_cache(maxsize=4)
def _cached(seed: int) -> tuple[CheckResult, ...]:
    with stream.suspended():  # test data, not results of the run that builds it
        return tuple(_numpy_results(seed))


def _numpy_results(seed: int) -> list[CheckResult]:
    rng = np.random.default_rng(seed)
    out: list[CheckResult] = []
    for name, fn in FUNCTIONS.items():
        x = rng.normal(size=(3, 4))
        if name == "abs":  # every element at the kink: inconclusive (one kink among other
            x[:] = 0.0     # elements is left out and the rest decided: numeric/kinks.py)
        for dtype in ("float64", "float32"):
            out += gradcheck.check(fn, x, backend="numpy", dtype=dtype, seed=seed).results
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(4, 2))
    for scale in (1.0, 1.01):
        out += gradcheck.check(_matmul(scale), a, b, backend="numpy", seed=seed).results
    return out


#: a small pytest suite (written to a temporary directory by the CLI/plugin tests): two correct
#: hand-derived rules, one (1 + 1e-3) mutant, and a test that fails outside any check
SAMPLE_SUITE = '''
import numpy as np
import pytest

import gradcheck
from gradcheck import stream
from gradcheck import NumpyFunction
from gradcheck.engines.numpy.backend import NumpyBackend

RULES = {
    "sin": (np.sin, np.cos, 1.0),
    "exp": (np.exp, np.exp, 1.0),
    "tanh_mutant": (np.tanh, lambda x: 1 - np.tanh(x) ** 2, 1.001),
}


@pytest.mark.parametrize("name", sorted(RULES))
def test_rule(name):
    f, df, scale = RULES[name]
    fn = NumpyFunction(forward=f, vjp=lambda a, c: (scale * df(a[0]) * c[0],),
                       jvp=lambda a, t: (df(a[0]) * t[0],), name=name)
    x = np.random.default_rng(0).normal(size=(2, 3))
    gradcheck.assert_gradients(fn, x, backend="numpy")


def test_outside_any_check():
    raise ValueError("<b>setup broke</b>")
'''


HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="document.title=1">'


class HostileBackend(NumpyBackend):
    """An adapter whose name is markup: the report must show it as text."""

    name = "numpy" + HOSTILE


def _hostile_vjp(args, cts):
    raise RuntimeError("exception " + HOSTILE)


def hostile_results() -> list[CheckResult]:
    """Checks whose adapter name, function name, exception message and test id carry markup."""
    fn = NumpyFunction(forward=np.sin, vjp=_hostile_vjp, name="op" + HOSTILE)
    previous = stream.current_test_id()
    with stream.suspended():
        stream.set_test_id("tests/test_x.py::test[" + HOSTILE + "]")
        try:
            return list(gradcheck.check(fn, np.ones(3), backend=HostileBackend()).results)
        finally:
            stream.set_test_id(previous)
