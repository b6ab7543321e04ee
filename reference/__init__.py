"""Independent implementations of the catalog ops, used as oracles.

* :mod:`gradcheck.reference.numpy`: forward and hand-derived VJP/JVP, NumPy/SciPy only (no AD
  engine).
* :mod:`gradcheck.reference.jax`: the same ops written for JAX, an independent AD engine.
"""
