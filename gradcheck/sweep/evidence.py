"""Independent evidence for triage, computed at the point of a finding:

* ``fd``: the directional derivative ``<v, J u>`` by central differences in float64 with the
  direction scaled per element (``u_i |x_i|``, :func:`gradcheck.oracle.scaled.element_scales`,
  so 1e-300 and 1e300 inputs are resolved), at two step families (``2^-k`` and ``3^-k``,
  Richardson-extrapolated), against the backend's own float64 reverse mode ``<J^T v, u>``
  along the same direction;
* ``mpmath``: for one-input elementwise special functions with an mpmath counterpart, the
  derivative per element at the precision it needs (:mod:`.extended`), against the float64
  reverse-mode gradient;
* ``reference``: the same op by NumPy/SciPy (forward) and its scaled FD, where one exists;
* ``engines``: the same op in another installed engine (torch <-> jax by leaf name).

Each returns a plain dict (JSON-ready) with the compared numbers; none decides a verdict of
the oracle, they classify a finding (:mod:`.triage`).
"""

from __future__ import annotations

import importlib
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gradcheck.oracle import extended
from gradcheck.oracle.error_model import ROUNDING_GAMMA
from gradcheck.sweep.inventory.records import ELEMENTWISE, Op
from gradcheck.sweep.resolution import TINY64, elementwise_derivatives, forward_matches

Fn = Callable[[Sequence[np.ndarray]], list[np.ndarray]]
#: relative agreement that counts as "the same derivative" in the triage (far above float64
#: rounding of a well-conditioned derivative, 100x below a 1e-6 relative rule error)
AGREE = 1e-8
#: how close the two step families (and each family's last two levels) must be to count as
#: resolved (measured on smooth ops: 1e-11 to 1e-12)
RESOLVED = 1e-9


def relative(a: float, b: float) -> float:
    scale = max(abs(a), abs(b))
    return 0.0 if a == b else (abs(a - b) / scale if scale else float("inf"))


def _direction(arrays: Sequence[np.ndarray], seed: int) -> list[np.ndarray]:
    """A random direction scaled per element (:func:`gradcheck.oracle.scaled.element_scales`:
    ``|x_i|``, zeros by the smallest nonzero ``|x|``), so no step crosses a pole or a sign
    change next to a tiny element (a floor of 2^-20 put steps of 1e-12 across ``1/x`` at
    1e-15)."""
    from gradcheck.oracle.scaled import element_scales

    rng = np.random.default_rng(seed)
    scales = element_scales([np.asarray(a, dtype=np.float64) for a in arrays])
    return [rng.normal(size=a.shape) * s for a, s in zip(arrays, scales, strict=True)]


def _richardson(f: Callable[[float], float], steps: Sequence[float]) -> tuple[float, float]:
    """Central differences at ``steps`` (decreasing by a constant ratio), Richardson-
    extrapolated in h^2 (one level): the estimate and the relative change of the last two
    extrapolated values (how far from converged)."""
    d = [(f(h) - f(-h)) / (2 * h) for h in steps]
    r = (steps[0] / steps[1]) ** 2
    ext = [(r * d[k + 1] - d[k]) / (r - 1) for k in range(len(d) - 1)]
    return float(ext[-1]), relative(ext[-1], ext[-2])


def scaled_fd(forward: Fn, arrays: Sequence[np.ndarray], us: Sequence[np.ndarray],
              vs: Sequence[np.ndarray]) -> tuple[float, float, bool]:
    """``<v, J u>`` at two step families and whether both converged and agree."""

    def along(t: float) -> float:
        outs = forward([a + t * u for a, u in zip(arrays, us, strict=True)])
        return float(sum(np.sum(v * o) for v, o in zip(vs, outs, strict=True)))

    a, da = _richardson(along, [2.0 ** -k for k in (12, 13, 14, 15)])
    b, db = _richardson(along, [3.0 ** -k for k in (8, 9, 10, 11)])
    return a, b, bool(da <= 10 * RESOLVED and db <= 10 * RESOLVED and relative(a, b) <= RESOLVED)


def one_sided(forward: Fn, arrays: Sequence[np.ndarray], us: Sequence[np.ndarray],
              vs: Sequence[np.ndarray]) -> dict[str, float]:
    """Forward and backward differences at a small step (``2^-20``: their gap, relative, is a
    kink or a jump where it is large: central differences of ``|x|`` at 0 agree at every step
    on the mean slope), and a central difference at a tiny step (``2^-30``: it sees the local
    slope of a staircase whose large steps see its mean)."""

    def along(t: float) -> float:
        outs = forward([a + t * u for a, u in zip(arrays, us, strict=True)])
        return float(sum(np.sum(v * o) for v, o in zip(vs, outs, strict=True)))

    h, tiny = 2.0 ** -20, 2.0 ** -30
    f0 = along(0.0)
    ahead, behind = (along(h) - f0) / h, (f0 - along(-h)) / h
    return {"forward_difference": ahead, "backward_difference": behind,
            "one_sided_gap": relative(ahead, behind),
            "fine_central": (along(tiny) - along(-tiny)) / (2 * tiny),
            "linearity_gap": _linearity_gap(forward, arrays, us, vs, h)}


def _linearity_gap(forward: Fn, arrays: Sequence[np.ndarray], us: Sequence[np.ndarray],
                   vs: Sequence[np.ndarray], h: float) -> float:
    """How far the directional derivative is from linear in the direction: ``D(u) + D(w)`` vs
    ``D(u + w)`` for a second direction ``w`` (relative).  A differentiable function gives
    ~h^2; a point where it is not differentiable (ties of median/sort/max at a repeated value,
    where each ray is linear but the rays do not fit one gradient) gives O(1)."""
    rng = np.random.default_rng(12345)
    ws = [rng.normal(size=u.shape) * np.abs(u).mean() for u in us]

    def central(ds: Sequence[np.ndarray]) -> float:
        def at(t: float) -> float:
            outs = forward([a + t * d for a, d in zip(arrays, ds, strict=True)])
            return float(sum(np.sum(v * o) for v, o in zip(vs, outs, strict=True)))

        return (at(h) - at(-h)) / (2 * h)

    both = [u + w for u, w in zip(us, ws, strict=True)]
    return relative(central(us) + central(ws), central(both))


#: the forward-mode scalars the FD evidence also computes, per kind of finding they judge
FORWARD_KEYS = {"jvp": "fwd", "jvp_of_vjp": "fwd_rev", "jvp_of_jvp": "fwd_fwd"}


def _dot(a: Sequence[Any], b: Sequence[np.ndarray]) -> float:
    """``sum_i <a_i, b_i>`` in float64 over lists of arrays."""
    return float(sum(np.sum(np.asarray(x, dtype=np.float64) * y)
                     for x, y in zip(a, b, strict=True)))


def _vjp_pair(op: Op, arrays: Sequence[np.ndarray], seed: int, order: int
              ) -> tuple[Fn, Callable[[Sequence[np.ndarray]], list[np.ndarray]],
                         list[np.ndarray], list[np.ndarray],
                         dict[str, Callable[[], float]]]:
    """The function whose derivative is judged (the op at order 1, ``<J^T v, w>`` at order 2)
    as a forward, its reverse mode, the cotangents and direction, and the same scalar by the
    forward-mode paths (:data:`FORWARD_KEYS`; none where the op has no forward mode): at order
    1 ``<v, J u>``; at order 2, as ``<J^T v, w>`` differentiated along ``u`` equals ``<v, J w>``
    differentiated along ``u``, forward over reverse and forward over forward."""
    from gradcheck.backends.registry import get_backend

    backend = get_backend(op.backend)
    n = len(arrays)
    diff = list(range(n))
    outs = [np.asarray(o, dtype=np.float64) for o in backend.evaluate(op.fn, arrays, "cpu")]
    rng = np.random.default_rng(seed + 1)
    vs: list[np.ndarray] = [rng.normal(size=o.shape) for o in outs]
    us = _direction(arrays, seed)
    if order == 1:
        def forward(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
            return [np.asarray(o, dtype=np.float64)
                    for o in backend.evaluate(op.fn, list(xs), "cpu")]

        def reverse(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
            return backend.vjp(op.fn, list(xs), diff, vs, "cpu")

        fwd = {"fwd": lambda: _dot(backend.jvp(op.fn, list(arrays), diff, us, "cpu"), vs)}
        return forward, reverse, vs, us, fwd if op.fwd else {}
    g = backend.vjp_function(op.fn, diff, n)
    ws = [rng.normal(size=a.shape) for a in arrays]

    def forward2(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(o, dtype=np.float64)
                for o in backend.evaluate(g, [*xs, *vs], "cpu")]

    def reverse2(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return backend.vjp(g, [*xs, *vs], diff, ws, "cpu")

    def fwd_fwd() -> float:
        h = backend.jvp_function(op.fn, diff, n)
        return _dot(backend.jvp(h, [*arrays, *ws], diff, us, "cpu"), vs)

    fwd2 = {"fwd_rev": lambda: _dot(backend.jvp(g, [*arrays, *vs], diff, us, "cpu"), ws),
            "fwd_fwd": fwd_fwd}
    return forward2, reverse2, ws, us, fwd2 if op.fwd else {}


def fd_evidence(op: Op, arrays: Sequence[np.ndarray], seed: int, order: int = 1
                ) -> dict[str, Any]:
    """The scaled FD at two step families vs the backend's float64 reverse mode along one
    direction: of the op (order 1) or of its VJP ``<J^T v, w>`` (order 2, reverse over
    reverse); and vs the same scalar by forward mode (``ad_<path>`` and ``<path>_vs_fd``,
    ``<path>_vs_fine`` for the paths of :data:`FORWARD_KEYS`, where the op has forward mode
    and the path runs), so a forward-mode finding is judged on its own path."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            forward, reverse, vs, us, forwards = _vjp_pair(op, arrays, seed, order)
            grads = reverse(arrays)
            ad = _dot(grads, us)
            fd_a, fd_b, resolved = scaled_fd(forward, arrays, us, vs)
            sides = one_sided(forward, arrays, us, vs)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    out = {"order": order, "ad": ad, "fd_pow2": fd_a, "fd_pow3": fd_b,
           "fd_families_agree": resolved,
           "ad_vs_fd": min(relative(ad, fd_a), relative(ad, fd_b)), **sides,
           "ad_vs_fine": relative(ad, sides["fine_central"])}
    for path, value in forwards.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = value()
        except Exception:  # the path does not run here: no evidence on it
            continue
        out.update({f"ad_{path}": got, f"{path}_vs_fd": min(relative(got, fd_a),
                                                            relative(got, fd_b)),
                    f"{path}_vs_fine": relative(got, sides["fine_central"])})
    return out


# -- mpmath ------------------------------------------------------------------------------------



def mpmath_evidence(op: Op, arrays: Sequence[np.ndarray], order: int = 1, limit: int = 64,
                    budget_s: float = extended.CALL_BUDGET_S, seed: int = 0) -> dict[str, Any]:
    """Per-element ``order``-th derivative by mpmath, at the precision each element needs
    (:func:`gradcheck.oracle.extended.derivative`), vs the backend's float64 reverse mode
    (:func:`gradcheck.sweep.resolution.elementwise_derivatives`), for a one-input op that is
    elementwise in fact and has a counterpart; ``{}`` where none applies.  Elements mpmath
    cannot evaluate, or that the budget does not reach, are not counted.

    ``forward_matches`` says whether the backend's forward equals mpmath's value at every
    counted element (:func:`gradcheck.sweep.resolution.forward_matches`): then the mapping is
    the op itself and the per-element comparison decides the triage
    (:func:`gradcheck.sweep.triage.classify`)."""
    rule = extended.RULES.get(op.leaf)
    if rule is None or op.family != ELEMENTWISE or len(arrays) != 1:
        return {}
    try:
        import mpmath  # noqa: F401  (the extra that provides it may be absent)
    except ImportError:
        return {}
    x = np.asarray(arrays[0], dtype=np.float64)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            values = elementwise_derivatives(op, x, order, seed)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    if values is None:
        return {}
    forward, grad = values
    deadline = time.monotonic() + budget_s
    worst: tuple[float, float, float, float] | None = None
    # the non-finite derivatives it does not judge (past the limit, or not evaluable)
    checked, matches, blind = 0, True, int(np.count_nonzero(~np.isfinite(grad)))
    for xi, gi, fi in list(zip(x.ravel(), grad, forward, strict=True))[:limit]:
        exact = extended.derivative(rule, float(xi), order, deadline=deadline)
        first = exact if order == 1 else extended.derivative(rule, float(xi), 1,
                                                              deadline=deadline)
        if exact is None or first is None:
            continue
        blind -= int(not np.isfinite(gi))
        checked += 1
        err = relative(float(gi), exact.value) if np.isfinite(gi) else float("inf")
        if abs(float(gi) - exact.value) <= ROUNDING_GAMMA * TINY64:
            err = 0.0  # within the absolute rounding below the smallest normal number
        if worst is None or err > worst[0]:
            worst = (err, float(xi), float(gi), exact.value)
        matches = matches and forward_matches(float(fi), float(xi),
                                              extended.value(rule, float(xi)), first.value)
    if worst is None:
        return {}
    return {"elements": checked, "order": order, "max_relative_error": worst[0],
            "at": worst[1], "ad": worst[2], "mpmath": worst[3], "forward_matches": matches,
            "unjudged_nonfinite": blind}


# -- references: NumPy/SciPy, other engines ------------------------------------------------------

_REFERENCE_MODULES = ("numpy", "scipy.special")


def _reference_forward(leaf: str) -> tuple[str, Any] | None:
    for name in _REFERENCE_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        fn = getattr(module, leaf, None)
        if isinstance(fn, np.ufunc):
            return f"{name}.{leaf}", fn
    return None


def reference_evidence(op: Op, arrays: Sequence[np.ndarray], seed: int) -> dict[str, Any]:
    """NumPy/SciPy's ufunc of the same leaf name: its forward vs the backend's, and its scaled
    FD vs the backend's VJP (elementwise ops only)."""
    found = _reference_forward(op.leaf)
    if found is None or op.family != ELEMENTWISE or found[1].nin != len(arrays):
        return {}
    ref_name, ref = found
    from gradcheck.backends.registry import get_backend

    backend = get_backend(op.backend)
    xs = [np.asarray(a, dtype=np.float64) for a in arrays]

    def forward(ys: Sequence[np.ndarray]) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return [np.asarray(ref(*ys), dtype=np.float64)]

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = np.asarray(backend.evaluate(op.fn, xs, "cpu")[0], dtype=np.float64)
            theirs = forward(xs)[0]
            if ours.shape != theirs.shape:
                return {}
            fin = np.isfinite(ours) & np.isfinite(theirs)
            scale = np.maximum(np.abs(ours), np.abs(theirs))
            diff = np.where(fin & (scale > 0), np.abs(ours - theirs) / np.where(
                scale > 0, scale, 1.0), 0.0)
            fd = fd_evidence(op, xs, seed)
            us, vs = _direction(xs, seed), [np.random.default_rng(seed + 1).normal(
                size=ours.shape)]
            ref_a, _, ref_resolved = scaled_fd(forward, xs, us, vs)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return {"function": ref_name,
            "forward_max_relative": float(diff.max(initial=0.0)),
            "fd_of_reference": ref_a, "fd_families_agree": ref_resolved,
            "ad_vs_reference_fd": relative(fd.get("ad", float("nan")), ref_a)
            if "ad" in fd else None}


_OTHER_SPACES = {
    "torch": ("torch", "torch.special", "torch.nn.functional"),
    "jax": ("jax.numpy", "jax.scipy.special", "jax.nn", "jax.lax"),
}


def _counterpart(backend: str, leaf: str) -> tuple[str, Callable[..., Any]] | None:
    for space in _OTHER_SPACES.get(backend, ()):
        try:
            module = importlib.import_module(space)
        except ImportError:
            return None
        fn = getattr(module, leaf, None)
        if callable(fn) and not isinstance(fn, type):
            return f"{space}.{leaf}", fn
    return None


def engines_evidence(op: Op, arrays: Sequence[np.ndarray], seed: int) -> dict[str, Any]:
    """The other built-in engine's VJP of the op of the same leaf name (elementwise ops), along
    the same direction as :func:`fd_evidence`."""
    other = {"torch": "jax", "jax": "torch"}.get(op.backend)
    if other is None or op.family != ELEMENTWISE:
        return {}
    try:
        found = _counterpart(other, op.leaf)
        if found is None:
            return {}
        name, fn = found
        from gradcheck.backends.registry import get_backend

        xs = [np.asarray(a, dtype=np.float64) for a in arrays]
        be = get_backend(other)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = be.evaluate(fn, xs, "cpu")
            rng = np.random.default_rng(seed + 1)
            vs = [rng.normal(size=np.shape(o)) for o in outs]
            us = _direction(xs, seed)
            grads = be.vjp(fn, xs, list(range(len(xs))), vs, "cpu")
        value = float(sum(np.sum(g * u) for g, u in zip(grads, us, strict=True)))
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return {"engine": other, "op": name, "vjp": value}
