"""Accuracy against the number of Richardson levels: the full oracle and the screen.

    python benchmarks/richardson_levels.py

On every case of ``benchmarks/smooth_cases.py`` (smooth float64 functions with hand-written
exact directional derivatives):

* the full oracle, ``fd.directional_derivatives(..., levels=L)`` for L = 5..8 (the default is
  ``fd.DEFAULT_LEVELS``): median / 99th percentile / max of the norm-wise relative error of
  ``J u``, how often its error estimate (inflated 10x, as the error model uses it) covers the
  true error on every output element, evaluations per direction (as in
  ``benchmarks/oracle_accuracy.py``);
* the screen's estimate, ``fd.projected_derivatives(..., levels=K)`` for K = 3..6 (the default
  is ``fd.SCREEN_LEVELS``), projected on a random ``w``: how many cases it vouches for (its
  error estimate at most ``ErrorModel.screen_floor = 1e-11`` of ``sum |w| |J u|``, the
  screen's condition to pass) and the largest true error of a vouched estimate, relative to
  ``sum |w| |J u|``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchmarks.oracle_accuracy as oracle_accuracy  # noqa: E402
from benchmarks.smooth_cases import Case, catalog  # noqa: E402
from gradcheck.oracle import fd  # noqa: E402
from gradcheck.oracle.error_model import DEFAULT_MODEL  # noqa: E402

ORACLE_LEVELS = (5, 6, 7, 8)
SCREEN_LEVELS = (3, 4, 5, 6)


def _oracle(levels: int):
    def run(case: Case):
        est = fd.directional_derivatives(case.f, case.x, case.u[None], levels=levels)
        return est.value[0], est.error[0], case.jvp(est.directions[0]), est.evaluations
    return run


def _screen(cases: list[Case], levels: int, seed: int = 0) -> tuple[int, float]:
    rng = np.random.default_rng(seed)
    vouched, worst = 0, 0.0
    for case in cases:
        f0 = np.asarray(case.f(case.x[None]), dtype=np.float64)[0].ravel()
        w = rng.standard_normal(f0.size)
        with np.errstate(all="ignore"):
            est = fd.projected_derivatives(case.f, case.x, case.u[None], w[None, None], f0=f0,
                                           levels=levels)
            ju = np.asarray(case.jvp(est.directions[0]), dtype=np.float64).ravel()
        terms = float(np.abs(w) @ np.abs(ju))
        err = float(est.error[0, 0])
        if np.isfinite(err) and err <= DEFAULT_MODEL.screen_floor * terms:
            vouched += 1
            worst = max(worst, abs(float(est.value[0, 0]) - float(w @ ju)) / terms)
    return vouched, worst


def main() -> int:
    cases = catalog()
    print(f"{len(cases)} smooth float64 cases with exact directional derivatives\n")
    oracle_accuracy.ENGINES = {f"oracle levels={k}": _oracle(k) for k in ORACLE_LEVELS}
    print(f"full oracle (default levels = {fd.DEFAULT_LEVELS})")
    for name, r in oracle_accuracy.measure(cases).items():
        print(f"  {name:18s} median {r['median']:.1e}  p99 {r['p99']:.1e}  max {r['max']:.1e}  "
              f"covered (x10) {100 * r['cov10']:5.1f}%  evaluations {r['evals']:.0f}")
    print(f"\nscreen (default levels = {fd.SCREEN_LEVELS}; vouched: error estimate <= "
          f"{DEFAULT_MODEL.screen_floor:g} of sum |w||Ju|)")
    for k in SCREEN_LEVELS:
        vouched, worst = _screen(cases, k)
        print(f"  screen levels={k}  vouched {vouched:3d}/{len(cases)}  worst true error of a "
              f"vouched estimate {worst:.1e} of sum |w||Ju|  evaluations {2 * k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
