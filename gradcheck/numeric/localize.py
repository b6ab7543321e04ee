"""Localization of a failed projected check: the full Jacobian block ``J_ij`` from AD and
from finite differences, compared element by element, into a frozen :class:`Localization`.

Batched (FD columns and AD rows/columns in vectorized calls), so its cost is set by the
block's size: up to 2048 x 2048 elements (~10 s on a slow CPU for a cheap ``f``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.backends.guarded import AdapterFailed, AdapterFailure
from gradcheck.core.results import CheckKind, WorstElement
from gradcheck.numeric import bisection
from gradcheck.numeric.context import Prepared
from gradcheck.numeric.probes import Probes, batch_fn, f0, out_slices
from gradcheck.oracle import fd
from gradcheck.oracle.jacobian import fd_jacobian

ROWS = 256  # unit cotangents / tangents per batched AD call (bounds memory)
WORST = 5


@dataclass(frozen=True)
class Localization:
    """What localizing one block found: ``how`` (:attr:`CheckResult.localized`: the block
    compared, or why it was not; empty where nothing was localized), the worst elements over
    their allowance and the block's summary (empty where it was not compared)."""

    how: str
    worst: tuple[WorstElement, ...] = ()
    summary: dict[str, Any] = field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        """The result's typed fields: ``localized`` and the block's element summary."""
        if not self.how:
            return {}
        return {"localized": self.how, **{k: v for k, v in self.summary.items()
                                          if k in _SUMMARY_FIELDS}}

    def details(self) -> dict[str, Any]:
        """The rest of the summary (how the FD Jacobian was built), shown as is."""
        return {k: v for k, v in self.summary.items() if k not in _SUMMARY_FIELDS}


_SUMMARY_FIELDS = ("max_abs_discrepancy", "max_rel_discrepancy", "elements_over")


def localize(prep: Prepared, kind: CheckKind, i: int, j: int,
             along: tuple[fd.FDEstimate, Probes, int] | None = None, *,
             budget: bool = False, gradients: Sequence[np.ndarray] | None = None
             ) -> Localization:
    """Full Jacobian block ``J_ij`` from AD and from FD (column-compressed where the AD
    pattern is sparse: :func:`gradcheck.oracle.jacobian.fd_jacobian`); the worst elements.
    A block too large for that is localized on a budget along the failed probe's tangent
    (:mod:`.bisection`) where ``along`` gives the estimate the verdict rests on, its probes and
    the failed probe; ``budget``: this block so, whatever its size (the projected failing path:
    :mod:`.projected_failure`); ``gradients``: the backend's ``J^T v`` of input ``j`` per
    probe where the caller has them (the bisection's diagonal hypothesis starts from them)."""
    n = prep.args64[j].size
    m = int(np.size(prep.outs64[i]))
    model = prep.cfg.error_model  # a dense FD Jacobian: 5 evaluations of f per column (or 16+)
    if (budget and along is not None) or m * n > model.localize_max_elements \
            or n > model.localize_max_columns:
        if along is None:
            return Localization(f"skipped: block {m}x{n} too large to localize")
        return Localization(*bisection.bisect(prep, kind, i, j, *along, out_slices(prep)[i],
                                              gradients))
    J_ad = ad_jacobian(prep, kind, i, j, m, n)
    if isinstance(J_ad, AdapterFailure):
        return Localization(f"failed: {J_ad.text}")
    try:
        # FD compressed by the colouring of the AD pattern where it is sparse; a wrong pattern
        # cannot hide an error (random weights, verified attribution: oracle.jacobian)
        est = fd_jacobian(batch_fn(prep, j), prep.args64[j].ravel(), J_ad,
                          rows=out_slices(prep)[i], f0=f0(prep), seed=prep.cfg.seed,
                          model=prep.cfg.error_model)
    except AdapterFailed as exc:
        return Localization(f"failed: {exc.failure.text}")
    J_fd, E_fd = est.value, est.error
    # only elements nonzero on either side can differ (NaN counts as nonzero): a sparse block
    # is compared on its support, a dense one on every element
    rows, cols = np.nonzero((J_ad != 0) | (J_fd != 0))
    mask = prep.excluded_mask(j)
    if mask is not None:  # kink columns (:mod:`.kinks`): not compared anywhere
        rows, cols = rows[~mask[cols]], cols[~mask[cols]]
    ad, fd_, err = J_ad[rows, cols], J_fd[rows, cols], E_fd[rows, cols]
    allowed = prep.cfg.error_model.allowed(err, np.abs(ad) + np.abs(fd_), prep.rule_dtype)
    diff = np.abs(ad - fd_)
    with np.errstate(all="ignore"):
        r = diff / np.maximum(allowed, 1e-300)
    key = np.where(np.isnan(r), np.inf, -r)  # largest ratio first, NaN last
    top = np.argpartition(key, WORST)[:WORST] if key.size > WORST else np.arange(key.size)
    out_shape, in_shape = np.shape(prep.outs64[i]), prep.args64[j].shape
    worst = []
    for e in top[np.argsort(key[top], kind="stable")]:
        if r[e] <= 1.0:
            break
        a, b = rows[e], cols[e]
        idx = tuple(int(t) for t in np.unravel_index(a, out_shape) + np.unravel_index(b, in_shape))
        worst.append(WorstElement(idx, float(ad[e]), float(fd_[e]), float(allowed[e])))
    scale = float(np.max(np.abs(fd_))) if fd_.size else 0.0
    biggest = float(np.max(diff)) if diff.size else 0.0
    return Localization(f"full Jacobian {m}x{n}", tuple(worst), {
        "fd_jacobian": est.how,
        "fd_evaluations": est.evaluations,
        "max_abs_discrepancy": biggest,
        "max_rel_discrepancy": biggest / scale if scale else 0.0,
        "elements_over": int(np.count_nonzero(r > 1.0)),
    })


def ad_jacobian(prep: Prepared, kind: CheckKind, i: int, j: int, m: int, n: int
                ) -> np.ndarray | AdapterFailure:
    """The AD block ``J_ij``: rows from batched VJPs with unit cotangents, or columns from
    batched JVPs with unit tangents, ``ROWS`` per call, vectorized (the engine's vmap) where it
    can be: localization is a diagnosis, its cost scales with the block."""
    J = np.empty((m, n))
    pos = prep.diff.index(j)
    out_shape, in_shape = np.shape(prep.outs64[i]), prep.args64[j].shape
    size = m if kind is CheckKind.VJP else n
    for start in range(0, size, ROWS):
        stop = min(start + ROWS, size)
        unit = np.zeros((stop - start, size))
        unit[np.arange(stop - start), np.arange(start, stop)] = 1.0
        if kind is CheckKind.VJP:
            cts = [unit.reshape((-1,) + out_shape) if k == i else
                   np.zeros((stop - start,) + np.shape(o)) for k, o in enumerate(prep.outs64)]
            got = prep.backend.vjp_batch(prep.fn, prep.args64, prep.diff, cts, prep.device,
                                         vectorize=True)
            want, at = (stop - start,) + in_shape, pos
        else:
            tans = [unit.reshape((-1,) + in_shape) if k == j else
                    np.zeros((stop - start,) + prep.args64[k].shape) for k in prep.diff]
            got = prep.backend.jvp_batch(prep.fn, prep.args64, prep.diff, tans, prep.device,
                                         vectorize=True, floating=prep.float_outs)
            want, at = (stop - start,) + tuple(out_shape), i
        if isinstance(got, AdapterFailure):
            return got
        block = np.asarray(got[at], dtype=np.float64) if at < len(got) else None
        if block is None or block.size != int(np.prod(want)):
            shape = None if block is None else block.shape
            return AdapterFailure.invalid("localization", f"the batched derivative returned "
                                                          f"shape {shape}, expected {want}")
        if kind is CheckKind.VJP:
            J[start:stop] = block.reshape(stop - start, n)
        else:
            J[:, start:stop] = block.reshape(stop - start, m).T
    return J
