"""The seeded probes and the arrays built from them: cotangents, tangents, the function the
oracle differentiates (:func:`batch_fn`) and ``f(x)`` as it sees it (:func:`f0`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gradcheck.backends.guarded import AdapterFailed, AdapterFailure, checked
from gradcheck.core.dtypes import numpy_dtype
from gradcheck.numeric.context import Prepared, outputs


@dataclass(frozen=True)
class Probes:
    """``v``: output index -> ``P`` cotangents; ``u``: input index -> ``P`` tangents (or one
    tangent ``P`` times, the screen's probes)."""

    v: dict[int, list[np.ndarray]]
    u: dict[int, list[np.ndarray]]

    def with_tangents(self, j: int, rows: list[np.ndarray]) -> Probes:
        return replace(self, u={**self.u, j: rows})


def draw(prep: Prepared, tangents: int | None = None) -> Probes:
    """``P`` (``probes``) seeded cotangents per output and ``tangents`` (default ``P``)
    tangents per input."""
    rng = np.random.default_rng(prep.cfg.seed)
    P = prep.cfg.probes
    T = P if tangents is None else tangents
    low = numpy_dtype(prep.dtype)
    # cotangents exactly representable in the dtype under test, so that the low-precision and
    # the float64 VJP of the rounding check see the same v
    # drawn P at a time (the same numbers as P draws in turn), so that each probe is a row of
    # one array and the batched calls need no stacked copy (stacked)
    v = {i: rows(representable(rng.standard_normal((P,) + np.shape(prep.outs64[i])), low))
         for i in prep.float_outs}
    u = {j: rows(_without_excluded(prep, j, rng.standard_normal((T,) + prep.args64[j].shape)))
         for j in prep.diff}
    return Probes(v, u)


def _without_excluded(prep: Prepared, j: int, tangents: np.ndarray) -> np.ndarray:
    """The tangents with 0 at input ``j``'s excluded elements (kinks, :mod:`.kinks`): no
    comparison moves them, so the oracle never steps across them and AD is projected on the
    others only."""
    mask = prep.excluded_mask(j)
    if mask is None:
        return tangents
    flat = tangents.reshape(len(tangents), -1)
    flat[:, mask] = 0.0
    return tangents


def rows(a: np.ndarray) -> list[np.ndarray]:
    """The rows of ``a`` as arrays (views; 0-d arrays, not scalars, for a 1-d ``a``)."""
    return [a[p, ...] for p in range(len(a))]


def stacked(rows: Sequence[np.ndarray]) -> np.ndarray:
    """``np.stack(rows)``, without the copy where the rows already are the consecutive rows of
    one C-contiguous float array (the probes, :func:`draw`; the screen's rounded
    directions): then a view of that array."""
    first = np.asarray(rows[0])
    base = first.base
    if (isinstance(base, np.ndarray) and base.flags.c_contiguous and base.dtype == first.dtype
            and base.size == first.size * len(rows)
            and all(isinstance(r, np.ndarray) and r.shape == first.shape and r.base is base
                    and r.flags.c_contiguous
                    and r.ctypes.data == base.ctypes.data + k * first.nbytes
                    for k, r in enumerate(rows))):
        return base.reshape((len(rows),) + first.shape)
    return np.stack(rows)


def representable(v: np.ndarray, low: Any) -> np.ndarray:
    """``v`` rounded to the dtype ``low`` and back to float64 (no copy in float64)."""
    return v if np.dtype(low) == np.float64 else v.astype(low).astype(np.float64)


def out_slices(prep: Prepared) -> dict[int, slice]:
    """Each floating output's slice of the concatenated flattened outputs."""
    out, start = {}, 0
    for i in prep.float_outs:
        n = int(np.size(prep.outs64[i]))
        out[i] = slice(start, start + n)
        start += n
    return out


def projections(prep: Prepared, v: dict[int, list[np.ndarray]]) -> np.ndarray:
    """``W`` ``(1, P R, m)``: probe ``p``'s cotangent on output ``i``'s slice of the
    concatenated outputs, zeros elsewhere (row ``p R + r``); with one output, the cotangents
    themselves (a view where they are the rows of one array, :func:`stacked`)."""
    outs = prep.float_outs
    P = len(v[outs[0]])
    if len(outs) == 1:
        rows_ = stacked([np.asarray(c).ravel() for c in v[outs[0]]])
        return rows_.reshape(1, P, -1)
    slices = out_slices(prep)
    W = np.zeros((1, P * len(outs), sum(s.stop - s.start for s in slices.values())))
    for r, i in enumerate(outs):
        for p in range(P):
            W[0, p * len(outs) + r, slices[i]] = np.asarray(v[i][p]).ravel()
    return W


def f0(prep: Prepared) -> np.ndarray:
    """``f(x)`` as the FD oracle sees it (float outputs, flattened, concatenated): already
    evaluated by preparation, so the oracle does not evaluate it again."""
    parts = [np.asarray(prep.outs64[i], dtype=np.float64).ravel() for i in prep.float_outs]
    if len(parts) == 1:  # a read-only view, not a copy
        out: np.ndarray = parts[0].view()
        out.flags.writeable = False
        return out
    joined: np.ndarray = np.concatenate(parts)
    return joined


def batch_fn(prep: Prepared, j: int) -> Callable[[np.ndarray], np.ndarray]:
    """``X (B, n_j)`` -> concatenated flattened float outputs ``(B, m)``, float64; raises
    :class:`~gradcheck.backends.guarded.AdapterFailed` where the adapter fails (the FD engine
    counts a row that raises as outside the domain)."""
    shape = prep.args64[j].shape
    backend, oracle = prep.backend, prep.oracle

    def f(X: np.ndarray) -> np.ndarray:
        args = list(prep.args64)
        args[j] = X.reshape((len(X),) + shape)
        batched = [k == j for k in range(len(args))]
        if oracle is None:
            outs = backend.evaluate_batch(prep.fn, args, batched, prep.device)
        else:
            pick = [(a, b) for a, b in zip(args, batched, strict=True)]

            def on_oracle() -> list[np.ndarray]:
                rows = [outputs(oracle(*[a[r] if b else a for a, b in pick]))
                        for r in range(len(X))]
                return [np.stack([np.asarray(row[k]) for row in rows])
                        for k in range(len(rows[0]))]

            outs = backend.call("oracle forward", on_oracle)
        if isinstance(outs, AdapterFailure):
            raise AdapterFailed(outs)
        parts = [np.asarray(outs[i], dtype=np.float64).reshape(len(X), -1)
                 for i in prep.float_outs]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

    return f


def cotangents(prep: Prepared, i: int, v: np.ndarray, dtype: Any) -> list[np.ndarray]:
    """``v`` for output ``i``, zeros for the others, in ``dtype``."""
    return [np.asarray(v, dtype=dtype) if k == i else np.zeros(np.shape(o), dtype=dtype)
            for k, o in enumerate(prep.outs64)]


def batched_cotangents(prep: Prepared, i: int, vs: Sequence[np.ndarray], dtype: Any
                       ) -> list[np.ndarray]:
    """The rows ``vs`` for output ``i`` (zeros for the others), stacked: one batched call."""
    P = len(vs)
    return [(stacked(vs) if np.dtype(dtype) == np.float64
             else np.stack([np.asarray(v, dtype=dtype) for v in vs])) if k == i
            else np.zeros((P,) + np.shape(o), dtype=dtype) for k, o in enumerate(prep.outs64)]


def vjp_at(prep: Prepared, i: int, v: np.ndarray) -> Callable[[list[np.ndarray], Any],
                                                              list[np.ndarray]]:
    """``(args, dtype) -> J^T v`` validated (the rounding samples' callback); raises
    :class:`~gradcheck.backends.guarded.AdapterFailed` on a failure."""
    def at(args: list[np.ndarray], dtype: Any) -> list[np.ndarray]:
        what = "the VJP" if dtype is np.float64 else f"the {prep.dtype} VJP"
        g = prep.backend.vjp(prep.fn, args, prep.diff, cotangents(prep, i, v, dtype),
                             prep.device)
        if not isinstance(g, AdapterFailure):
            g = checked("vjp", g, [args[k] for k in prep.diff], what, dtype)
        if isinstance(g, AdapterFailure):
            raise AdapterFailed(g)
        return g

    return at
