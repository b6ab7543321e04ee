"""The vocabulary: results, check kinds, known discrepancies, dtypes and errors (no numerics, no engines)."""
