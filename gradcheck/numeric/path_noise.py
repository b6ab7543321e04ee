"""Measured rounding noise of an engine's two reverse paths (the eager-vs-functional check).

The tape and the functional VJP of one engine (torch's ``autograd.grad`` and ``torch.func.vjp``,
MLX's ``vjp`` and ``compile(vjp)``) compute the same rule in different orders.  Where the result
is what is left after intermediates cancel (a group norm over one element, a softmax minus its
target), the two orders round differently by far more than ``eps`` times the final terms.  When
that final-terms bound is exceeded, both paths are recomputed at inputs moved by 1-2 ulps
(``ErrorModel.noise_ulps``; the measurement of :func:`gradcheck.numeric.agreement._element_noise`,
docs/error-model.md section 5b); the *steadier* path's noise, element by element, bounds what
rounding alone explains, and replaces its modelled share where larger.  A path with no noise (the
rule is exact there) gives no credit, so a real difference between the paths (a custom rule the
functional path does not use, a batching bug) is still reported at the final-terms resolution.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from gradcheck.backends.base import Backend
from gradcheck.backends.guarded import AdapterFailed
from gradcheck.numeric.agreement import Side, _element_noise
from gradcheck.oracle import error_model


class _AlternativePath:
    """An engine seen through one of its alternative reverse paths, as a :class:`Side` wants."""

    def __init__(self, backend: Any, name: str) -> None:
        self.backend, self.path, self.name = backend, name, backend.name

    def vjp_batch(self, fn: Callable, args, diff, cotangents, device: str) -> list[np.ndarray]:
        return self.backend.alternative_vjps_batch(fn, args, diff, cotangents, device)[self.path]


def measured_extra(backend: Any, fn: Callable, path: str, args: Sequence[np.ndarray],
                   diff: Sequence[int], position: int, cotangents: Sequence[Sequence[np.ndarray]],
                   tangents: Sequence[np.ndarray], shares: Sequence[float], device: str,
                   seed: int, *, model: error_model.ErrorModel = error_model.DEFAULT_MODEL
                   ) -> list[float]:
    """Per probe: ``max(0, model.noise_bound(sum_k |u_k| sigma_k) - share)`` for the input at
    ``position`` of ``diff``, ``sigma`` the steadier path's element noise; ``model`` is the
    check's (``check(..., error_model=...)``: its ``noise_factor`` makes the bound).  A path
    that fails off the point (:class:`AdapterFailed`) gives no credit (zeros)."""
    try:
        sigma = np.minimum(
            _element_noise(Side(backend, fn, device), args, diff, cotangents, seed,
                           model.noise_ulps),
            # duck-typed: _element_noise uses only the side's name and vjp_batch
            _element_noise(Side(cast(Backend, _AlternativePath(backend, path)), fn, device),
                           args, diff, cotangents, seed, model.noise_ulps))
    except AdapterFailed:
        return [0.0] * len(tangents)
    bounds = np.cumsum([0] + [np.size(args[k]) for k in diff])
    block = sigma[:, bounds[position]:bounds[position + 1]]
    return [max(0.0, model.noise_bound(float(np.abs(u).ravel() @ block[p])) - share)
            for p, (u, share) in enumerate(zip(tangents, shares, strict=True))]
