"""Independent implementations of the catalog ops, used as oracles.

* :mod:`gradcheck.reference.numpy`: forward and hand-derived VJP/JVP, NumPy/SciPy only (no AD
  engine).

The reference depends on the bottom layer only (:mod:`gradcheck.core.rules` for
:class:`~gradcheck.NumpyFunction`); the ``numpy`` backend runs these rules, finding them through
the catalog's registry of implementations (:data:`gradcheck.ops.catalog.IMPLEMENTATIONS`), like
every other backend finds its op table.  The JAX versions of the ops are the ``jax`` backend's
own op table (``gradcheck/backends/jax_ops``), like ``torch_ops``: code under test, not oracle.
"""
