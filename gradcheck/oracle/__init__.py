"""The float64 finite-difference oracle and its error model (NumPy only)."""
