"""Special functions: MLX 0.32 has none of the catalog's ``special`` family beyond ``erf`` /
``erfinv`` (family ``unary``), so every op here is skipped with the reason."""

from __future__ import annotations

OPS: dict = {}

_NONE = "MLX 0.32 has no {} function"
MISSING = {name: _NONE.format(name) for name in (
    "betaln", "polygamma1", "polygamma2", "xlogy", "xlog1py", "log_ndtr", "ndtri", "ndtr",
    "i0e", "i1", "i1e", "entr", "logit", "multigammaln", "gammainc", "gammaincc")}
