"""Discovery at scale: sweep a backend's whole differentiable API at generated edge points.

``gradcheck sweep --backend torch --backend jax`` (:mod:`gradcheck.cli`) takes every
differentiable op the backend itself exposes (:mod:`.inventory`: torch's OpInfo ``op_db``, the
public jax namespaces probed with float arrays, other engines' namespaces), generates edge
points per op (:mod:`.points`), checks each with :func:`gradcheck.check` at orders 1 and 2 in
each declared dtype (:mod:`.runner`), and classifies every failure with independent evidence
(:mod:`.evidence`, :mod:`.triage`) and a minimal reproducer (:mod:`.reproducer`).  Results go
to the standard result stream, named by the op's qualified name; the report lists the
de-duplicated findings.  Confirmed ones can be recorded as data (:mod:`.known`).
"""

from __future__ import annotations

from gradcheck.sweep.inventory.discover import inventory
from gradcheck.sweep.inventory.records import Inventory, LeftOut, Op
from gradcheck.sweep.runner import PROFILES, SweepConfig, SweepOutcome, sweep
from gradcheck.sweep.triage import Finding, findings

__all__ = ["PROFILES", "Finding", "Inventory", "LeftOut", "Op", "SweepConfig", "SweepOutcome",
           "findings", "inventory", "sweep"]
