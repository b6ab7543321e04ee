"""A small per-adapter cache of things built from a user's function (compiled transforms,
"this function cannot be vectorized" flags), keyed by the function object itself.

Keys are ``(id(fn), key)`` and every entry holds a strong reference to ``fn``: while an entry
lives, no other object can reuse that id, and a lookup also checks ``entry_fn is fn``, so two
different functions never share an entry, even if they compare equal.  The cache is bounded
(least recently used entries go first), which also bounds the functions it keeps alive.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

_MISSING = object()


class FunctionCache:
    """``get(fn, key, build)``: the value built for ``(fn, key)``, building it on first use."""

    def __init__(self, size: int = 128) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[int, Hashable], tuple[Any, Any]] = OrderedDict()
        self.builds = 0  # how many values were built (a hit builds nothing): for tests

    def get(self, fn: Any, key: Hashable, build: Callable[[], Any]) -> Any:
        value = self.peek(fn, key)
        if value is _MISSING:
            value = build()
            self.builds += 1
            self.put(fn, key, value)
        return value

    def peek(self, fn: Any, key: Hashable) -> Any:
        """The cached value, or the module's ``_MISSING`` sentinel (see :func:`missing`)."""
        entry = self._entries.get((id(fn), key))
        if entry is None or entry[0] is not fn:
            return _MISSING
        self._entries.move_to_end((id(fn), key))
        return entry[1]

    def put(self, fn: Any, key: Hashable, value: Any) -> None:
        self._entries[(id(fn), key)] = (fn, value)
        self._entries.move_to_end((id(fn), key))
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


def missing(value: Any) -> bool:
    """True if ``value`` is the sentinel :meth:`FunctionCache.peek` returns on a miss."""
    return value is _MISSING
