"""A catalog of smooth float64 test functions with exact directional derivatives.

Shared by ``benchmarks/oracle_accuracy.py`` and ``tests/oracle/test_fd.py``.  Every :class:`Case`
is a batched function ``f(X: (B, n)) -> (B, m)`` at a point ``x`` with a direction ``u`` and the
exact directional derivative ``J(x) u`` written out by hand (no finite differences, no autodiff).

The catalog mixes elementwise functions at several input scales, linear and quadratic maps,
reductions (softmax, logsumexp, norms, products) and matrix functions (inverse, log-det,
matrix exponential via ``scipy.linalg.expm_frechet``), each from a recorded seed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import linalg, special

Batch = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Case:
    """One test function: ``f`` batched over rows, ``jvp(w)`` the exact ``J(x) w``."""

    name: str
    f: Batch
    x: np.ndarray
    u: np.ndarray
    jvp: Callable[[np.ndarray], np.ndarray]
    seed: int

    @property
    def exact(self) -> np.ndarray:
        """The exact directional derivative along ``u``."""
        return self.jvp(self.u)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return special.expit(x)


# name -> (f, f', how to draw x from a standard normal z and a scale s)
_ELEMENTWISE: dict[str, tuple[Callable, Callable, Callable]] = {
    "sin": (np.sin, np.cos, lambda z, s: s * z),
    "cos": (np.cos, lambda x: -np.sin(x), lambda z, s: s * z),
    "tan": (np.tan, lambda x: 1 / np.cos(x) ** 2, lambda z, s: 1.2 * np.tanh(z)),
    "exp": (np.exp, np.exp, lambda z, s: np.clip(s * z, -30, 30)),
    "expm1": (np.expm1, np.exp, lambda z, s: np.clip(s * z, -30, 30)),
    "log": (np.log, lambda x: 1 / x, lambda z, s: s * (0.05 + np.abs(z))),
    "log1p": (np.log1p, lambda x: 1 / (1 + x), lambda z, s: s * np.abs(z) - 0.5 * (s < 1)),
    "sqrt": (np.sqrt, lambda x: 0.5 / np.sqrt(x), lambda z, s: s * (0.05 + np.abs(z))),
    "tanh": (np.tanh, lambda x: 1 - np.tanh(x) ** 2, lambda z, s: np.clip(s * z, -8, 8)),
    "sigmoid": (_sigmoid, lambda x: _sigmoid(x) * (1 - _sigmoid(x)),
                lambda z, s: np.clip(s * z, -20, 20)),
    "softplus": (lambda x: np.logaddexp(0, x), _sigmoid, lambda z, s: np.clip(s * z, -20, 20)),
    "atan": (np.arctan, lambda x: 1 / (1 + x**2), lambda z, s: s * z),
    "asinh": (np.arcsinh, lambda x: 1 / np.sqrt(1 + x**2), lambda z, s: s * z),
    "erf": (special.erf, lambda x: 2 / np.sqrt(np.pi) * np.exp(-(x**2)),
            lambda z, s: np.clip(s * z, -4, 4)),
    "cube": (lambda x: x**3, lambda x: 3 * x**2, lambda z, s: s * z),
    "poly5": (lambda x: x**5 - 3 * x**2 + x, lambda x: 5 * x**4 - 6 * x + 1, lambda z, s: s * z),
    "lorentz": (lambda x: 1 / (1 + x**2), lambda x: -2 * x / (1 + x**2) ** 2,
                lambda z, s: s * z),
    "gauss": (lambda x: np.exp(-(x**2)), lambda x: -2 * x * np.exp(-(x**2)),
              lambda z, s: np.clip(s * z, -5, 5)),
    "cosh": (np.cosh, np.sinh, lambda z, s: np.clip(s * z, -20, 20)),
    "xsin": (lambda x: x * np.sin(x), lambda x: np.sin(x) + x * np.cos(x), lambda z, s: s * z),
    "recip": (lambda x: 1 / x, lambda x: -1 / x**2,
              lambda z, s: s * np.sign(z) * (0.1 + np.abs(z))),
    "sin30": (lambda x: np.sin(30 * x), lambda x: 30 * np.cos(30 * x), lambda z, s: s * z),
}
_SCALES = (1e-3, 1.0, 10.0)


def _elementwise_case(name: str, scale: float, seed: int) -> Case:
    f, df, draw = _ELEMENTWISE[name]
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    x = draw(rng.standard_normal(n), scale)
    u = rng.standard_normal(n)
    d = df(x)
    return Case(f"{name}@{scale:g}", lambda X: f(X), x, u, lambda w: d * w, seed)


def _structured_cases(seed: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 12))
    x = rng.standard_normal(n)
    u = rng.standard_normal(n)
    A = rng.standard_normal((n + 1, n))
    Q = rng.standard_normal((n, n))
    b = rng.standard_normal(n + 1)
    cases: list[Case] = []

    def add(name: str, f: Batch, jvp: Callable, x_: np.ndarray = x):
        cases.append(Case(f"{name}#{seed}", f, x_, u, jvp, seed))

    add("linear", lambda X: X @ A.T, lambda w: A @ w)
    add("quadratic", lambda X: np.einsum("bi,ij,bj->b", X, Q, X)[:, None],
        lambda w: np.array([w @ Q @ x + x @ Q @ w]))
    sm = special.softmax(x)
    add("softmax", lambda X: special.softmax(X, axis=1), lambda w: sm * (w - sm @ w))
    add("logsumexp", lambda X: special.logsumexp(X, axis=1)[:, None],
        lambda w: np.array([sm @ w]))
    nx = np.linalg.norm(x)
    add("norm", lambda X: np.linalg.norm(X, axis=1)[:, None], lambda w: np.array([x @ w / nx]))
    t = np.tanh(A @ x + b)
    add("tanh_layer", lambda X: np.tanh(X @ A.T + b), lambda w: (1 - t**2) * (A @ w))
    xp = 0.5 + np.abs(x)
    add("prod", lambda X: np.prod(X, axis=1)[:, None],
        lambda w: np.array([np.prod(xp) * np.sum(w / xp)]), xp)
    add("normalize", lambda X: X / np.linalg.norm(X, axis=1, keepdims=True),
        lambda w: w / nx - x * (x @ w) / nx**3)
    add("cumsum_sin", lambda X: np.sin(X) * np.cumsum(X, axis=1),
        lambda w: np.cos(x) * w * np.cumsum(x) + np.sin(x) * np.cumsum(w))
    cases.extend(_matrix_cases(rng, seed))
    return cases


def _matrix_cases(rng: np.random.Generator, seed: int) -> list[Case]:
    k = int(rng.integers(2, 5))
    M = rng.standard_normal((k, k)) + k * np.eye(k)
    Mi = np.linalg.inv(M)
    S = 0.5 * rng.standard_normal((k, k))
    U = rng.standard_normal((k, k))

    def batched(g: Callable[[np.ndarray], np.ndarray]) -> Batch:
        return lambda X: np.stack([np.ravel(g(r.reshape(k, k))) for r in X])

    G = rng.standard_normal((k, k))
    ident = np.eye(k)
    inv_g = np.linalg.inv(ident + G @ G.T)
    return [
        Case(f"inverse#{seed}", batched(np.linalg.inv), M.ravel(), U.ravel(),
             lambda w: (-Mi @ w.reshape(k, k) @ Mi).ravel(), seed),
        Case(f"logdet#{seed}", batched(lambda X: np.linalg.slogdet(ident + X @ X.T)[1]),
             G.ravel(), U.ravel(),
             lambda w: np.array([np.trace(inv_g @ (w.reshape(k, k) @ G.T + G @ w.reshape(k, k).T))
                                 ]), seed),
        Case(f"expm#{seed}", batched(linalg.expm), S.ravel(), U.ravel(),
             lambda w: linalg.expm_frechet(S, w.reshape(k, k), compute_expm=False).ravel(), seed),
    ]


def catalog(n_structured_seeds: int = 5, base_seed: int = 0) -> list[Case]:
    """All cases: every elementwise function at every scale, plus structured ones per seed."""
    cases = []
    for i, name in enumerate(_ELEMENTWISE):
        for j, s in enumerate(_SCALES):
            cases.append(_elementwise_case(name, s, base_seed + 100 * i + j))
    for s in range(n_structured_seeds):
        cases.extend(_structured_cases(base_seed + 10_000 + s))
    return cases


def relative_error(value: np.ndarray, exact: np.ndarray) -> float:
    """``max |value - exact| / max |exact|`` (norm-wise; 0/0 is 0)."""
    scale = float(np.max(np.abs(exact)))
    diff = float(np.max(np.abs(value - exact)))
    if scale == 0:
        return 0.0 if diff == 0 else float("inf")
    return diff / scale
