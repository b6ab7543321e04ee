"""Shared machinery of tests/reference/test_{linalg,shape,nn}.py.

Runs :func:`gradcheck.check` for one catalog op on one backend, at seeded samples of its spec and
at its special points, and turns the report into a verdict that honours the spec's known
discrepancies *strictly*: a failure not covered by a :class:`KnownDiscrepancy` fails the test,
and a known discrepancy that no longer reproduces fails it too (so an upstream fix shows up).
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import gradcheck
from gradcheck import NumpyFunction
from gradcheck.core.taxonomy import SECOND_ORDER_KINDS
from gradcheck.ops.spec import OpSpec

_IMPL_MODULES = {
    "numpy": "gradcheck.reference.numpy.{family}",
    "jax": "gradcheck.engines.jax.ops.{family}",
    "torch": "gradcheck.engines.torch.ops.{family}",
}


def implementations(backend: str, family: str) -> dict[str, Callable]:
    """The ``OPS`` table of ``backend`` for ``family`` (skips the test if the engine is absent)."""
    if backend in ("torch", "jax"):
        pytest.importorskip(backend)
    return importlib.import_module(_IMPL_MODULES[backend].format(family=family)).OPS


def require_profile(config: pytest.Config, *profiles: str) -> None:
    """Skip unless the gradcheck profile (``--gradcheck-profile`` or the ``gradcheck_profile``
    ini value, default ``quick``) is one of ``profiles``."""
    profile = config.getoption("--gradcheck-profile", None) or config.getini("gradcheck_profile")
    if profile not in profiles:
        pytest.skip(f"runs with --gradcheck-profile {' or '.join(profiles)} (now {profile!r})")


def seed_of(*parts: str) -> int:
    """A stable seed from the test's identity (reproducible from the test id alone)."""
    return zlib.crc32("/".join(parts).encode()) % (2**31)


def samples(spec: OpSpec, count: int) -> list[tuple[np.ndarray, ...]]:
    """``count`` seeded random samples of the op's domain."""
    rng = np.random.default_rng(seed_of(spec.family, spec.name))
    return [spec.sample(rng) for _ in range(count)]


@dataclass
class Outcome:
    """Results of one op on one backend: unexplained failures and strict-xfail bookkeeping."""

    unexpected: list[str]
    known_hit: set[int]
    expectation_errors: list[str]
    kinds_run: set[tuple[str, str]]  # (point, check kind) pairs that ran


def run_op(spec: OpSpec, fn: Callable, backend: str, dtype: str, *, count: int = 1,
           specials: bool = True, order: int = 1) -> Outcome:
    """Check ``fn`` (the op on ``backend``) at ``count`` random samples and, when
    ``specials``, at the spec's special points; ``order=2`` adds the second-order checks at the
    random samples (if the spec says they apply)."""
    out = Outcome([], set(), [], set())
    seed = seed_of(spec.name, backend, dtype)
    points: list[tuple[str, tuple[np.ndarray, ...], str]] = [
        ("random", args, "passed") for args in samples(spec, count)]
    if specials:  # fd=False points are for the exact comparisons of the suites only
        points += [(p.name, p.args, p.expect) for p in spec.special if p.fd]
    for point_name, args, expect in points:
        o = order if spec.order2 and point_name == "random" else 1
        report = gradcheck.check(fn, *args, backend=backend, dtype=dtype, seed=seed,
                                 name=spec.name, order=o)
        out.kinds_run.update((point_name, r.kind) for r in report.results)
        _classify(spec, backend, dtype, point_name, expect, report, out)
    return out


def _asserted(r: gradcheck.CheckResult) -> bool:
    """As in the suites: an order-2 run's results count only for the order-2 kinds (its
    forward-vs-reverse of the VJP-as-a-function is not asserted)."""
    return r.details.get("order", 1) == 1 or r.kind in SECOND_ORDER_KINDS


def _classify(spec: OpSpec, backend: str, dtype: str, point: str, expect: str,
              report: gradcheck.Report, out: Outcome) -> None:
    for r in filter(_asserted, report.failures):
        if r.known:  # a kernel of the engine's own table, off here (as in the suites: xfail)
            continue
        known = spec.known_for(backend, dtype, r.kind, point)
        if known is not None:
            out.known_hit.add(spec.known.index(known))
            continue
        out.unexpected.append(
            f"[{point}] {r.subject} [{r.status.value}]: {r.message}\n  reproduce: {r.reproducer}")
    # at a non-differentiable point check() either cannot decide, or names the kink elements
    # it left out and decides the rest (docs/error-model.md, kinks)
    if expect == "inconclusive" and not any(
            r.status is gradcheck.Status.INCONCLUSIVE or r.details.get("kinks")
            for r in report.results):
        out.expectation_errors.append(
            f"[{point}] expected an inconclusive verdict or named kink elements "
            f"(non-differentiable point), got {report.summary()}")


def assert_outcome(spec: OpSpec, backend: str, dtype: str, out: Outcome) -> None:
    """Fail on unexplained failures, and on known discrepancies (for this backend/dtype and a
    check that ran) that did not reproduce: they are strict expected failures."""
    __tracebackhide__ = True
    problems = out.unexpected + out.expectation_errors
    for k, known in enumerate(spec.known):
        applies = any(  # a suite profile's search (profile not "*"): not run here
            known.matches(backend, subject=spec.name, check=kind, dtype=dtype, point=point)
            for point, kind in out.kinds_run)
        if applies and k not in out.known_hit:
            problems.append(f"known discrepancy no longer reproduces (fixed upstream?): "
                            f"{', '.join(known.checks)} on {backend}/{dtype}: {known.reason}")
    if problems:
        pytest.fail(f"{spec.family}/{spec.name} on {backend} ({dtype}):\n" + "\n".join(problems),
                    pytrace=False)


def check_op(spec: OpSpec, backend: str, dtype: str, *, count: int = 1,
             specials: bool = True, order: int = 1) -> None:
    """The whole test body: check the op on ``backend`` and honour known discrepancies."""
    __tracebackhide__ = True
    fn = implementations(backend, spec.family)[spec.name]
    assert_outcome(spec, backend, dtype, run_op(spec, fn, backend, dtype, count=count,
                                                specials=specials, order=order))


def assert_catalog_consistent(specs: tuple[OpSpec, ...], family: str) -> None:
    """Every spec has an implementation in each backend table and nothing else is there; the
    sampler is deterministic, returns ``arity`` arrays, and ``diff_args`` are floating."""
    names = [s.name for s in specs]
    assert len(names) == len(set(names)), "duplicate op names"
    for backend in _IMPL_MODULES:
        table = implementations(backend, family)
        assert sorted(table) == sorted(names), f"{backend} table != specs"
    for spec in specs:
        assert spec.family == family
        a, b = spec.sample(np.random.default_rng(7)), spec.sample(np.random.default_rng(7))
        assert len(a) == spec.arity, spec.name
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True)), spec.name
        floats = tuple(k for k, x in enumerate(a) if np.issubdtype(x.dtype, np.floating))
        assert spec.diff_args in (None, floats), (spec.name, spec.diff_args, floats)
        for p in spec.special:
            assert len(p.args) == spec.arity and p.expect in ("passed", "inconclusive")


def mutant_caught(fn: Callable, args: tuple[np.ndarray, ...]) -> gradcheck.Report:
    """Check a deliberately broken NumPy rule; return the report (callers assert on it)."""
    return gradcheck.check(fn, *args, backend="numpy", seed=0, name="mutant")


def failed_kinds(report: gradcheck.Report) -> set[str]:
    return {r.kind for r in report.results if r.status is gradcheck.Status.FAILED}


def family_tests(specs: tuple[OpSpec, ...], family: str, jax_quick: tuple[str, ...]) -> type:
    """The test class every family module instantiates (``TestLinalg = family_tests(...)``):

    * ``test_numpy_reference_rule``: the hand-derived rule vs the FD oracle, two random samples
      in float64 and float32, special points in float64;
    * ``test_torch``: same samples, order 2 in float64 (so known ``jvp_of_jvp`` entries are
      exercised);
    * ``test_jax``: float64 for the ops in ``jax_quick`` (JAX compiles every op, transform,
      shape and dtype once, about 2 s of CPU each); ``test_jax_thorough`` (ci and thorough
      profiles): every op, both dtypes, order 2 and special points.
    """
    ids = [s.name for s in specs]
    quick = [s for s in specs if s.name in jax_quick]
    dtypes = pytest.mark.parametrize("dtype", ["float64", "float32"])
    every_op = pytest.mark.parametrize("spec", specs, ids=ids)

    class FamilyTests:
        def test_catalog_consistent(self):
            assert_catalog_consistent(specs, family)

        @dtypes
        @every_op
        def test_numpy_reference_rule(self, spec, dtype):
            check_op(spec, "numpy", dtype, count=2, specials=dtype == "float64")

        @dtypes
        @every_op
        def test_torch(self, spec, dtype):
            float64 = dtype == "float64"
            check_op(spec, "torch", dtype, specials=float64, order=2 if float64 else 1)

        @pytest.mark.parametrize("spec", quick, ids=[s.name for s in quick])
        def test_jax(self, spec):
            check_op(spec, "jax", "float64", specials=False)

        @pytest.mark.slow
        @dtypes
        @every_op
        def test_jax_thorough(self, spec, dtype, request):
            require_profile(request.config, "ci", "thorough")
            float64 = dtype == "float64"
            check_op(spec, "jax", dtype, count=2, specials=float64, order=2 if float64 else 1)

    FamilyTests.__name__ = FamilyTests.__qualname__ = f"Test{family.capitalize()}"
    return FamilyTests


def sample_of(specs: tuple[OpSpec, ...], name: str) -> tuple[np.ndarray, ...]:
    """A fixed random sample of op ``name`` (for the mutant tests)."""
    return next(s for s in specs if s.name == name).sample(np.random.default_rng(11))


def with_vjp(good: NumpyFunction, vjp: Callable) -> NumpyFunction:
    """A mutant: ``good``'s forward and JVP with a deliberately wrong ``vjp``."""
    return NumpyFunction(good.forward, vjp, good.jvp, name=f"{good.__name__}_mutant")
