"""check_semantics() and the user-utility checks: accumulation, clipping, fan-out, stop points."""
