"""What the stages of one numeric run share: the options (:class:`CheckConfig`), the record
of results (:class:`Recorder`) and the state after preparation (:class:`Prepared`, frozen),
or the run's end before any comparison (:class:`Finished`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gradcheck.backends.guarded import GuardedBackend
from gradcheck.core.dtypes import is_floating
from gradcheck.core.results import CheckKind, CheckResult, Status, replaced
from gradcheck.oracle import error_model as tolerance


@dataclass(frozen=True)
class CheckConfig:
    """Options of one numeric check run (see :func:`gradcheck.check`)."""

    modes: tuple[str, ...] = ("rev", "fwd")
    order: int = 1
    seed: int = 0
    atol: float | None = None
    rtol: float | None = None
    probes: int = 3
    localize: bool = True
    name: str = ""
    reproducer: str = ""
    test_id: str = ""
    only_inputs: tuple[int, ...] | None = None
    fast: bool = False  # screen first (:mod:`.._screen`); the full check only where it cannot pass
    timeout: float | None = None  # seconds for the whole check (:mod:`.._limits`)
    order_level: int = 0  # 1 inside the order-2 sub-run (the outer deadline covers it)
    error_model: tolerance.ErrorModel = tolerance.DEFAULT_MODEL  # check(error_model=...)
    # where a comparison is inconclusive, find the inputs' kink elements and decide on the
    # others (:mod:`.kinks`); check() sets it, the catalog's runs keep their kink verdicts
    exclude_kinks: bool = False
    # each input's name where the inputs are nested or complex (``params['w']``, ``z.real``);
    # results carry it as ``input_path`` (None: inputs are named by position)
    input_paths: tuple[str, ...] | None = None
    resolution: bool = True  # the per-component stage (:mod:`.per_component`)


@dataclass(frozen=True)
class Identity:
    """The fields every result of one run carries."""

    backend: str
    device: str
    dtype: str
    name: str
    seed: int
    shapes: tuple[tuple[int, ...], ...]
    reproducer: str
    test_id: str
    input_paths: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Relabel:
    """How a run's results are reported under another run (order 2: the VJP of the VJP-as-a-
    function is reported as ``vjp_of_vjp``): the kinds it keeps (``kinds``: kind -> reported
    kind; ``keep``: kinds reported as they are; any other kind is dropped) and the details
    every result gets."""

    kinds: Mapping[CheckKind, CheckKind]
    keep: frozenset[CheckKind]
    details: Mapping[str, Any]


Message = str | Callable[[CheckResult], str]


class Recorder:
    """The append-only record of one run's results, in the order they are decided.

    A result is created once, complete: its message is a string or a function of the
    record's other fields (the verdict's wording needs the formatted values).  Results a
    :class:`Relabel` drops are returned but not recorded.

    The record is the one mutable thing a run shares (deliberately: every stage adds to it).
    It only grows, and only through :meth:`record` (a new result) and :meth:`absorb` (the
    finished results of a sub-run); :attr:`results` is a read-only snapshot.  Its identity,
    details and relabelling are fixed: :meth:`with_details` is another view of the same
    record."""

    def __init__(self, identity: Identity, details: Mapping[str, Any] | None = None,
                 relabel: Relabel | None = None) -> None:
        self.identity = identity
        self.details: Mapping[str, Any] = dict(details or {})
        self.relabel = relabel
        self._results: list[CheckResult] = []

    @property
    def results(self) -> tuple[CheckResult, ...]:
        """The results recorded so far, in order (a snapshot: it does not grow)."""
        return tuple(self._results)

    def with_details(self, extra: Mapping[str, Any]) -> Recorder:
        """The same record (results recorded through either go to both), every further result
        recorded through the returned one carrying ``extra`` in its details."""
        view = Recorder(self.identity, {**self.details, **extra}, self.relabel)
        view._results = self._results
        return view

    def absorb(self, results: Iterable[CheckResult]) -> None:
        """Append results decided elsewhere (a sub-run's, already complete and relabelled by
        its own record) as they are: neither this record's details nor its relabelling
        apply."""
        self._results.extend(results)

    def record(self, kind: CheckKind, status: Status, *, message: Message = "",
               paths: tuple[str, ...] | None = None, **kw: Any) -> CheckResult:
        i = kw.get("output_index")
        details = dict(kw.pop("details", {}))
        if paths is not None and i is not None and i < len(paths):
            details["output_path"] = paths[i]
        j, names = kw.get("input_index"), self.identity.input_paths
        if names is not None and j is not None and j < len(names):
            details["input_path"] = names[j]
        details.update(self.details)
        ident, keep = self.identity, True
        if self.relabel is not None:
            mapped = self.relabel.kinds.get(kind)
            keep = mapped is not None or kind in self.relabel.keep
            kind = mapped or kind
            details.update(self.relabel.details)
        r = CheckResult(
            kind=kind, status=status, backend=ident.backend, device=ident.device,
            dtype=ident.dtype, name=ident.name, seed=ident.seed, shapes=ident.shapes,
            reproducer=ident.reproducer, test_id=ident.test_id, details=details,
            message=message if isinstance(message, str) else "", **kw,
        )
        if not isinstance(message, str):
            r = replaced(r, message=message(r))
        if keep:
            self._results.append(r)
        return r


@dataclass(frozen=True)
class Finished:
    """Preparation ended the run: its results (already recorded) say why."""

    reason: str = ""
    # the function to run the pipeline on instead (its complex outputs as real and imaginary
    # parts: :func:`gradcheck.backends.trees.realified`), where preparation found it needs one
    retry: Callable | None = None


@dataclass(frozen=True)
class Prepared:
    """Everything the comparisons of one run share, fixed after preparation.

    Every field is fixed (tuples, frozen records) but :attr:`recorder`, the run's append-only
    record of results (:class:`Recorder`): the stages add to it, never replace it
    (:meth:`with_recorder` gives another view of the same record).  The NumPy arrays in the
    tuples are shared, not copied: the stages treat them as read-only."""

    backend: GuardedBackend
    fn: Callable
    device: str
    dtype: str
    cfg: CheckConfig
    recorder: Recorder
    args64: tuple[np.ndarray, ...]
    args_d: tuple[np.ndarray, ...]
    diff: tuple[int, ...]
    outs64: tuple[Any, ...]
    float_outs: tuple[int, ...]
    # engines without float64 (Backend.oracle_forward): FD runs on this NumPy forward and the
    # rule is checked with a rounding bound in ``rule_dtype``, the engine's widest dtype
    oracle: Callable | None = None
    rule_dtype: str = "float64"
    outs_d: tuple[np.ndarray, ...] = ()  # outputs in the dtype under test
    # each output's path in the function's output structure (a dict, a pytree), where the
    # adapter names them (Outputs.paths); results carry it as details["output_path"]
    output_paths: tuple[str, ...] | None = None
    # input index -> flat indices of its elements left out of every comparison: kinks found
    # by the oracle's one-sided differences (:mod:`.kinks`); the probes' tangents are 0 there
    excluded: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # the determinism check's second evaluation is left to the screen, which reads the
    # forward pass of its reverse path (:func:`.prepare.deterministic`)
    determinism_deferred: bool = False

    def excluded_mask(self, j: int) -> np.ndarray | None:
        """Input ``j``'s excluded elements as a flat boolean mask, or None for none."""
        for k, flat in self.excluded:
            if k == j and flat:
                mask = np.zeros(self.args64[j].size, dtype=bool)
                mask[list(flat)] = True
                return mask
        return None

    def result(self, kind: CheckKind, status: Status, *, message: Message = "", **kw: Any
               ) -> CheckResult:
        return self.recorder.record(kind, status, message=message, paths=self.output_paths,
                                    **kw)

    def with_recorder(self, recorder: Recorder) -> Prepared:
        return replace(self, recorder=recorder)

    def output(self, i: int) -> str:
        """``output 1``, or ``output ['a']`` where the adapter names outputs by path."""
        return output_name(self.output_paths, i)

    def input(self, k: int) -> str:
        """``input 1``, or ``input params['w']`` where the inputs are nested or complex."""
        return input_name(self.cfg.input_paths, k)


def output_name(paths: tuple[str, ...] | None, i: int) -> str:
    return f"output {paths[i]}" if paths is not None and i < len(paths) else f"output {i}"


def input_name(paths: tuple[str, ...] | None, k: int) -> str:
    return f"input {paths[k]}" if paths is not None and k < len(paths) else f"input {k}"


def is_float(a: np.ndarray) -> bool:
    return is_floating(a.dtype)  # ml_dtypes' bfloat16 included


def outputs(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)
