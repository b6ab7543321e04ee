"""The compared scalars: the samples of both sides projected on the probes.

For output ``i``, input ``j`` and probe ``p``: the oracle's ``<v_p, (J u_p)_FD>`` with its
error estimate and its absolute terms (:class:`FdSide`), the backend's ``<J^T v_p, u_p>``
(reverse) or ``<v_p, J u_p>`` (forward) with theirs (:func:`ad_scalars`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gradcheck.backends.guarded import AdapterFailure
from gradcheck.core.results import CheckKind
from gradcheck.numeric.context import Prepared
from gradcheck.numeric.probes import Probes, out_slices
from gradcheck.numeric.stages import ForwardSamples, ReverseSamples
from gradcheck.oracle import error_model, fd

# kind -> (the AD scalars per probe, their absolute terms per probe)
AdScalars = dict[CheckKind, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class FdSide:
    """The oracle's side of one (output, input) comparison, per probe: the projected
    estimate, its error, ``sum |v| |J u|_FD`` and the comparison's absolute terms
    (:func:`terms`)."""

    values: np.ndarray
    errors: np.ndarray
    magnitudes: np.ndarray
    terms: np.ndarray


def fd_scalars(fde: fd.FDEstimate, pr: Probes, i: int, sl: slice
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    vs = [v.ravel() for v in pr.v[i]]
    s = np.array([vs[p] @ fde.value[p, sl] for p in range(len(vs))])
    e = np.array([np.abs(vs[p]) @ fde.error[p, sl] for p in range(len(vs))])
    mag = np.array([np.abs(vs[p]) @ np.abs(fde.value[p, sl]) for p in range(len(vs))])
    return s, e, mag


def fd_side(fde: fd.FDEstimate, pr: Probes, i: int, sl: slice, got: AdScalars) -> FdSide:
    """The oracle's scalars and the absolute terms of the comparison (:func:`terms`)."""
    s_fd, e_fd, mag_fd = fd_scalars(fde, pr, i, sl)
    return FdSide(s_fd, e_fd, mag_fd, terms(mag_fd, got))


def terms(mag_fd: np.ndarray, got: Mapping[CheckKind, tuple[np.ndarray, np.ndarray]]
          ) -> np.ndarray:
    """The absolute terms of ``<v, J u>`` per probe, from the FD side's ``sum |v| |J u|`` and
    the AD magnitudes in ``got`` (kind -> (scalars, magnitudes)).

    Rounding of <v, J u> scales with its absolute terms sum_ij |v_i| |J_ij| |u_j|, which
    neither side shows alone: sum_i |v_i| |(J u)_i| misses cancellation inside J u (a dot
    product of two inputs), sum_j |(J^T v)_j| |u_j| misses it inside J^T v.  Both sides
    count, whichever mode is checked (measured: with the forward side alone, a 14-term
    bilinear JVP reached 0.92 of its rounding allowance)."""
    # a mode whose values are not finite fails on its own; its magnitudes do not size the
    # other mode's terms (a NaN JVP made the VJP's allowance NaN: torch.cumprod, subnormals)
    fwd_side = np.fmax(mag_fd, got[CheckKind.JVP][1]) if CheckKind.JVP in got else mag_fd
    rev_side = got[CheckKind.VJP][1] if CheckKind.VJP in got else fwd_side
    total: np.ndarray = fwd_side + np.where(np.isfinite(rev_side), rev_side, fwd_side)
    return total


def abs_rows(rows: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``|r|`` flattened for each row, computed once per distinct array (the screen's probes
    share one tangent: the same array in every row)."""
    seen: dict[int, np.ndarray] = {}
    return [seen.setdefault(id(r), np.abs(r).ravel()) for r in rows]


def reverse_scalars(rows: Sequence[Sequence[np.ndarray]], pr: Probes, j: int, position: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``<J^T v_p, u_p>`` and ``sum |J^T v_p| |u_p|`` per probe, from per-probe VJPs
    (``position``: input ``j``'s place in ``diff``)."""
    s, mag = [], []
    work: list[np.ndarray] = []
    au = abs_rows(pr.u[j])
    for p, g in enumerate(rows):
        gj = g[position].ravel()
        s.append(gj @ pr.u[j][p].ravel())
        mag.append(fd.abs_dot(gj, au[p], work))
    return np.array(s), np.array(mag)


def ad_scalars(kind: CheckKind, rev: ReverseSamples, fwd: ForwardSamples, pr: Probes, i: int,
               j: int, position: int) -> tuple[np.ndarray, np.ndarray] | AdapterFailure:
    """The backend's scalars of output ``i`` / input ``j`` per probe and their absolute terms
    (``sum |v_p| |J u|`` for a JVP, ``|v_p|`` in one work array), or the failure of the call
    they come from."""
    if kind is CheckKind.VJP:
        got = rev[i]
        if isinstance(got, AdapterFailure):
            return got
        return reverse_scalars(got[: len(pr.v[i])], pr, j, position)
    t = fwd[j]
    if isinstance(t, AdapterFailure):
        return t
    s, mag = [], []
    work: list[np.ndarray] = []
    rows = t[: len(pr.v[i])]
    at = abs_rows([row[i] for row in rows])  # the screen's probes share one JVP: |J u| once
    for p, row in enumerate(rows):
        v = pr.v[i][p].ravel()
        s.append(v @ row[i].ravel())
        mag.append(fd.abs_dot(v, at[p], work))
    return np.array(s), np.array(mag)


def convergence(fde: fd.FDEstimate, p: int, v: np.ndarray, sl: slice
                ) -> tuple[tuple[float, float], ...]:
    """(step, projected central difference) along probe ``p``: the reported probe's table
    (none where the estimate kept no table)."""
    if fde.table.shape[1] == 0:
        return ()
    return tuple((float(h), float(v @ fde.table[p, k, sl]))
                 for k, h in enumerate(fde.steps[p]) if np.isfinite(h))  # NaN: no such step


def rule_conditioning(prep: Prepared, pr: Probes, i: int, fde: fd.FDEstimate, sl: slice
                      ) -> np.ndarray | None:
    """Conditioning term of the rule check for engines whose widest dtype is below float64."""
    if prep.rule_dtype == "float64":
        return None
    y = np.asarray(prep.outs64[i], dtype=np.float64).ravel()
    model = prep.cfg.error_model
    return np.array([error_model.conditioning_term(pr.v[i][p].ravel(), y, fde.curvature[p, sl],
                                                 fde.value[p, sl], model=model)
                     for p in range(len(pr.v[i]))])


def rounding_floors(prep: Prepared, pr: Probes, i: int, fde: fd.FDEstimate | None, P: int
                    ) -> np.ndarray:
    """Per probe, :func:`gradcheck.oracle.error_model.fd_rounding_floor` of the estimate ``fde`` (0
    without one: comparisons of two AD values have no oracle error to excuse), at the first
    attempt's smallest step."""
    if fde is None:
        return np.zeros(P)
    sl = out_slices(prep)[i]
    f = np.asarray(prep.outs64[i], dtype=np.float64).ravel()
    steps = fde.steps[:, : fd.DEFAULT_LEVELS]
    model = prep.cfg.error_model
    return np.array([model.fd_rounding_floor(pr.v[i][q].ravel(), f, fde.value[q, sl],
                                             fde.curvature[q, sl], float(np.max(steps[q])),
                                             float(np.min(steps[q]))) for q in range(P)])


def probe_norms(pr: Probes, i: int, j: int, p: int) -> float:
    """``||v_p|| ||u_p||``: the scale of probe ``p``'s comparison."""
    return float(np.linalg.norm(pr.v[i][p]) * np.linalg.norm(pr.u[j][p]))
