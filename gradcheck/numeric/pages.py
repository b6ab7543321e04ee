"""NumPy's transparent-huge-page hint, off while a check runs (:func:`small_pages`).

NumPy asks the kernel for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every array
of 4 MB or more.  Where the kernel's ``transparent_hugepage/defrag`` setting stalls such a
fault until a 2 MB page is compacted (``madvise``, the common default, ``always``,
``defer+madvise``), the first touch of a large array can cost many times the arithmetic on
it: on the machines this project is measured on, 9.9 ms per MB of 80 MB arrays against
0.58 ms without the hint (``python benchmarks/first_touch.py``; 8 MB arrays, where the hint
helps, 0.30 ms with it and 0.70 without: the check at n = 1e6 shows no difference above its
noise), so that half of the default check's CPU time at n = 1e7 was page faults
(``docs/cost-model.md``, "Where the time goes at 1e7").  A check allocates its large arrays
once, reads them a few times and drops them: huge pages buy it little.  The hint is a
performance hint only; no value changes with it.

The previous setting is restored when the last check running in the process ends (checks on
several threads share one switch); where the user set ``NUMPY_MADVISE_HUGEPAGE`` themselves,
or this NumPy has no switch, nothing is changed.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: NumPy's own environment switch for the hint: a user who set it decides
ENVIRONMENT = "NUMPY_MADVISE_HUGEPAGE"

_lock = threading.Lock()
_depth = 0
_previous = True  # the setting before the first of the checks now running


@functools.cache
def _switch() -> Callable[[bool], bool] | None:
    """NumPy's setter of the hint (it returns the previous setting), where it has one."""
    try:
        from numpy._core import multiarray
    except ImportError:  # NumPy < 2
        try:
            from numpy.core import multiarray  # type: ignore[no-redef]
        except ImportError:
            return None
    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    return setter if callable(setter) else None


@contextmanager
def small_pages() -> Iterator[None]:
    """NumPy's huge-page hint off inside the block (module docstring), restored after."""
    global _depth, _previous
    setter = None if ENVIRONMENT in os.environ else _switch()
    if setter is None:
        yield
        return
    with _lock:
        if _depth == 0:
            _previous = bool(setter(False))
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                setter(_previous)
