"""The minimal reproducer of a sweep finding: a script that runs as printed.

Where the op is importable under its qualified name and takes no fixed arguments besides its
differentiable inputs (``torch.special.erfcx(x)``, ``jax.nn.selu(x)``), the script needs only
the engine and NumPy: it computes the reverse-mode directional derivative at the point and the
central difference along the same direction, and prints both (what to file upstream).
Otherwise (an OpInfo sample with fixed arguments) it rebuilds the op from the sweep's
inventory and runs :func:`gradcheck.check` at the point with the finding's seed.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import numpy as np

from gradcheck.core.results import CheckResult
from gradcheck.sweep.inventory.records import Op
from gradcheck.sweep.points import Point


def _literal(a: np.ndarray) -> str:
    return f"np.array({np.asarray(a, dtype=np.float64).ravel().tolist()!r}).reshape({a.shape!r})"


def importable(name: str) -> bool:
    """``name`` is ``module.attr`` of an importable module with that callable."""
    module, _, attr = name.rpartition(".")
    try:
        return callable(getattr(importlib.import_module(module), attr, None))
    except Exception:
        return False


def _inputs(arrays: Sequence[np.ndarray]) -> list[str]:
    return [f"x{k} = {_literal(a)}" for k, a in enumerate(arrays)]


_TORCH = """\
import numpy as np, torch
import {module}
{inputs}
xs = [torch.tensor(x, dtype=torch.{dtype}, requires_grad=True) for x in ({names},)]
out = {name}(*xs)
rng = np.random.default_rng(0)
v = torch.tensor(rng.normal(size=tuple(out.shape)), dtype=out.dtype)
grads = torch.autograd.grad(out, xs, v)
u = [rng.normal(size=x.shape) * np.maximum(np.abs(x), 2.0 ** -20) for x in ({names},)]
ad = sum(float((g.double() * torch.tensor(d)).sum()) for g, d in zip(grads, u))
def f(t):
    with torch.no_grad():
        y = {name}(*[torch.tensor(x + t * d, dtype=torch.float64) for x, d in zip(({names},), u)])
    return float((v.double() * y).sum())
h = 2.0 ** -13
fd = (f(h) - f(-h)) / (2 * h)
print("reverse mode <J^T v, u> =", ad)
print("central difference <v, J u> =", fd, "(float64, h = 2^-13 along a per-element scaled u)")
"""

_JAX = """\
import numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import {module}
{inputs}
xs = [jnp.asarray(x, dtype=jnp.{dtype}) for x in ({names},)]
out, pullback = jax.vjp({name}, *xs)
rng = np.random.default_rng(0)
v = jnp.asarray(rng.normal(size=out.shape), dtype=out.dtype)
grads = pullback(v)
u = [rng.normal(size=x.shape) * np.maximum(np.abs(x), 2.0 ** -20) for x in ({names},)]
ad = sum(float(jnp.sum(g.astype(jnp.float64) * d)) for g, d in zip(grads, u))
f = lambda t: float(jnp.sum(v.astype(jnp.float64) * {name}(
    *[jnp.asarray(x + t * d) for x, d in zip(({names},), u)])))
h = 2.0 ** -13
fd = (f(h) - f(-h)) / (2 * h)
print("reverse mode <J^T v, u> =", ad)
print("central difference <v, J u> =", fd, "(float64, h = 2^-13 along a per-element scaled u)")
"""

_SWEEP = """\
# rebuilds the op as the sweep built it (an OpInfo sample with fixed arguments: {call})
import numpy as np
import gradcheck
from gradcheck.sweep.inventory.discover import inventory
op = next(o for o in inventory({backend!r}, [{name!r}]).ops if o.name == {name!r})
{inputs}
report = gradcheck.check(op.fn, {names}, backend={backend!r}, dtype={dtype!r},
                         modes={modes!r}, order={order}, seed={seed}, name={name!r})
print(report.summary())
for r in report.failures:
    print(r.subject, r.message)
"""


def script(op: Op, point: Point, dtype: str, order: int, r: CheckResult) -> str:
    """The reproducer script of result ``r`` of ``op`` at ``point``."""
    names = ", ".join(f"x{k}" for k in range(len(point.arrays)))
    inputs = "\n".join(_inputs(point.arrays))
    standalone = (order == 1 and not op.call and op.backend in ("torch", "jax")
                  and importable(op.name) and r.kind in ("vjp", "jvp", "fwd_rev", "rounding"))
    if standalone:
        template = _TORCH if op.backend == "torch" else _JAX
        return template.format(module=op.name.rpartition(".")[0], inputs=inputs, names=names,
                               name=op.name, dtype=dtype)
    modes = ("rev", "fwd") if op.fwd else ("rev",)
    return _SWEEP.format(call=op.call or "none", backend=op.backend, name=op.name,
                         inputs=inputs, names=names, dtype=dtype, modes=modes, order=order,
                         seed=r.seed)
