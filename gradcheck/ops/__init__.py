"""The backend-neutral op catalog: specs as data, split into per-family modules."""

from gradcheck.ops.spec import KnownDiscrepancy, OpSpec, SpecialPoint, known, normal, point, uniform

__all__ = ["KnownDiscrepancy", "OpSpec", "SpecialPoint", "known", "normal", "point", "uniform"]
