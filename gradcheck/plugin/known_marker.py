"""The ``gradcheck_known`` marker: a test declares a known gradient discrepancy.

::

    @pytest.mark.gradcheck_known(reason="torch's backward of my_op drops a conj",
                                 link="https://github.com/me/ops/issues/12")
    def test_my_op():
        gradcheck.assert_gradients(my_op, x, backend="torch")

The test becomes a strict ``xfail(raises=GradientMismatch)``: it is expected to raise the
mismatch (any other exception fails it; passing fails it too, ``XPASS(strict)``: the
discrepancy is gone, remove the marker).  Its failed checks are reported as ``known`` with the
reason and link (:mod:`gradcheck.stream.expected`), in the HTML report, the JUnit file and the
counts, and do not fail ``gradcheck report``.
"""

from __future__ import annotations

from typing import Any

import pytest

from gradcheck.core.errors import GradientMismatch

MARKER = "gradcheck_known"
_REASON, _LINK = "gradcheck_known", "gradcheck_known_link"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(reason, link=None): a known gradient "
                                       "discrepancy: the test is a strict "
                                       "xfail(raises=GradientMismatch), its failed checks are "
                                       "reported as known with the reason and link")


def _declared(item: pytest.Item) -> tuple[str, str] | None:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None
    reason = marker.kwargs.get("reason", marker.args[0] if marker.args else None)
    link = marker.kwargs.get("link", marker.args[1] if len(marker.args) > 1 else None)
    if not isinstance(reason, str) or not reason.strip():
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{MARKER} needs reason='...' "
                                "(what the discrepancy is), e.g. "
                                f"@pytest.mark.{MARKER}(reason='drops a conj', link='https://...')")
    if link is not None and not isinstance(link, str):
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{MARKER}: link={link!r} must be "
                                "a string (a URL) or left out")
    return reason, link or ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        declared = _declared(item)
        if declared is None:
            continue
        reason, link = declared
        where = f" ({link})" if link else ""
        item.add_marker(pytest.mark.xfail(raises=GradientMismatch, strict=True,
                                          reason=f"known discrepancy: {reason}{where}"))
        item.user_properties += [(_REASON, reason), (_LINK, link)]  # travel with the reports


def declared_known(report: Any) -> dict[str, str]:
    """``{"known": reason, "link": link}`` of a test report whose test has the marker, else
    ``{}`` (read from its ``user_properties``, which xdist workers send along)."""
    props = dict(getattr(report, "user_properties", ()) or ())
    if not props.get(_REASON):
        return {}
    return {"known": str(props[_REASON]), "link": str(props.get(_LINK) or "")}
