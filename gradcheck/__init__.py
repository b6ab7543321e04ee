"""gradcheck: verify gradients numerically (finite-difference oracle with an error model) and
semantically (accumulation, clipping, fan-out, stop-gradient) on any autodiff backend.

Quick start::

    import gradcheck
    report = gradcheck.check(my_fn, x, w, backend="torch")
    assert report.passed, report.summary()
    gradcheck.assert_gradients(my_fn, x, w, backend="jax", dtype="float32")

``import gradcheck`` imports neither torch nor jax: adapters load on first use.
"""

from gradcheck import (
    _layout,  # noqa: F401  (first: gradcheck.reference/.suites in a source checkout)
    _moved,
)
from gradcheck._version import __version__
from gradcheck.api import assert_gradients, check, format_failure
from gradcheck.backends import (
    Accumulation,
    Backend,
    Semantics,
    get_backend,
    installed_backends,
    known_backends,
)
from gradcheck.backends.training import ClipSemantics, CutPoint, NumpyLoss, TrainingHooks
from gradcheck.core.errors import GradcheckError, GradientMismatch, InvalidArgument, NothingDecided
from gradcheck.core.results import CheckKind, CheckResult, Report, Status, WorstElement
from gradcheck.core.rules import NumpyFunction
from gradcheck.model_audit.flow import (
    AfterBackward,
    AuditReport,
    FlowStatus,
    ParameterFlow,
    TrainStep,
    audit,
)
from gradcheck.model_audit.intent import stopped, surrogate
from gradcheck.model_audit.optimizers import SGD, Adam, AdamW
from gradcheck.model_audit.remote import audit_process
from gradcheck.model_audit.step_model import TargetUpdate, Tie
from gradcheck.oracle.error_model import ErrorModel
from gradcheck.semantics.check import check_semantics, semantics_table
from gradcheck.semantics.context import BugClass
from gradcheck.semantics.utilities import (
    check_accumulation_function,
    check_clip_function,
    check_grad_norm_function,
)

_moved.install()  # the pre-0.2 module paths (gradcheck.core.results, ...) still import

__all__ = [
    "Accumulation",
    "Adam",
    "AdamW",
    "AfterBackward",
    "AuditReport",
    "SGD",
    "TargetUpdate",
    "Tie",
    "stopped",
    "surrogate",
    "BugClass",
    "ClipSemantics",
    "CutPoint",
    "FlowStatus",
    "NumpyLoss",
    "ParameterFlow",
    "TrainStep",
    "TrainingHooks",
    "audit",
    "audit_process",
    "check_accumulation_function",
    "check_clip_function",
    "check_grad_norm_function",
    "check_semantics",
    "semantics_table",
    "Backend",
    "CheckKind",
    "CheckResult",
    "ErrorModel",
    "GradcheckError",
    "GradientMismatch",
    "InvalidArgument",
    "NothingDecided",
    "NumpyFunction",
    "Report",
    "Semantics",
    "Status",
    "WorstElement",
    "__version__",
    "assert_gradients",
    "check",
    "format_failure",
    "get_backend",
    "installed_backends",
    "known_backends",
]


def _report_the_public_module() -> None:
    """The public classes say ``gradcheck`` is where they live (reprs, tracebacks, docs), not
    the private module that defines them; ``gradcheck.X`` imports each of them back."""
    for name in __all__:
        obj = globals()[name]
        if isinstance(obj, type):
            obj.__module__ = __name__


_report_the_public_module()
