"""Accuracy of the finite-difference oracle against exact derivatives, next to two anchors.

Run:  python benchmarks/oracle_accuracy.py [--seeds N]

For every case of ``benchmarks/smooth_cases.py`` (smooth float64 functions with hand-written
exact directional derivatives) we estimate ``J(x) u`` with

* ``gradcheck.oracle.fd.directional_derivatives`` (Richardson tables, adaptive retry),
* a fixed-step central difference with ``eps = 1e-6`` (the scheme of ``torch.autograd.gradcheck``,
  written here in NumPy: ``(f(x + eps u) - f(x - eps u)) / (2 eps)``),
* ``scipy.differentiate.derivative`` on ``t -> f(x + t u)`` at ``t = 0`` (default settings;
  it differentiates elementwise, so its evaluations are counted per output element),

and print the median / 99th percentile / max of the norm-wise relative error
``max|est - exact| / max|exact|``, the number of function evaluations per direction, and how
often each engine's own error estimate covers the true error on every output element (raw, and
inflated 10x as :mod:`gradcheck.oracle.error_model` uses it).  The exact derivative is itself
computed in
float64, so "covers" allows the reference's own rounding: ``|est - exact| <= err + 4 eps |exact|``.
Targets for gradcheck: median <= 1e-11, p99 <= 1e-9, coverage (x10) >= 99%.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.smooth_cases import Case, catalog, relative_error  # noqa: E402
from gradcheck.oracle import fd  # noqa: E402

EPS = float(np.finfo(np.float64).eps)
TORCH_EPS = 1e-6


def _covered(value: np.ndarray, err: np.ndarray | None, exact: np.ndarray, k: float) -> bool:
    if err is None:
        return False
    return bool(np.all(np.abs(value - exact) <= k * err + 4 * EPS * np.abs(exact)))


def run_gradcheck(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    est = fd.directional_derivatives(case.f, case.x, case.u[None])
    u = est.directions[0]
    return est.value[0], est.error[0], case.jvp(u), est.evaluations


def run_fixed_step(case: Case) -> tuple[np.ndarray, None, np.ndarray, int]:
    pts = np.stack([case.x + TORCH_EPS * case.u, case.x - TORCH_EPS * case.u])
    fp, fm = np.asarray(case.f(pts), dtype=np.float64).reshape(2, -1)
    return (fp - fm) / (2 * TORCH_EPS), None, case.exact, 2


def run_scipy(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    from scipy.differentiate import derivative

    m = case.exact.size

    def g(t: np.ndarray) -> np.ndarray:
        # with preserve_shape, t is (m,) or (m, k): element i is output i at x + t u
        flat = t.reshape(m, -1)
        pts = case.x[None, None, :] + flat[:, :, None] * case.u[None, None, :]
        out = np.asarray(case.f(pts.reshape(-1, case.x.size)), dtype=np.float64)
        out = out.reshape(m, flat.shape[1], m)
        return out[np.arange(m), :, np.arange(m)].reshape(t.shape)

    res = derivative(g, np.zeros(m), preserve_shape=True)
    return res.df, res.error, case.exact, int(np.max(res.nfev))


ENGINES = {
    "gradcheck.oracle.fd (Richardson)": run_gradcheck,
    "central eps=1e-6 (torch scheme)": run_fixed_step,
    "scipy.differentiate.derivative": run_scipy,
}


def measure(cases: list[Case]) -> dict[str, dict[str, float]]:
    """Per engine: error percentiles, coverage, evaluations and time."""
    out = {}
    for name, engine in ENGINES.items():
        rel, cov1, cov10, evals, names = [], [], [], [], []
        start = time.perf_counter()
        for case in cases:
            with np.errstate(all="ignore"):
                value, err, exact, n = engine(case)
            rel.append(relative_error(value, exact))
            cov1.append(_covered(value, err, exact, 1.0))
            cov10.append(_covered(value, err, exact, 10.0))
            evals.append(n)
            names.append(case.name)
        r = np.array(rel)
        r = np.where(np.isfinite(r), r, 1.0)
        out[name] = {
            "median": float(np.median(r)), "p99": float(np.percentile(r, 99)),
            "max": float(np.max(r)), "cov1": float(np.mean(cov1)), "cov10": float(np.mean(cov10)),
            "has_estimate": name != "central eps=1e-6 (torch scheme)",
            "evals": float(np.median(evals)), "seconds": time.perf_counter() - start,
            "worst": ", ".join(f"{names[i]} {r[i]:.1e}" for i in np.argsort(-r)[:3]),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds of the structured cases")
    args = parser.parse_args(argv)
    cases = catalog(n_structured_seeds=args.seeds)
    print(f"{len(cases)} smooth float64 cases with exact directional derivatives\n")
    res = measure(cases)
    head = (f"{'engine':34s} {'median':>9s} {'p99':>9s} {'max':>9s} {'covers':>7s} "
            f"{'x10':>7s} {'evals':>6s} {'time':>7s}")
    print(head)
    print("-" * len(head))
    for name, r in res.items():
        c1 = f"{100 * r['cov1']:6.1f}%" if r["has_estimate"] else "    n/a"
        c10 = f"{100 * r['cov10']:6.1f}%" if r["has_estimate"] else "    n/a"
        print(f"{name:34s} {r['median']:9.2e} {r['p99']:9.2e} {r['max']:9.2e} {c1} {c10} "
              f"{r['evals']:6.0f} {r['seconds']:6.2f}s")
    print("(a non-finite estimate counts as relative error 1; 'covers': the engine's own error "
          "estimate bounds the true error on every output element)")
    print("\nworst cases:")
    for name, r in res.items():
        print(f"  {name:34s} {r['worst']}")
    g = res["gradcheck.oracle.fd (Richardson)"]
    anchor = res["central eps=1e-6 (torch scheme)"]
    print(f"\nvs the fixed-step anchor: median error {anchor['median'] / g['median']:.0f}x "
          f"smaller, p99 {anchor['p99'] / g['p99']:.0f}x smaller")
    ok = g["median"] <= 1e-11 and g["p99"] <= 1e-9 and g["cov10"] >= 0.99
    print(f"targets (median <= 1e-11, p99 <= 1e-9, coverage x10 >= 99%): "
          f"{'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
