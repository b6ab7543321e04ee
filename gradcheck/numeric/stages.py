"""The samples of the first-order comparisons, each stage one kind of call through the adapter
boundary (:mod:`gradcheck.backends.guarded`), each returning typed samples or the typed
failure of that call (per output for reverse mode, per input for forward mode and the oracle).

* :func:`estimates`: the oracle's directional derivatives (:mod:`gradcheck.oracle.fd`), per input;
* :func:`reverse`: the backend's VJP of every probe, per output (one batched call);
* :func:`alternatives`: the other reverse paths (:meth:`Backend.alternative_vjps_batch`);
* :func:`forward`: the backend's JVP of every probe, per input (one batched call);
* :func:`rounding_samples`: the low-precision and float64 VJPs of probe 0 at the point and at
  a few perturbed points (:mod:`gradcheck.numeric.rounding`), per output.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gradcheck.backends.guarded import AdapterFailed, AdapterFailure
from gradcheck.core.dtypes import numpy_dtype
from gradcheck.core.results import CheckKind, Status
from gradcheck.numeric import rounding
from gradcheck.numeric.context import Prepared
from gradcheck.numeric.probes import (
    Probes,
    batch_fn,
    batched_cotangents,
    f0,
    stacked,
    vjp_at,
)
from gradcheck.oracle import error_model, fd

# per probe, per differentiable input (in ``diff`` order): a derivative as float64
Rows = list[list[np.ndarray]]
ReverseSamples = dict[int, Rows | AdapterFailure]  # output index ->
AlternativeSamples = dict[int, dict[str, Rows] | AdapterFailure]  # output index -> path ->
# input index -> per probe, output index -> J u
ForwardSamples = dict[int, list[dict[int, np.ndarray]] | AdapterFailure]
RoundingSamples = dict[int, list[rounding.Sample] | AdapterFailure]  # output index ->
Estimates = dict[int, fd.FDEstimate | AdapterFailure]  # input index ->


def estimates(prep: Prepared, pr: Probes) -> tuple[Estimates, Probes]:
    """The oracle's estimates per input, and the probes with the tangents the oracle used:
    it rounds the directions so that ``x + h u`` is exact, and AD is projected on those."""
    out: Estimates = {}
    for j in prep.diff:
        try:
            est = fd.directional_derivatives_split(
                batch_fn(prep, j), prep.args64[j].ravel(),
                np.stack([u.ravel() for u in pr.u[j]]), f0=f0(prep))
        except AdapterFailed as exc:
            out[j] = exc.failure
            continue
        out[j] = est
        pr = pr.with_tangents(j, [d.reshape(prep.args64[j].shape) for d in est.directions])
    return out, pr


def reverse(prep: Prepared, pr: Probes) -> ReverseSamples:
    """Output ``i`` -> per probe, the VJP of every differentiable input.  All probes of one
    output share one call (:meth:`Backend.vjp_batch`, not vectorized: one forward pass, then
    the backward path under test once per probe)."""
    return reverse_primal(prep, pr)[0]


def reverse_primal(prep: Prepared, pr: Probes) -> tuple[ReverseSamples, list[Any] | None]:
    """:func:`reverse`, and the outputs of the first call's forward pass where the adapter
    gives them (:class:`~gradcheck.backends.base.Gradients`): one more evaluation of ``f`` at
    the point, for the determinism check (:func:`.prepare.deterministic`)."""
    out: ReverseSamples = {}
    primal: list[Any] | None = None
    for n, i in enumerate(prep.float_outs):
        cts = batched_cotangents(prep, i, pr.v[i], np.float64)
        out[i], outs = prep.backend.vjp_rows_primal(prep.fn, prep.args64, prep.diff, cts,
                                                    prep.device, rows=len(pr.v[i]),
                                                    dtype=np.float64)
        if n == 0:
            primal = outs
        del outs
    return out, primal


def alternatives(prep: Prepared, pr: Probes) -> AlternativeSamples:
    """Output ``i`` -> path name -> per probe, the VJP of every differentiable input along
    the engine's other reverse paths (one batched call per output)."""
    out: AlternativeSamples = {}
    for i in prep.float_outs:
        cts = batched_cotangents(prep, i, pr.v[i], np.float64)
        out[i] = prep.backend.alternative_rows(prep.fn, prep.args64, prep.diff, cts,
                                               prep.device, rows=len(pr.v[i]),
                                               dtype=np.float64)
    return out


def forward(prep: Prepared, pr: Probes) -> ForwardSamples:
    """Input ``j`` -> per probe, the JVP of every floating output; one batched call per
    input."""
    out: ForwardSamples = {}
    for j in prep.diff:
        P = len(pr.u[j])
        tans = [stacked(pr.u[j]) if k == j else np.zeros((P,) + prep.args64[k].shape)
                for k in prep.diff]
        out[j] = prep.backend.jvp_rows(prep.fn, prep.args64, prep.diff, tans, prep.device,
                                       rows=P, outputs=prep.outs64, picked=prep.float_outs)
    return out


def rounding_samples(prep: Prepared, pr: Probes) -> RoundingSamples:
    """Output ``i`` -> the low-precision and float64 VJPs of probe 0 at the point and at a
    few perturbed points (:mod:`gradcheck.numeric.rounding`), or the failure."""
    out: RoundingSamples = {}
    for i in prep.float_outs:
        try:
            out[i] = rounding.samples(vjp_at(prep, i, pr.v[i][0]), prep.args_d, prep.diff,
                                      numpy_dtype(prep.dtype), error_model.eps(prep.dtype),
                                      prep.cfg.seed, prep.cfg.error_model)
        except AdapterFailed as exc:
            out[i] = exc.failure
    return out


def no_forward_mode(prep: Prepared) -> None:
    """One ``skipped`` JVP result per input: forward mode was asked for, the backend has none."""
    for j in prep.diff:
        prep.result(CheckKind.JVP, Status.SKIPPED, input_index=j,
                    message=f"backend {prep.backend.name!r} declares no forward mode")
