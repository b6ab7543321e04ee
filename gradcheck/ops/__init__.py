"""The backend-neutral op catalog: specs as data, split into per-family modules."""

from .spec import KnownDiscrepancy, OpSpec, SpecialPoint, known, normal, point, uniform

__all__ = ["KnownDiscrepancy", "OpSpec", "SpecialPoint", "known", "normal", "point", "uniform"]
