"""The gradcheck pytest plugin: options, profiles and result collection (kept thin)."""

from __future__ import annotations

import pytest

PROFILES = ("quick", "ci", "thorough")

# the report hooks (streams, shards, xdist merge, HTML/JUnit) load with this plugin; they must be
# registered before the command line is parsed (not from pytest_configure) for their options
pytest_plugins = ["gradcheck._pytest_report"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradcheck", "gradient checking")
    group.addoption("--gradcheck-backend", action="append", default=None,
                    help="backend(s) to run the suites on (name or module:Attr); default: all "
                         "installed")
    group.addoption("--gradcheck-profile", choices=PROFILES, default=None,
                    help="suite size: quick (default), ci, thorough")
    group.addoption("--gradcheck-report-dir", default=None,
                    help="directory for results.jsonl and index.html")
    parser.addini("gradcheck_profile", "default suite profile", default="quick")
