"""The engine-independent half of the named-model flow checks of the process engines.

A process child (Candle's ``candle.varmap_model``, Gorgonia's ``gorgonia.model``) builds a small
two-layer model in the engine and answers one request in three forms:

* ``{x, y, roundtrip, ...}``: the learnables' ``values`` (their shapes);
* ``{..., values}``: ``registered`` (the learnables' names), ``grads`` (name -> array or null
  when the engine holds none), ``loss``, ``grad_norm`` (computed by the child from the engine's
  gradient store) and ``cuts`` (each ``{stage, how, host, upstream[, engine]}``: where the child
  cut the flow and which learnables are upstream of that stage);
* ``{..., order, points}``: ``losses``, the loss at each row of ``points`` (the values laid out
  as the names in ``order``), for the central finite differences.

:func:`gradcheck.model_audit.model_flow.check_named_model` compares the extracted gradients with
FD by name, checks the reported global norm and turns the cut log into flow findings that name
the stage (this module is the engine half: what the requests are called and where a cut can
go).  Each engine module declares the :class:`ModelSpec` its child speaks and its backend class
carries it as ``model_spec``, so the model audit never names an engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelSpec:
    """How one engine's child names things (used in the result names and messages)."""

    method: str                 # the child request
    names: tuple[str, ...]      # the learnables the model is built with
    stages: tuple[str, ...]     # where a cut can be put
    prefix: str                 # result names: "<prefix>.names", "<prefix>.grad.<name>"
    by: str                     # how gradients are extracted, e.g. "VarMap name"
    store: str                  # where the engine keeps them, e.g. "the GradStore"
    vias: tuple[str, ...] = ()  # how a host round trip can read a stage back, e.g. "to_vec1"


def model_spec_of(backend: Any) -> ModelSpec:
    """The named model ``backend``'s child builds (its :attr:`ProcessBackend.model_spec
    <gradcheck.backends.process.ProcessBackend.model_spec>`); a ``ValueError`` when it has
    none."""
    spec = getattr(backend, "model_spec", None)
    if not isinstance(spec, ModelSpec):
        raise ValueError(f"backend {getattr(backend, 'name', backend)!r} declares no named "
                         "model (model_spec)")
    return spec


def validate_declared(spec: ModelSpec, declared: Sequence[str]) -> None:
    for s in declared:
        if s not in spec.stages:
            raise ValueError(f"declared stage {s!r}: one of {spec.stages}")
