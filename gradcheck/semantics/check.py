"""Semantic checks: training-step behaviour that numeric gradchecks cannot see.

:func:`check_semantics` runs four probe families through a backend's
:class:`~gradcheck.backends.training.TrainingHooks` and returns a :class:`~gradcheck.Report` of
``kind="semantic"`` results, each named after its probe (``"accumulation.second_backward"``,
``"clip.bound"``, ...):

* ``accumulation``: second backward without reset (2x or 1x, as declared), reset, re-running a
  retained graph, and the "measure, rescale the loss, backward again" clipping pattern with its
  effective step factor;
* ``clip``: ``grad(c L) = c grad(L)`` for ``c`` in {-1, 0, 1e-3, 0.5, 2}, clip-by-global-norm
  direction, bound, unchanged below the threshold, the returned norm against the global L2 norm
  recomputed in float64 (pre- vs post-clip as documented), non-finite gradients, invalid
  thresholds, float16/bfloat16 norms;
* ``fanout``: values used several times receive the sum of their contributions (fixed DAGs,
  views and in-place updates, Hypothesis-generated DAGs vs the FD oracle), compiled runners
  re-run and rebound;
* ``detach``: the stop-gradient primitive blocks exactly the declared path in reverse, forward
  and order-2 modes; no-grad regions in reverse vs forward mode as declared.

A failed result's message starts with its bug class (:class:`BugClass`).  Failures that are real,
investigated backend behaviours carry a ``known_as`` mark with ``behaviour`` set (see
:data:`gradcheck.core.known.SEMANTIC`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from gradcheck import stream
from gradcheck.backends.base import Backend
from gradcheck.backends.guarded import AdapterFailure, attempt_whole
from gradcheck.backends.registry import backend_devices, get_backend
from gradcheck.core import arguments
from gradcheck.core.dtypes import widest_dtype
from gradcheck.core.errors import InvalidArgument
from gradcheck.core.results import Report, Status
from gradcheck.oracle.error_model import DEFAULT_MODEL, ErrorModel, validated_model
from gradcheck.semantics.accumulation import run_accumulation
from gradcheck.semantics.clip import run_clip
from gradcheck.semantics.context import QUOTE, BugClass, ProbeContext
from gradcheck.semantics.detach import run_detach
from gradcheck.semantics.fanout import DEFAULT_EXAMPLES, run_fanout

FAMILIES: dict[str, Callable[..., None]] = {
    "accumulation": run_accumulation,
    "clip": run_clip,
    "fanout": run_fanout,
    "detach": run_detach,
}

__all__ = ["FAMILIES", "BugClass", "check_semantics", "semantics_table"]


def _validate(be: Backend, device: str, dtype: str, probes: Sequence[str] | None,
              examples: int) -> tuple[str, ...]:
    devices = backend_devices(be)
    if device not in devices:
        raise InvalidArgument.choice("device", device, devices)
    if dtype not in be.dtypes:
        raise InvalidArgument.choice("dtype", dtype, be.dtypes)
    if isinstance(probes, str):
        probes = (probes,)
    chosen = tuple(FAMILIES) if probes is None else tuple(probes)
    for p in chosen:
        if p not in FAMILIES:
            raise InvalidArgument.choice("probes", p, FAMILIES)
    if not chosen:
        raise InvalidArgument("probes=() selects nothing; omit it to run every family")
    arguments.integer("examples", examples, minimum=1)
    return chosen


def check_semantics(
    backend: str | Backend,
    device: str = "cpu",
    dtype: str | None = None,
    seed: int = 0,
    *,
    probes: Sequence[str] | None = None,
    examples: int = DEFAULT_EXAMPLES,
    error_model: ErrorModel | None = None,
) -> Report:
    """Measure a backend's training semantics and compare them with what it declares.

    ``backend`` is a name, ``"module:Attr"`` path or adapter instance whose
    :meth:`~gradcheck.Backend.training` returns training hooks.  ``dtype`` is the precision of the
    accumulation and clip probes (default: float64, or the backend's widest float dtype where it
    has no float64; fan-out and detach probes check the rule in float64 where available; the
    low-precision norm probes use float16 and bfloat16 where the backend has them).  ``probes``
    selects families (default: all of ``accumulation``, ``clip``, ``fanout``, ``detach``);
    ``examples`` is the number of Hypothesis DAGs; ``seed`` fixes every random choice.
    ``error_model`` (default ``None``: ``ErrorModel()``) is the profile every numeric comparison
    of the probes is judged with (``docs/error-model.md`` section 5a).

    Never raises for a misbehaving backend (that is an ``error`` result); raises
    :class:`InvalidArgument` for invalid arguments.
    """
    seed = arguments.seed(seed)
    be = get_backend(backend)
    if dtype is None:
        dtype = widest_dtype(be.dtypes)
    chosen = _validate(be, device, dtype, probes, examples)
    model = validated_model(error_model)
    profile = "" if model == DEFAULT_MODEL else f", error_model=gradcheck.{model!r}"
    ctx = ProbeContext(be, device, dtype, seed, reproducer=(
        f"gradcheck.check_semantics({be.name!r}, device={device!r}, dtype={dtype!r}, "
        f"seed={seed}, probes={chosen!r}{profile})"), error_model=model)
    hooks = attempt_whole("training", ctx.hooks)
    if isinstance(hooks, AdapterFailure):
        if hooks.unsupported:
            ctx.emit("training", Status.SKIPPED, hooks.reason)
        else:
            ctx.emit("training", Status.ERROR, f"training() failed: {hooks.quoted(QUOTE)}")
        return Report(stream.record_many(ctx.results))
    for family in chosen:
        start, t0 = len(ctx.results), time.perf_counter()
        # a family as a whole through the boundary: a broken adapter (or hooks) fails its
        # family, the run goes on
        args = (ctx, examples) if family == "fanout" else (ctx,)
        failed = attempt_whole(f"{family} probes", FAMILIES[family], *args)
        if isinstance(failed, AdapterFailure) and failed.unsupported:
            ctx.emit(family, Status.SKIPPED, f"{family} probes not applicable: {failed.reason}")
        elif isinstance(failed, AdapterFailure):
            ctx.emit(family, Status.ERROR, f"{family} probes raised {failed.quoted(QUOTE)}")
        share = (time.perf_counter() - t0) / max(len(ctx.results) - start, 1)
        ctx.results[start:] = [replace(r, duration_s=share) for r in ctx.results[start:]]
    return Report(stream.record_many(ctx.results))


def semantics_table(reports: Mapping[str, Report]) -> str:
    """A Markdown table: one row per probe, one column per backend (status, plus ``known``
    for failures that are documented backend behaviours)."""
    names: list[str] = []
    for rep in reports.values():
        for r in rep.results:
            if r.name not in names:
                names.append(r.name)
    cols = list(reports)
    lines = ["| probe | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for n in names:
        cells = []
        for c in cols:
            found = [r for r in reports[c].results if r.name == n]
            if not found:
                cells.append("-")
                continue
            r = found[0]
            cell = r.status.value
            if r.status is Status.FAILED and r.known_as is not None and r.known_as.behaviour:
                cell += " (known)"
            cells.append(cell)
        lines.append(f"| `{n}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)
