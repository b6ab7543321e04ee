"""Task bodies injected into the sweep's Ray executor (tests/sweep/test_ray_executor.py): an
op that is fine, one that hangs in native code, one whose worker dies after two batches, one
that waits to be killed with its node.  Importable by the cluster's worker processes (they
inherit the test's ``PYTHONPATH``)."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from gradcheck.core.results import CheckResult, Status
from gradcheck.core.taxonomy import CheckKind

#: where ``waits`` writes the node it runs on (the test then kills that node)
MARKER_ENV = "GRADCHECK_TEST_RAY_MARKER"


def _batch(backend: str, name: str, k: int) -> list[CheckResult]:
    return [CheckResult(kind=CheckKind.VJP, status=Status.PASSED, backend=backend,
                        dtype="float64", name=name, test_id=f"sweep:{backend}-{name}@p{k}")]


def body(backend: str, name: str, cfg: object) -> Iterator[list[CheckResult]]:
    """Two batches, then what the op's name asks for: ``fine*`` ends, ``hangs`` sleeps in C
    (a native hang no signal handler interrupts), ``dies`` SIGKILLs its worker, ``waits``
    writes its node's id to the marker file and sleeps (until its node is killed)."""
    if name == "limits":  # the per-check time limit, as the sweep's checks use it
        yield [_limits_probe(backend, name)]
        return
    for k in range(2):
        yield _batch(backend, name, k)
    if name == "hangs":
        ctypes.CDLL(None).sleep(3600)
    elif name == "dies":
        os.kill(os.getpid(), signal.SIGKILL)
    elif name == "waits":
        import ray

        Path(os.environ[MARKER_ENV]).write_text(ray.get_runtime_context().get_node_id())
        time.sleep(3600)


def _limits_probe(backend: str, name: str) -> CheckResult:
    """A result whose message says whether the task runs on its process's main thread and
    whether :func:`gradcheck.backends.limits.deadline` interrupts a 1 s sleep after 0.2 s."""
    import threading

    from gradcheck.backends import limits

    began = time.monotonic()
    timed_out = False
    try:
        with limits.deadline(0.2) as enforced:
            time.sleep(1.0)
    except limits.Timeout:
        timed_out = True
    main = threading.current_thread() is threading.main_thread()
    return CheckResult(kind=CheckKind.CALL, status=Status.PASSED, backend=backend, name=name,
                       message=f"main={main} enforced={enforced} timed_out={timed_out} "
                               f"seconds={time.monotonic() - began:.2f}")
