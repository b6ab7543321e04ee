"""What the pytest suites assert: the layer that imports pytest and Hypothesis.

* :mod:`~gradcheck.plugin.assertions`: a suite test's verdict for one planned case;
* :mod:`~gradcheck.plugin.search`: the Hypothesis search of an op's domain.

The plugin itself (options, parametrization) is :mod:`gradcheck.pytest_plugin`.
"""
