"""The one line an adapter author adds to their test suite (one test per conformance section)."""

from gradcheck.testing import conformance_test

test_conformance = conformance_test("gradcheck_minigrad.adapter:MinigradBackend")
