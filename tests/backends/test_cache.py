"""The compiled-transform cache of the backends (gradcheck/backends/_cache.py); what it saves is
counted in tests/project/test_performance_invariants.py."""

from __future__ import annotations

from gradcheck.backends._cache import FunctionCache, missing


def test_function_cache_is_keyed_by_identity_and_bounded():
    class Same:
        def __eq__(self, other):
            return True

        def __hash__(self):
            return 0

    a, b = Same(), Same()
    cache = FunctionCache(size=2)
    assert cache.get(a, "k", lambda: "for a") == "for a"
    assert cache.get(b, "k", lambda: "for b") == "for b"
    assert cache.get(a, "k", lambda: "rebuilt") == "for a" and cache.builds == 2
    cache.get(object(), "k", lambda: "third")  # evicts the least recently used (b)
    assert missing(cache.peek(b, "k")) and len(cache) == 2
