"""Special functions written for JAX (``jax.scipy.special``)."""

from __future__ import annotations

from gradcheck.engines.jax.ops._common import jsp

OPS = {
    "betaln": jsp.betaln,
    "polygamma1": lambda x: jsp.polygamma(1, x),
    "polygamma2": lambda x: jsp.polygamma(2, x),
    "xlogy": jsp.xlogy,
    "xlog1py": jsp.xlog1py,
    "log_ndtr": jsp.log_ndtr,
    "ndtri": jsp.ndtri,
    "ndtr": jsp.ndtr,
    "i0e": jsp.i0e,
    "i1": jsp.i1,
    "i1e": jsp.i1e,
    "entr": jsp.entr,
    "logit": jsp.logit,
    "multigammaln": lambda a: jsp.multigammaln(a, 3),
    "gammainc": jsp.gammainc,
    "gammaincc": jsp.gammaincc,
}
