"""The entry point: :func:`run_numeric_checks` runs the pipeline once and contains what it
cannot decide (the check's time limit, an exit or a bug below the boundary) as one result."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from gradcheck.backends import limits
from gradcheck.backends.base import Backend
from gradcheck.backends.guarded import GuardedBackend, describe
from gradcheck.core.results import CheckKind, CheckResult, Status, replaced
from gradcheck.numeric.context import CheckConfig, Finished, Identity, Recorder
from gradcheck.numeric.first_order import first_order_or_screen
from gradcheck.numeric.kinks import around_kinks
from gradcheck.numeric.order2 import second_order
from gradcheck.numeric.pages import small_pages
from gradcheck.numeric.per_component import run as per_component
from gradcheck.numeric.prepare import nondeterministic, prepare


def run_numeric_checks(
    backend: Backend,
    fn: Callable,
    inputs: Sequence[np.ndarray],
    *,
    device: str,
    dtype: str,
    config: CheckConfig,
) -> list[CheckResult]:
    """Run every numeric check of ``config`` for ``fn`` at ``inputs``; never raises (but for
    ``KeyboardInterrupt``): an exception, a ``SystemExit`` or the time limit reached in ``fn``
    or the adapter is an ``error`` result (:mod:`.._limits`)."""
    start = time.perf_counter()
    recorder = Recorder(identity(backend.name, device, dtype, config, inputs))
    with small_pages():  # the check's large arrays are touched once: no huge-page stalls
        checked = _pipeline(GuardedBackend(backend), device)(fn, inputs, dtype, config,
                                                             recorder)
    results = recorder.results
    if getattr(checked, "complex_parts", False):  # say which convention was checked
        note = {"complex_convention": backend.complex_convention}
        results = tuple(replace(r, details={**r.details, **note}) for r in results)
    elapsed = time.perf_counter() - start
    return [replaced(r, duration_s=elapsed / max(len(results), 1)) for r in results]


def identity(backend: str, device: str, dtype: str, config: CheckConfig,
             inputs: Sequence[Any]) -> Identity:
    return Identity(backend, device, dtype, config.name, config.seed,
                    tuple(tuple(np.shape(a)) for a in inputs), config.reproducer,
                    config.test_id, config.input_paths)


def _pipeline(backend: GuardedBackend, device: str
              ) -> Callable[[Callable, Sequence[Any], str, CheckConfig, Recorder], Callable]:
    """One run of the pipeline on ``backend`` at ``device``, recording into a recorder; it
    returns the function it checked (``fn``, or ``fn`` with its complex outputs split)."""

    def run(fn: Callable, inputs: Sequence[Any], dtype: str, config: CheckConfig,
            recorder: Recorder) -> Callable:
        try:
            with limits.deadline(config.timeout if config.order_level == 0 else None):
                prep = prepare(backend, fn, inputs, device=device, dtype=dtype, config=config,
                               recorder=recorder)
                if isinstance(prep, Finished) and prep.retry is not None:
                    fn = prep.retry
                    prep = prepare(backend, fn, inputs, device=device, dtype=dtype,
                                   config=config, recorder=recorder)
                if isinstance(prep, Finished):
                    return fn
                if config.exclude_kinks and config.order_level == 0:
                    around_kinks(prep, first_order_or_screen)
                else:
                    first_order_or_screen(prep)
                if prep.determinism_deferred and nondeterministic(recorder):
                    return fn  # the screen found f nondeterministic: nothing else runs
                if config.order >= 2:
                    second_order(prep, run)
                per_component(prep)
        except limits.Timeout:
            recorder.record(CheckKind.CALL, Status.ERROR,
                            message=f"the check did not finish within timeout={config.timeout:g}"
                                    " s (the function or the adapter hung or is too slow); the "
                                    "checks not reported above did not run")
        except BaseException as exc:  # a sys.exit in fn, a bug below the boundary: not the end
            if not limits.contained(exc):
                raise
            recorder.record(CheckKind.CALL, Status.ERROR,
                            message=f"unexpected failure while checking: {describe(exc)}")
        return fn

    return run
