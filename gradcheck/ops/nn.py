"""Neural-network ops of the catalog: the tanh-GELU, normalizations, losses, convolutions, pooling,
attention and embedding.

Conventions every implementation follows (fixed parameters are part of the op name):

* softmax / log_softmax over the last axis; losses reduce with the mean;
* ``layer_norm`` (eps 1e-5) normalizes the last axis with a weight and a bias; ``rms_norm``
  (eps 1e-6) has a weight only; ``batch_norm_train`` (eps 1e-5) normalizes each channel of an
  ``(N, C)`` batch with the batch statistics (biased variance), as in training mode;
* convolutions are cross-correlations in NCW / NCHW layout with OIW / OIHW weights and a bias;
* ``attention`` is ``softmax(q k^T / sqrt(d)) v`` on ``(B, T, D)`` arrays without dropout;
  ``attention_causal`` masks keys after the query position;
* ``gelu_tanh`` is the tanh approximation of GELU (the exact ``gelu``, ``relu``, ``silu`` and
  ``elu`` belong to the unary family).
"""

from __future__ import annotations

import numpy as np

from gradcheck.ops.spec import KnownDiscrepancy, OpSpec, SpecialPoint, known, normal, point

FAMILY = "nn"


def _cross_entropy(n: int, c: int):
    def sample(rng):
        target = rng.integers(0, c, n).astype(np.int64)
        return rng.standard_normal((n, c)) * 2.0, target

    return sample


def _bce(shape):
    def sample(rng):
        return rng.standard_normal(shape) * 2.0, rng.uniform(0.05, 0.95, shape)

    return sample


def _huber(shape):
    """Pairs whose differences stay away from the kink of the second derivative at |d| = 1."""

    def sample(rng):
        a = rng.standard_normal(shape)
        d = rng.choice([-1.0, 1.0], shape) * rng.choice([0.5, 2.0], shape)
        return a, a - d + rng.uniform(-0.2, 0.2, shape)

    return sample


def _distinct_pool(shape):
    """Values distinct within every pooling window (a random permutation, spread out)."""

    def sample(rng):
        return (rng.permutation(int(np.prod(shape))).reshape(shape) * 0.25
                + rng.uniform(-0.05, 0.05, shape),)

    return sample


def _embedding(n: int, vocab: int, dim: int):
    def sample(rng):
        idx = rng.integers(0, vocab, n).astype(np.int64)
        idx[-1] = idx[0]  # a repeated token: its gradient rows add
        return idx, rng.standard_normal((vocab, dim))

    return sample


def _torch_nested_jvp(issue: int) -> tuple[KnownDiscrepancy, ...]:
    """torch's forward-AD rules of the normalizations use the saved mean / inverse std of the
    forward pass as constants, so forward over forward drops their derivatives."""
    return (KnownDiscrepancy(
        "torch", checks=("jvp_of_jvp",), link=f"https://github.com/pytorch/pytorch/issues/{issue}",
        reason="forward-over-forward AD drops a second-order term: the JVP rule reads the saved "
               "batch statistics as constants (umbrella pytorch/pytorch#198017)"),)


# Near-tied logits (500, 501) at a magnitude where the oracle's steps (~2^-3 |x|) cross the tie:
# only the exact comparisons (reference, cross-backend) judge this point; they check stability.
_LARGE_LOGITS = SpecialPoint(
    "large_logits", (np.array([[1000.0, 0.0, -1000.0, 3.0, -7.0], [500.0, 501.0, -3.0, 0.0, 1.0],
                               [-400.0, -401.0, 2.0, 0.0, 0.0]]),), fd=False)

# The box search shrinks to keys that are all equal, where d/dq is exactly 0 and the
# forward-vs-reverse rounding bound (built from the results' magnitudes, ~0) is ~1e-30 against
# rounding residues of 1e-16: a harness limitation (docs/known-discrepancies-linalg-shape-nn.md),
# so the search draws whole samples instead.
_ATTENTION_SEARCH = "softmax(q k^T / sqrt(d)) v; search draws from the sampler (see module)"

_POOL_TIES = np.array([[[[1.0, 1.0, 0.0, 2.0], [0.5, -1.0, 2.0, 2.0],
                         [3.0, 0.0, 0.0, 0.0], [3.0, 1.0, 0.0, 0.0]]]]).repeat(2, axis=1)
_POOL1D_TIES = np.array([[[0.0, 2.0, 2.0, 1.0, -1.0, 0.5]]]).repeat(2, axis=0).repeat(2, axis=1)

QUICK: tuple[str, ...] = ("layer_norm", "conv2d_stride2_pad1", "max_pool1d_k3s1", "attention")

SPECS: tuple[OpSpec, ...] = (
    OpSpec("softmax", FAMILY, 1, normal((3, 5), scale=2.0), special=(
        point("uniform_logits", np.zeros((3, 5))),
        _LARGE_LOGITS,
    )),
    OpSpec("log_softmax", FAMILY, 1, normal((3, 5), scale=2.0), special=(_LARGE_LOGITS,)),
    OpSpec("cross_entropy", FAMILY, 2, _cross_entropy(4, 5), diff_args=(0,),
           doc="mean over the batch of -log softmax(logits)[target]"),
    OpSpec("bce_with_logits", FAMILY, 2, _bce((3, 4)),
           doc="mean of softplus(x) - t x; the target t is differentiable too"),
    OpSpec("mse_loss", FAMILY, 2, normal((3, 4), (3, 4))),
    OpSpec("huber_loss", FAMILY, 2, _huber((3, 4)), doc="delta = 1, mean", special=(
        # |a - b| = 1 everywhere: C^1 there, so first order passes; the second derivative
        # jumps from 1 to 0 there, so the second-order checks must see the kink
        point("at_delta", np.zeros((3, 4)), np.where(np.arange(12).reshape(3, 4) % 2, 1.0, -1.0),
              expect_order2="inconclusive"),
    )),
    OpSpec("layer_norm", FAMILY, 3, normal((3, 5), (5,), (5,)), known=_torch_nested_jvp(196700)
           + known("torch", "oracle limitation (entry 38's class): the search reaches a row whose "
                   "values are all equal, where the exact derivative in the weight, x_hat, is "
                   "0; torch's backward recomputes x - mean and leaves 2^-44 (-5.7e-14 per "
                   "element) while finite differences and forward mode give 0, and the "
                   "rounding bound has no term for the cancellation x - mean",
                   checks=("search",), dtypes=("float64", "float32"), profile="thorough",
                   link="docs/known-discrepancies.md")),
    OpSpec("rms_norm", FAMILY, 2, normal((3, 5), (5,))),
    OpSpec("batch_norm_train", FAMILY, 3, normal((6, 3), (3,), (3,)),
           known=_torch_nested_jvp(196699) + (KnownDiscrepancy(
               "torch", checks=("search",), dtypes=("float32",), profile="thorough",
               link="docs/known-discrepancies.md",
               reason="oracle limitation (entry 38's class): the search reaches channels whose "
                      "batch is constant, where the exact derivative in the weight, x_hat, is 0; "
                      "the float64 forward's x - mean leaves 2^-44 and finite differences "
                      "measure that residue (-5.7e-14 per element), torch's backward gives 0, "
                      "and the rounding bound has no term for the cancellation x - mean"),)),
    OpSpec("linear", FAMILY, 3, normal((4, 3), (2, 3), (2,)), doc="x W^T + b"),
    OpSpec("conv1d", FAMILY, 3, normal((2, 3, 7), (4, 3, 3), (4,))),
    OpSpec("conv1d_stride2_pad1", FAMILY, 3, normal((2, 3, 8), (4, 3, 3), (4,))),
    OpSpec("conv2d", FAMILY, 3, normal((1, 2, 5, 5), (3, 2, 3, 3), (3,))),
    OpSpec("conv2d_stride2_pad1", FAMILY, 3, normal((1, 2, 6, 5), (3, 2, 3, 3), (3,))),
    OpSpec("max_pool2d", FAMILY, 1, _distinct_pool((1, 2, 4, 4)), doc="2x2 windows, stride 2",
           special=(SpecialPoint("ties", (_POOL_TIES,), expect="inconclusive"),)),
    OpSpec("max_pool1d_k3s1", FAMILY, 1, _distinct_pool((2, 2, 6)),
           doc="overlapping windows of 3, stride 1: one input feeds several outputs",
           special=(SpecialPoint("ties", (_POOL1D_TIES,), expect="inconclusive"),)),
    OpSpec("avg_pool2d", FAMILY, 1, normal((1, 2, 4, 6)), doc="2x2 windows, stride 2"),
    OpSpec("attention", FAMILY, 3, normal((2, 3, 4), (2, 5, 4), (2, 5, 3)), special=(
        # q = 0: uniform weights, and the derivative w.r.t. k is exactly 0
        point("zero_query", np.zeros((2, 3, 4)), np.arange(40.0).reshape(2, 5, 4) / 40,
              np.arange(30.0).reshape(2, 5, 3)),
    ), box_domain=False, doc=_ATTENTION_SEARCH),
    OpSpec("attention_causal", FAMILY, 3, normal((2, 4, 3), (2, 4, 3), (2, 4, 2)),
           box_domain=False, doc=_ATTENTION_SEARCH),
    OpSpec("embedding", FAMILY, 2, _embedding(5, 4, 3), diff_args=(1,),
           doc="W[idx] with a repeated index"),
    OpSpec("gelu_tanh", FAMILY, 1, normal((3, 4), scale=2.0),
           special=(point("zero", np.where(np.arange(12).reshape(3, 4) % 2, -0.0, 0.0)),),
           known=known("numpy", "oracle limitation: the float32 search reaches x = -5 "
                       "everywhere, where the function varies like exp(7 x); the projected "
                       "finite-difference estimate (steps 2^-3 max(1, rms x) = 0.625) is off "
                       "by 1e-5 relative with an error estimate of 1e-13, while the full "
                       "Jacobian's element-wise estimates and mpmath agree with the "
                       "hand-derived rule (the same holds in float64)",
                       checks=("search",), dtypes=("float32",), profile="thorough",
                       link="docs/known-discrepancies.md")),
)
