"""Hand-derived rules of the ``nn`` building blocks: normalizations, ``linear``, attention and
embedding (NumPy only), for :mod:`gradcheck.reference.numpy.nn`."""

from __future__ import annotations

import numpy as np

from gradcheck.core.rules import NumpyFunction

_LN_EPS, _BN_EPS, _RMS_EPS = 1e-5, 1e-5, 1e-6

# -- normalizations -----------------------------------------------------------------------------


def _normalize(x: np.ndarray, axis: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``xh = (x - mean) r`` with ``r = 1 / sqrt(var + eps)`` (biased variance) along ``axis``."""
    xc = x - x.mean(axis=axis, keepdims=True)
    r = 1.0 / np.sqrt((xc * xc).mean(axis=axis, keepdims=True) + np.asarray(eps, x.dtype))
    return xc * r, r


def _normalize_adjoint(xh, r, g, axis):
    """dxh = r (dx - mean(dx) - xh mean(xh dx)): a symmetric map, so it is its own adjoint."""
    return r * (g - g.mean(axis=axis, keepdims=True) - xh * (xh * g).mean(axis=axis, keepdims=True))


def _affine_norm_op(name: str, axis: int, eps: float) -> NumpyFunction:
    """``y = xh * w + b`` on ``(N, D)`` inputs normalized along ``axis``; ``w`` and ``b`` have
    shape ``(D,)`` (so their gradients sum over axis 0 in both cases)."""

    def forward(x, w, b):
        return _normalize(x, axis, eps)[0] * w + b

    def jvp(args, tans):
        x, w, _ = args
        dx, dw, db = tans
        xh, r = _normalize(x, axis, eps)
        return (_normalize_adjoint(xh, r, dx, axis) * w + xh * dw + db,)

    def vjp(args, cts):
        x, w, _ = args
        g = cts[0]
        xh, r = _normalize(x, axis, eps)
        return (_normalize_adjoint(xh, r, g * w, axis), (g * xh).sum(axis=0), g.sum(axis=0))

    return NumpyFunction(forward, vjp, jvp, name=name)


def _rms(x):
    return 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + np.asarray(_RMS_EPS, x.dtype))


def _rms_norm_vjp(args, cts):
    """y = x r w, dr = -r^3 mean(x dx): the map dx -> r (dx - x r^2 mean(x dx)) is symmetric."""
    x, w = args
    r = _rms(x)
    gn = cts[0] * w
    return r * (gn - x * r * r * (x * gn).mean(axis=-1, keepdims=True)), (cts[0] * x * r).sum(0)


def _rms_norm_jvp(args, tans):
    x, w = args
    dx, dw = tans
    r = _rms(x)
    dn = r * (dx - x * r * r * (x * dx).mean(axis=-1, keepdims=True))
    return (dn * w + x * r * dw,)


# -- linear, attention, embedding ---------------------------------------------------------------


def _linear_vjp(args, cts):
    x, w, _ = args
    g = cts[0]
    return g @ w, g.T @ x, g.sum(axis=0)


def _linear_jvp(args, tans):
    x, w, _ = args
    dx, dw, db = tans
    return (dx @ w.T + x @ dw.T + db,)


def _attention_op(name: str, causal: bool) -> NumpyFunction:
    """o = softmax(q k^T / sqrt(d) [masked]) v.  With p the attention weights:
    dp = p (ds - <p, ds>), do = dp v + p dv; adjoint: gp = g v^T, gv = p^T g,
    gs = p (gp - <p, gp>), gq = gs k / sqrt(d), gk = gs^T q / sqrt(d)."""

    def weights(q, k):
        s = q @ np.swapaxes(k, -1, -2) / np.sqrt(np.asarray(q.shape[-1], q.dtype))
        if causal:
            t, n = s.shape[-2:]
            s = np.where(np.tril(np.ones((t, n), dtype=bool)), s, -np.inf)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def forward(q, k, v):
        return weights(q, k) @ v

    def jvp(args, tans):
        q, k, v = args
        dq, dk, dv = tans
        p = weights(q, k)
        scale = np.sqrt(np.asarray(q.shape[-1], q.dtype))
        ds = (dq @ np.swapaxes(k, -1, -2) + q @ np.swapaxes(dk, -1, -2)) / scale
        dp = p * (ds - (p * ds).sum(axis=-1, keepdims=True))
        return (dp @ v + p @ dv,)

    def vjp(args, cts):
        q, k, v = args
        g = cts[0]
        p = weights(q, k)
        scale = np.sqrt(np.asarray(q.shape[-1], q.dtype))
        gp = g @ np.swapaxes(v, -1, -2)
        gs = p * (gp - (p * gp).sum(axis=-1, keepdims=True))
        return gs @ k / scale, np.swapaxes(gs, -1, -2) @ q / scale, np.swapaxes(p, -1, -2) @ g

    return NumpyFunction(forward, vjp, jvp, name=name)


def _embedding_vjp(args, cts):
    idx, w = args
    gw = np.zeros_like(w)
    np.add.at(gw, idx, cts[0])  # a repeated token accumulates
    return None, gw


BLOCKS: dict[str, NumpyFunction] = {
    "layer_norm": _affine_norm_op("layer_norm", -1, _LN_EPS),
    "rms_norm": NumpyFunction(lambda x, w: x * _rms(x) * w, _rms_norm_vjp, _rms_norm_jvp,
                              name="rms_norm"),
    "batch_norm_train": _affine_norm_op("batch_norm_train", 0, _BN_EPS),
    "linear": NumpyFunction(lambda x, w, b: x @ w.T + b, _linear_vjp, _linear_jvp,
                            name="linear"),
    "attention": _attention_op("attention", causal=False),
    "attention_causal": _attention_op("attention_causal", causal=True),
    "embedding": NumpyFunction(lambda idx, w: w[idx], _embedding_vjp,
                               lambda a, t: (t[1][a[0]],), name="embedding"),
}
