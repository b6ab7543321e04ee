"""The harness: what runs :func:`gradcheck.check` over the op catalog and over an adapter.

* :mod:`~gradcheck.harness.runner`: one :class:`~gradcheck.harness.runner.Case` (backend x
  device x dtype x op x point) run through the checks, reproducible from its id
  (``python -m gradcheck.harness.runner CASE_ID``);
* :mod:`~gradcheck.harness.plan`: which cases each suite check runs, by profile (pure data
  selection, no pytest);
* :mod:`~gradcheck.harness.conformance`: the adapter conformance kit.

It sits above :mod:`gradcheck.api` and below the suites, the plugin, the report and the CLI
(the import contract in pyproject.toml).
"""
