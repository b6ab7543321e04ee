"""The training-step checks of a model checked over the model protocol (``model.step``).

Interface fixed by ``docs/protocol-model.md``; the checks themselves are being built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from gradcheck.core.results import CheckKind, Status
from gradcheck.semantics.context import ProbeContext


class ModelPeer(Protocol):
    """The answering side of the model protocol: ``request`` returns the ``result`` object, or
    raises :class:`~gradcheck.backends.wire.RemoteError` (``RemoteUnsupported`` for
    ``unsupported``) / :class:`~gradcheck.backends.wire.ProtocolError`."""

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]: ...


def check_step(ctx: ProbeContext, peer: ModelPeer, describe: Mapping[str, Any], dtype: str,
               grads: Mapping[str, Mapping[str, Any]], *, steps: int = 1,
               sample: int = 64) -> float | None:
    """Run the step experiments and emit ``grad_norm`` and ``step.*`` results; returns the
    gradient norm the user's step logged (None when it logs none)."""
    ctx.emit("step", Status.SKIPPED, "the step checks are not built yet", kind=CheckKind.SEMANTIC,
             dtype=dtype)
    return None
