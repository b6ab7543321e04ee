"""Old module paths, kept importable for one release (0.2 removes them).

The package was re-laid by concept (``core``, ``oracle``, ``backends``, ``engines``, ``numeric``,
``semantics``, ``model_audit``, ...; docs/architecture.md).  Code written against the old paths
(``gradcheck.results``, ``gradcheck.backends.torch_backend``, ...) keeps working: importing an old
path returns the module at its new path (the same module object, so monkeypatching and
``isinstance`` behave as before) with a :class:`DeprecationWarning` naming the new path.
Nothing inside gradcheck imports an old path (an import contract forbids it).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

MOVED: dict[str, str] = {
    "gradcheck.sweep.extended": "gradcheck.oracle.extended",
    "gradcheck._child": "gradcheck.plugin.child",
    "gradcheck._environment": "gradcheck.stream.environment",
    "gradcheck._op_listing": "gradcheck.ops.listing",
    "gradcheck._pytest_report": "gradcheck.plugin.session_report",
    "gradcheck._selection": "gradcheck.plugin.selection",
    "gradcheck._stream_fields": "gradcheck.stream.fields",
    "gradcheck._stream_read": "gradcheck.stream.reader",
    "gradcheck.backends._jax_x64": "gradcheck.engines.jax.x64",
    "gradcheck.backends._training_jax": "gradcheck.engines.jax.training",
    "gradcheck.backends._training_numpy": "gradcheck.engines.numpy.training",
    "gradcheck.backends._training_ops": "gradcheck.backends.op_training",
    "gradcheck.backends._training_torch": "gradcheck.engines.torch.training",
    "gradcheck.backends.autograd_backend": "gradcheck.engines.autograd.backend",
    "gradcheck.backends.autograd_ops": "gradcheck.engines.autograd.ops",
    "gradcheck.backends.candle_backend": "gradcheck.engines.candle",
    "gradcheck.backends.gorgonia_backend": "gradcheck.engines.gorgonia",
    "gradcheck.backends.jax_backend": "gradcheck.engines.jax.backend",
    "gradcheck.backends.jax_ops": "gradcheck.engines.jax.ops",
    "gradcheck.backends.jax_ops._common": "gradcheck.engines.jax.ops._common",
    "gradcheck.backends.jax_ops.binary": "gradcheck.engines.jax.ops.binary",
    "gradcheck.backends.jax_ops.linalg": "gradcheck.engines.jax.ops.linalg",
    "gradcheck.backends.jax_ops.nn": "gradcheck.engines.jax.ops.nn",
    "gradcheck.backends.jax_ops.reduction": "gradcheck.engines.jax.ops.reduction",
    "gradcheck.backends.jax_ops.shape": "gradcheck.engines.jax.ops.shape",
    "gradcheck.backends.jax_ops.special": "gradcheck.engines.jax.ops.special",
    "gradcheck.backends.jax_ops.unary": "gradcheck.engines.jax.ops.unary",
    "gradcheck.backends.mlx_backend": "gradcheck.engines.mlx.backend",
    "gradcheck.backends.mlx_ops": "gradcheck.engines.mlx.ops",
    "gradcheck.backends.mlx_ops.binary": "gradcheck.engines.mlx.ops.binary",
    "gradcheck.backends.mlx_ops.linalg": "gradcheck.engines.mlx.ops.linalg",
    "gradcheck.backends.mlx_ops.nn": "gradcheck.engines.mlx.ops.nn",
    "gradcheck.backends.mlx_ops.reduction": "gradcheck.engines.mlx.ops.reduction",
    "gradcheck.backends.mlx_ops.shape": "gradcheck.engines.mlx.ops.shape",
    "gradcheck.backends.mlx_ops.special": "gradcheck.engines.mlx.ops.special",
    "gradcheck.backends.mlx_ops.unary": "gradcheck.engines.mlx.ops.unary",
    "gradcheck.backends.numpy_backend": "gradcheck.engines.numpy.backend",
    "gradcheck.backends.tensorflow_backend": "gradcheck.engines.tensorflow.backend",
    "gradcheck.backends.tensorflow_ops": "gradcheck.engines.tensorflow.ops",
    "gradcheck.backends.tfjs_backend": "gradcheck.engines.tfjs",
    "gradcheck.backends.tinygrad_backend": "gradcheck.engines.tinygrad.backend",
    "gradcheck.backends.tinygrad_ops": "gradcheck.engines.tinygrad.ops",
    "gradcheck.backends.tinygrad_ops.binary": "gradcheck.engines.tinygrad.ops.binary",
    "gradcheck.backends.tinygrad_ops.linalg": "gradcheck.engines.tinygrad.ops.linalg",
    "gradcheck.backends.tinygrad_ops.nn": "gradcheck.engines.tinygrad.ops.nn",
    "gradcheck.backends.tinygrad_ops.reduction": "gradcheck.engines.tinygrad.ops.reduction",
    "gradcheck.backends.tinygrad_ops.shape": "gradcheck.engines.tinygrad.ops.shape",
    "gradcheck.backends.tinygrad_ops.special": "gradcheck.engines.tinygrad.ops.special",
    "gradcheck.backends.tinygrad_ops.unary": "gradcheck.engines.tinygrad.ops.unary",
    "gradcheck.backends.torch_backend": "gradcheck.engines.torch.backend",
    "gradcheck.backends.torch_ops": "gradcheck.engines.torch.ops",
    "gradcheck.backends.torch_ops.binary": "gradcheck.engines.torch.ops.binary",
    "gradcheck.backends.torch_ops.linalg": "gradcheck.engines.torch.ops.linalg",
    "gradcheck.backends.torch_ops.nn": "gradcheck.engines.torch.ops.nn",
    "gradcheck.backends.torch_ops.reduction": "gradcheck.engines.torch.ops.reduction",
    "gradcheck.backends.torch_ops.shape": "gradcheck.engines.torch.ops.shape",
    "gradcheck.backends.torch_ops.special": "gradcheck.engines.torch.ops.special",
    "gradcheck.backends.torch_ops.unary": "gradcheck.engines.torch.ops.unary",
    "gradcheck.checks._accumulation": "gradcheck.semantics.accumulation",
    "gradcheck.checks._args": "gradcheck.core.arguments",
    "gradcheck.checks._audit_steps": "gradcheck.model_audit.steps",
    "gradcheck.checks._clip": "gradcheck.semantics.clip",
    "gradcheck.checks._dag": "gradcheck.semantics.dag",
    "gradcheck.checks._dense_jacobian": "gradcheck.oracle._stencil",
    "gradcheck.checks._detach": "gradcheck.semantics.detach",
    "gradcheck.checks._fanout": "gradcheck.semantics.fanout",
    "gradcheck.checks._intent": "gradcheck.model_audit.intent",
    "gradcheck.checks._limits": "gradcheck.backends.limits",
    "gradcheck.checks._optimizers": "gradcheck.model_audit.optimizers",
    "gradcheck.checks._path_noise": "gradcheck.numeric.path_noise",
    "gradcheck.checks._probing": "gradcheck.semantics.context",
    "gradcheck.checks._problems": "gradcheck.semantics.problems",
    "gradcheck.checks._scaled_estimate": "gradcheck.numeric.scaled_estimate",
    "gradcheck.checks._screen": "gradcheck.numeric.screen",
    "gradcheck.checks._second_estimate": "gradcheck.numeric.second_estimate",
    "gradcheck.checks._sparse_jacobian": "gradcheck.oracle.jacobian",
    "gradcheck.checks._state": "gradcheck.model_audit.state",
    "gradcheck.checks._step_diagnosis": "gradcheck.model_audit.step_diagnosis",
    "gradcheck.checks._step_model": "gradcheck.model_audit.step_model",
    "gradcheck.checks.agreement": "gradcheck.numeric.agreement",
    "gradcheck.checks.audit": "gradcheck.model_audit.flow",
    "gradcheck.checks.model_flow": "gradcheck.model_audit.model_flow",
    "gradcheck.checks.numeric": "gradcheck.numeric",
    "gradcheck.checks.numeric.compare": "gradcheck.numeric.compare",
    "gradcheck.checks.numeric.context": "gradcheck.numeric.context",
    "gradcheck.checks.numeric.first_order": "gradcheck.numeric.first_order",
    "gradcheck.checks.numeric.judge": "gradcheck.numeric.judge",
    "gradcheck.checks.numeric.localize": "gradcheck.numeric.localize",
    "gradcheck.checks.numeric.order2": "gradcheck.numeric.order2",
    "gradcheck.checks.numeric.prepare": "gradcheck.numeric.prepare",
    "gradcheck.checks.numeric.probes": "gradcheck.numeric.probes",
    "gradcheck.checks.numeric.run": "gradcheck.numeric.run",
    "gradcheck.checks.numeric.scalars": "gradcheck.numeric.scalars",
    "gradcheck.checks.numeric.stages": "gradcheck.numeric.stages",
    "gradcheck.checks.rounding": "gradcheck.numeric.rounding",
    "gradcheck.checks.semantics": "gradcheck.semantics.check",
    "gradcheck.checks.utilities": "gradcheck.semantics.utilities",
    "gradcheck.errors": "gradcheck.core.errors",
    "gradcheck.fd": "gradcheck.oracle.fd",
    "gradcheck.known": "gradcheck.core.known",
    "gradcheck.results": "gradcheck.core.results",
    "gradcheck.rules": "gradcheck.core.rules",
    "gradcheck.sweep._jax": "gradcheck.sweep.inventory.from_jax",
    "gradcheck.sweep._namespaces": "gradcheck.sweep.inventory.namespaces",
    "gradcheck.sweep._others": "gradcheck.sweep.inventory.from_others",
    "gradcheck.sweep._torch": "gradcheck.sweep.inventory.from_torch",
    "gradcheck.taxonomy": "gradcheck.core.taxonomy",
    "gradcheck.tolerance": "gradcheck.oracle.error_model",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.new}; the old path goes away in gradcheck 0.2",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """The module at the new path is already executed."""


class _Emptied(importlib.abc.Loader):
    """An old package with nothing left in it (``gradcheck.checks``): an empty package whose
    submodules are all old paths."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        module.__path__ = []
        module.__doc__ = "Emptied by the re-layout: every module it held moved (gradcheck._moved)."


#: old packages that no longer exist at all (their modules moved to several new packages)
EMPTIED = ("gradcheck.checks",)


class _OldPaths(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name in EMPTIED:
            return importlib.machinery.ModuleSpec(name, _Emptied(), is_package=True)
        new = MOVED.get(name)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(name, _Alias(new))


def install() -> None:
    """Resolve the old paths (idempotent)."""
    if not any(isinstance(f, _OldPaths) for f in sys.meta_path):
        sys.meta_path.insert(0, _OldPaths())
