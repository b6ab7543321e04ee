"""Known discrepancies of the MLX, tinygrad, Gorgonia and Candle adapters, as data attached to
the op specs.

The family modules (``gradcheck/ops/<family>.py``) hold the entries of the built-in engines;
the engines added later keep theirs here, one table per engine, so that a family module does not
grow an entry per engine and per point.  :func:`attach` adds them to the specs when the catalog
loads a family (:mod:`gradcheck.ops.catalog`); the suites then make the matching tests strict
xfails, exactly like the entries written on the specs.

Each table is a tuple of :class:`~gradcheck.core.known.KnownDiscrepancy` records, one per (op,
point, dtype) and cause: the checks (:class:`~gradcheck.CheckKind`) known to fail there, and the
cause's text from :data:`REASONS` (evidence and minimal reproducers:
docs/known-discrepancies.md, sections "MLX", "tinygrad", "Gorgonia" and "Candle").
:func:`known_for_op` splits them into one record per check, as the family modules write theirs.
The rows are what the full first-order survey of each engine measured (every mapped op, random
samples in float64 and float32, special points in float64), plus the ``ci`` profile's order-2
and search tests; nothing is listed that passed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gradcheck.core.known import KnownDiscrepancy
from gradcheck.core.taxonomy import CheckKind
from gradcheck.ops.spec import OpSpec

_DOC = "docs/known-discrepancies.md"

REASONS: dict[str, str] = {
    "mlx_f32_kernel": (
        "MLX 0.32 CPU evaluates this float64 function with float32-precision kernels (relative "
        "error ~1e-7..1e-6 against NumPy/SciPy float64; exp overflows at x > 88.7 as in "
        "float32): its derivative carries the same error and finite differences of its "
        "forward are noise-limited"),
    "mlx_f32_derivative": (
        "MLX 0.32 CPU computes this op's float64 derivative in float32 precision (the forward is "
        "exact: log2/log10' = 1/(x ln b) rounded to float32, tan' through a float32-precision "
        "cos, expm1's forward-mode rule through the float32-precision exp)"),
    "mlx_f32_underflow": (
        "MLX 0.32 CPU float64 exp is limited to the float32 normal range (exp(88.8) = inf and "
        "exp(-88) = 0 in float64), so this op's float64 forward or derivative is 0 or inf "
        "where float64 has a normal number"),
    "mlx_from_output": (
        "MLX 0.32's rule reuses the rounded output y (sigmoid' = y (1 - y), expm1' = y + 1): at "
        "saturation it cancels to exactly 0 while the true derivative is ~4e-18, below what "
        "finite differences resolve (torch and jax do the same, see their entries)"),
    "mlx_fast_kernel": (
        "MLX 0.32 CPU: mx.fast layer_norm / rms_norm / scaled_dot_product_attention and "
        "convolutions compute float64 inputs in float32 precision (forward and input "
        "gradient; relative error ~1e-7..5e-6), so FD checks of the float64 rule fail"),
    "mlx_conv_vjp_dtype": (
        "MLX 0.32 CPU: the weight/bias VJP of a strided, padded convolution raises "
        "'[Convolution::eval] got unsupported data type' for float64 (the float32 rule check "
        "runs in float64 too); the input gradient is float32-precision as for every conv"),
    "mlx_pool_jvp_of_jvp": (
        "MLX 0.32: forward over forward mode through nn.MaxPool1d raises '[gather_axis] "
        "Cannot calculate JVP with respect to indices. Use stop_gradient on indices' (the "
        "pool's JVP gathers with argmax indices it does not stop); first-order JVP and both "
        "reverse-over modes work"),
    "mlx_norm_overflow": (
        "MLX 0.32 linalg.norm is sqrt(sum x^2) without scaling: it overflows to inf for "
        "|x| ~ 1e200 and underflows to 0 for |x| ~ 1e-200 (float64), so is its gradient"),
    "mlx_atan2_overflow": (
        "MLX 0.32 atan2's derivative y/(x^2 + y^2) is evaluated without scaling: x^2 + y^2 "
        "overflows for |x|, |y| ~ 1e200 and the gradient is 0 instead of ~1e-200"),
    "tg_inverse_trig_poly": (
        "tinygrad 0.14 computes asin/acos with the 8-term polynomial of Abramowitz & Stegun "
        "4.4.46 (|error| <= 2e-8) and atan as asin(x / sqrt(1 + x^2)): the derivative of the "
        "approximation is off the true one by 5e-7..2.6e-6 relative (float64), invisible to "
        "finite differences of tinygrad's own forward, caught by the exact reference"),
    "tg_sign_at_zero": (
        "tinygrad 0.14 writes asin, atan (through asin) and erf as sign(x) * f(|x|); at x = 0 "
        "reverse mode gives sign'(0) f(0) + sign(0) f'(|0|) = 0, while the true derivative is "
        "1 (asin, atan) or 2/sqrt(pi) (erf)"),
    "tg_atan_large": (
        "tinygrad 0.14's atan(x) = asin(x / sqrt(1 + x^2)): for |x| = 1e8 the argument rounds "
        "to 1 and the gradient is nan (1e-16 exact); for |x| >= 1e154 x^2 overflows and the "
        "value itself is 0 instead of pi/2"),
    "tg_asinh_large": (
        "tinygrad 0.14's asinh(x) = log(x + sqrt(x^2 + 1)) cancels for large negative x: at "
        "x = -1e6 the value is off by 5e-7 and the derivative by 2e-4 (relative, float64)"),
    "tg_erf_poly": (
        "tinygrad 0.14 computes erf with Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7): float64 "
        "erf is off by 2e-6 relative, its derivative by 1.3e-5 (1.2 % at |x| = 6); the exact "
        "gelu inherits it"),
    "tg_saturation": (
        "tinygrad 0.14's sigmoid (1 / (1 + exp2(-x / ln 2))) and tanh (2 sigmoid(2x) - 1) lose "
        "the derivative at saturation: sigmoid'(40) = 0, tanh'(20.7) = 0 and tanh'(-20.7) = "
        "7.2e-35, while the true values are 4.25e-18 and 4.19e-18 (mpmath); below what finite "
        "differences resolve (sigmoid'(-40) is exact)"),
    "tg_softplus_cancel": (
        "tinygrad 0.14's softplus(-40) and logsigmoid(40) cancel to exactly 0 (true +-4.2e-18): "
        "the forward is flat there, so finite differences of it (0) disagree with the correct "
        "VJP (4.2e-18)"),
    "tg_exp_argument": (
        "tinygrad 0.14's exp(x) = exp2(x / ln 2): the rounding of the product is amplified by "
        "|x|, so exp(-700) and its derivative are off by 3e-14 relative (mpmath), 1.5x the "
        "float64 bound"),
    "tg_backward_const": (
        "tinygrad 0.14: a 0-d Tensor made from a NumPy or Python scalar is a CONST in the "
        "graph and Tensor.backward() leaves its .grad None, while Tensor.gradient returns the "
        "right value (the eager and functional paths disagree: a scalar parameter is silently "
        "not trained)"),
    "gg_log2_rule": (
        "Gorgonia v0.9.18's symbolic rule for Log2 (log2DiffExpr) divides the incoming gradient "
        "by x / ln 2 instead of x ln 2: d/dx log2(x) comes out ln(2)^2 = 0.48x the true "
        "1 / (x ln 2)"),
    "gg_rsqrt_rule": (
        "Gorgonia v0.9.18's symbolic rule for InverseSqrt (inverseSqrtDiffExpr) computes "
        "-g / (2 y^3) for y = x^-1/2 instead of -g y^3 / 2: off by a factor x^3"),
    "gg_logsumexp": (
        "Gorgonia v0.9.18's LogSumExp(a, axis) returns log(sum(exp(a - max)) + max) instead of "
        "log(sum(exp(a - max))) + max (wrong forward, hence a wrong gradient); for a matrix "
        "along axis 1 it cannot build (a - max is not broadcast: 'Shape mismatch: (3, 4) and "
        "(3)')"),
    "gg_softmax_row_max": (
        "gorgonia.org/tensor v0.9.24's SoftMax/LogSoftMax along the last axis start every "
        "row's max at the tensor's first element, not the row's: a row far below the first "
        "element underflows and softmax gives NaN (log-softmax -inf)"),
    "gg_from_output": (
        "Gorgonia v0.9.18 computes tanh' as 1 - y^2 from the rounded output: at saturation it "
        "is exactly 0 where the true derivative is ~1e-17 (torch and jax do the same)"),
    "gg_sigmoid_cutoff": (
        "Gorgonia v0.9.18's float64 sigmoid returns exactly 1 for x > 19, so softplus' = "
        "sigmoid(x) is 1 at x = 25 where the true derivative is 1 - 1.4e-11; that first "
        "derivative is flat there (finite differences of it: 0) while the symbolic second "
        "derivative is ~1e-11, near the true sigmoid'(25) = 1.4e-11"),
    "gg_norm_unscaled": (
        "Gorgonia v0.9.18's Norm(x, axis, 2) is sqrt(sum x^2) without scaling: it overflows "
        "to inf for |x| ~ 1e200 and underflows to 0 for |x| ~ 1e-200 (float64), so does its "
        "gradient (nan)"),
    # Candle 0.11.1 (CPU; adapters/candle): docs/known-discrepancies.md, section "Candle",
    # reproducers in adapters/candle/examples/repro.rs
    "candle_gelu_constants": (
        "Candle 0.11.1's gelu backward (both the erf GeluErf and the tanh Gelu) uses 6-digit "
        "constants (0.398942 for 1/sqrt(2 pi), 0.797885 for sqrt(2/pi), 0.0356774, 0.0535161): "
        "the derivative has a relative error of ~1e-7..3e-7 in float64 (gelu_erf'(1) = "
        "1.08331530, exact 1.08331547); the forward is exact"),
    "candle_maxpool_quarter": (
        "Candle 0.11.1's max_pool2d backward multiplies the upsampled gradient by the window's "
        "mean of the max mask (1/4 for a unique maximum in a 2x2 window) instead of dividing "
        "by the number of maxima: the gradient is 1/(kh kw) of the true one"),
    "candle_conv_transpose1d_batch": (
        "Candle 0.11.1 CPU conv_transpose1d reads batch elements b >= 1 with the wrong stride "
        "when it has more than one input channel, so conv1d's input gradient (and its kernel "
        "gradient) is wrong for every batch element after the first when batch > 1 and "
        "out_channels > 1 (the catalog's conv1d inputs: batch 2, 4 output channels)"),
    "candle_conv2d_out_padding": (
        "Candle 0.11.1's conv2d backward computes conv_transpose2d's output padding from the "
        "height only and uses it for both dimensions: with stride 2 on a non-square input "
        "(6x5) backward raises 'shape mismatch in add, lhs: [1, 2, 6, 5], rhs: [1, 2, 6, 6]'"),
    "candle_from_output": (
        "Candle 0.11.1's rule reuses the rounded output (tanh' = 1 - y^2, sigmoid' = y (1 - y), "
        "elu' = y + alpha for x <= 0): at saturation it cancels to 0 (or loses all digits) "
        "while the true derivative is ~1e-17, below what finite differences resolve (torch and "
        "jax do the same for tanh and sigmoid, see their entries)"),
    "candle_layer_norm_eps_f32": (
        "candle_nn::ops::layer_norm_slow takes eps as f32, so the float64 function computes "
        "with eps = 9.99999974738e-06 instead of 1e-5: its VJP differs from the NumPy "
        "reference by ~5e-13 relative (the rule itself agrees with finite differences)"),
}

_EXP = "mlx_f32_kernel"
_TRIG = "tg_inverse_trig_poly"
F64, F32 = "float64", "float32"
K = CheckKind


def _entry(backend: str) -> Callable[[str, str, str, tuple[CheckKind, ...], str],
                                     KnownDiscrepancy]:
    """The table row of ``backend``: the checks known to fail for ``op`` at ``point`` in
    ``dtype``, and why (``cause``: a key of :data:`REASONS`), as one record."""

    def row(op: str, point: str, dtype: str, checks: tuple[CheckKind, ...],
            cause: str) -> KnownDiscrepancy:
        return KnownDiscrepancy(backend, REASONS[cause], link=_DOC, subject=op, checks=checks,
                                dtypes=(dtype,), points=(point,))

    return row


_mlx = _entry("mlx")
_tg = _entry("tinygrad")
_gg = _entry("gorgonia")
_candle = _entry("candle")


MLX: tuple[KnownDiscrepancy, ...] = (
    _mlx("sin", "mixed", F64, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("sin", "random", F32, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.ROUNDING, K.VJP), _EXP),
    _mlx("sin", "random", F64, (K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("sin", "zero", F64, (K.JVP, K.VJP), _EXP),
    _mlx("cos", "random", F32, (K.JVP, K.VJP), _EXP),
    _mlx("cos", "random", F64, (K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("cos", "zero", F64, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.VJP), _EXP),
    _mlx("tan", "near_pole", F64, (K.REFERENCE,), "mlx_f32_derivative"),
    _mlx("tan", "random", F32, (K.JVP, K.VJP), "mlx_f32_derivative"),
    _mlx("tan", "random", F64, (K.JVP, K.REFERENCE, K.VJP), "mlx_f32_derivative"),
    _mlx("exp", "near_overflow", F64, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.REFERENCE, K.VJP),
        "mlx_f32_underflow"),
    _mlx("exp", "random", F32, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.ROUNDING, K.VJP), _EXP),
    _mlx("exp", "random", F64, (K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("exp", "underflow", F64, (K.REFERENCE,), "mlx_f32_underflow"),
    _mlx("expm1", "random", F32, (K.FWD_REV, K.JVP), "mlx_f32_derivative"),
    _mlx("expm1", "random", F64, (K.FWD_REV, K.JVP), "mlx_f32_derivative"),
    _mlx("expm1", "tiny", F64, (K.FWD_REV, K.JVP), "mlx_f32_derivative"),
    _mlx("expm1", "very_negative", F64, (K.FWD_REV,), "mlx_f32_derivative"),
    _mlx("expm1", "very_negative", F64, (K.REFERENCE,), "mlx_from_output"),
    _mlx("log2", "random", F32, (K.JVP, K.VJP), "mlx_f32_derivative"),
    _mlx("log2", "random", F64, (K.JVP, K.REFERENCE, K.VJP), "mlx_f32_derivative"),
    _mlx("log10", "random", F32, (K.JVP, K.VJP), "mlx_f32_derivative"),
    _mlx("log10", "random", F64, (K.JVP, K.REFERENCE, K.VJP), "mlx_f32_derivative"),
    _mlx("sigmoid", "random", F32, (K.JVP, K.VJP), _EXP),
    _mlx("sigmoid", "random", F64, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("sigmoid", "saturated", F64, (K.REFERENCE,), "mlx_from_output"),
    _mlx("sigmoid", "zero", F64, (K.JVP, K.VJP), _EXP),
    _mlx("logsigmoid", "random", F32, (K.JVP, K.VJP), _EXP),
    _mlx("logsigmoid", "random", F64, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("logsigmoid", "very_positive", F64, (K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("softplus", "random", F32, (K.JVP, K.VJP), _EXP),
    _mlx("softplus", "random", F64, (K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("softplus", "very_negative", F64, (K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("silu", "random", F32, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.ROUNDING, K.VJP), _EXP),
    _mlx("silu", "random", F64, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("gelu", "random", F32, (K.JVP, K.VJP), _EXP),
    _mlx("gelu", "random", F64, (K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("gelu", "very_negative", F64, (K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("elu", "random", F32, (K.JVP, K.VJP), _EXP),
    _mlx("elu", "random", F64, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("elu", "small_negative", F64, (K.REFERENCE,), _EXP),
    _mlx("elu", "very_negative", F64, (K.REFERENCE,), _EXP),
    _mlx("erf", "random", F32, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.ROUNDING, K.VJP), _EXP),
    _mlx("erf", "random", F64, (K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("erf", "saturated", F64, (K.REFERENCE,), _EXP),
    _mlx("erf", "zero", F64, (K.JVP, K.VJP), _EXP),
    _mlx("erfinv", "random", F32, (K.JVP, K.VJP), _EXP),
    _mlx("erfinv", "random", F64, (K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("erfinv", "saturated", F64, (K.REFERENCE,), _EXP),
    _mlx("erfinv", "zero", F64, (K.JVP, K.VJP), _EXP),
    _mlx("atan2", "huge", F64, (K.JVP, K.REFERENCE, K.VJP), "mlx_atan2_overflow"),
    _mlx("logaddexp", "random", F32, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.ROUNDING, K.VJP), _EXP),
    _mlx("logaddexp", "random", F64, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("logsumexp", "large", F64, (K.REFERENCE,), _EXP),
    _mlx("logsumexp", "minus_inf", F64, (K.REFERENCE,), _EXP),
    _mlx("logsumexp", "random", F64, (K.REFERENCE,), _EXP),
    _mlx("logsumexp_axis1", "minus_inf", F64, (K.REFERENCE,), _EXP),
    _mlx("logsumexp_axis1", "random", F64, (K.REFERENCE,), _EXP),
    _mlx("norm", "huge", F64, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.REFERENCE, K.VJP),
        "mlx_norm_overflow"),
    _mlx("norm", "tiny", F64, (K.REFERENCE,), "mlx_norm_overflow"),
    _mlx("norm_axis1", "tiny", F64, (K.REFERENCE,), "mlx_norm_overflow"),
    _mlx("logcumsumexp_axis1", "minus_inf", F64, (K.FWD_REV, K.REFERENCE), _EXP),
    _mlx("logcumsumexp_axis1", "random", F32, (K.FWD_REV, K.JVP, K.VJP), _EXP),
    _mlx("logcumsumexp_axis1", "random", F64, (K.FWD_REV, K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("softmax", "large_logits", F64, (K.REFERENCE,), "mlx_f32_underflow"),
    _mlx("softmax", "random", F64, (K.EAGER_FUNC, K.FWD_REV, K.JVP, K.REFERENCE, K.VJP), _EXP),
    _mlx("log_softmax", "large_logits", F64, (K.REFERENCE,), _EXP),
    _mlx("log_softmax", "random", F64, (K.REFERENCE,), _EXP),
    _mlx("cross_entropy", "random", F64, (K.REFERENCE,), _EXP),
    _mlx("bce_with_logits", "random", F64, (K.REFERENCE,), _EXP),
    _mlx("layer_norm", "random", F32, (K.FWD_REV,), "mlx_fast_kernel"),
    _mlx("layer_norm", "random", F64, (K.FWD_REV, K.JVP, K.JVP_OF_VJP, K.REFERENCE,
                                       K.SEARCH, K.VJP, K.VJP_OF_VJP),
        "mlx_fast_kernel"),
    _mlx("rms_norm", "random", F32, (K.FWD_REV, K.JVP, K.VJP), "mlx_fast_kernel"),
    _mlx("rms_norm", "random", F64, (K.JVP, K.REFERENCE, K.VJP), "mlx_fast_kernel"),
    _mlx("attention", "random", F32, (K.JVP, K.VJP), "mlx_fast_kernel"),
    _mlx("attention", "random", F64, (K.JVP, K.JVP_OF_JVP, K.JVP_OF_VJP, K.REFERENCE,
                                      K.SEARCH, K.VJP, K.VJP_OF_VJP),
        "mlx_fast_kernel"),
    _mlx("attention", "zero_query", F64, (K.JVP, K.VJP), "mlx_fast_kernel"),
    _mlx("attention_causal", "random", F32, (K.JVP, K.VJP), "mlx_fast_kernel"),
    _mlx("attention_causal", "random", F64, (K.JVP, K.REFERENCE, K.VJP), "mlx_fast_kernel"),
    _mlx("conv1d", "random", F32, (K.JVP, K.VJP), "mlx_fast_kernel"),
    _mlx("conv1d", "random", F64, (K.JVP, K.REFERENCE, K.VJP), "mlx_fast_kernel"),
    _mlx("conv1d_stride2_pad1", "random", F32, (K.JVP, K.VJP), "mlx_fast_kernel"),
    _mlx("conv1d_stride2_pad1", "random", F64, (K.JVP, K.REFERENCE, K.VJP), "mlx_fast_kernel"),
    _mlx("conv2d", "random", F32, (K.JVP, K.VJP), "mlx_fast_kernel"),
    _mlx("conv2d", "random", F64, (K.REFERENCE, K.VJP), "mlx_fast_kernel"),
    _mlx("conv2d_stride2_pad1", "random", F32, (K.JVP, K.VJP), "mlx_conv_vjp_dtype"),
    _mlx("conv2d_stride2_pad1", "random", F64, (K.JVP, K.JVP_OF_JVP, K.JVP_OF_VJP, K.REFERENCE,
                                                K.SEARCH, K.VJP, K.VJP_OF_VJP),
        "mlx_conv_vjp_dtype"),
    _mlx("max_pool1d_k3s1", "random", F64, (K.JVP_OF_JVP,), "mlx_pool_jvp_of_jvp"),
)

TINYGRAD: tuple[KnownDiscrepancy, ...] = (
    _tg("arcsin", "random", F64, (K.REFERENCE,), _TRIG),
    _tg("arcsin", "saturated", F64, (K.REFERENCE,), _TRIG),
    _tg("arcsin", "zero", F64, (K.REFERENCE, K.VJP), "tg_sign_at_zero"),
    _tg("arccos", "random", F64, (K.REFERENCE,), _TRIG),
    _tg("arccos", "saturated", F64, (K.REFERENCE,), _TRIG),
    _tg("arctan", "random", F64, (K.REFERENCE,), _TRIG),
    _tg("arctan", "saturated", F64, (K.REFERENCE, K.VJP), "tg_atan_large"),
    _tg("arctan", "zero", F64, (K.REFERENCE, K.VJP), "tg_sign_at_zero"),
    _tg("arcsinh", "saturated", F64, (K.REFERENCE, K.VJP), "tg_asinh_large"),
    _tg("erf", "random", F64, (K.REFERENCE,), "tg_erf_poly"),
    _tg("erf", "saturated", F64, (K.REFERENCE,), "tg_erf_poly"),
    _tg("erf", "zero", F64, (K.REFERENCE, K.VJP), "tg_sign_at_zero"),
    _tg("gelu", "random", F64, (K.REFERENCE,), "tg_erf_poly"),
    _tg("gelu", "very_negative", F64, (K.REFERENCE, K.VJP), "tg_erf_poly"),
    _tg("sigmoid", "saturated", F64, (K.REFERENCE,), "tg_saturation"),
    _tg("tanh", "saturated", F64, (K.REFERENCE,), "tg_saturation"),
    _tg("logsigmoid", "very_positive", F64, (K.VJP,), "tg_softplus_cancel"),
    _tg("softplus", "very_negative", F64, (K.VJP,), "tg_softplus_cancel"),
    _tg("exp", "underflow", F64, (K.REFERENCE,), "tg_exp_argument"),
    _tg("mul_scalar", "random", F32, (K.EAGER_FUNC,), "tg_backward_const"),
    _tg("mul_scalar", "random", F64, (K.EAGER_FUNC,), "tg_backward_const"),
)

GORGONIA: tuple[KnownDiscrepancy, ...] = (
    _gg("log2", "random", F32, (K.SEARCH, K.VJP), "gg_log2_rule"),
    _gg("log2", "random", F64, (K.REFERENCE, K.SEARCH, K.VJP), "gg_log2_rule"),
    _gg("rsqrt", "random", F32, (K.SEARCH, K.VJP), "gg_rsqrt_rule"),
    _gg("rsqrt", "random", F64, (K.REFERENCE, K.SEARCH, K.VJP), "gg_rsqrt_rule"),
    _gg("rsqrt", "small", F32, (K.VJP,), "gg_rsqrt_rule"),
    _gg("rsqrt", "small", F64, (K.REFERENCE, K.VJP), "gg_rsqrt_rule"),
    _gg("logsumexp", "large", F64, (K.REFERENCE,), "gg_logsumexp"),
    _gg("logsumexp", "minus_inf", F64, (K.REFERENCE,), "gg_logsumexp"),
    _gg("logsumexp", "random", F64, (K.REFERENCE,), "gg_logsumexp"),
    _gg("logsumexp_axis1", "minus_inf", F32, (K.ROUNDING, K.VJP, K.VJP_OF_VJP), "gg_logsumexp"),
    _gg("logsumexp_axis1", "minus_inf", F64, (K.REFERENCE, K.VJP, K.VJP_OF_VJP), "gg_logsumexp"),
    _gg("logsumexp_axis1", "random", F32, (K.ROUNDING, K.SEARCH, K.VJP, K.VJP_OF_VJP),
        "gg_logsumexp"),
    _gg("logsumexp_axis1", "random", F64, (K.REFERENCE, K.SEARCH, K.VJP, K.VJP_OF_VJP),
        "gg_logsumexp"),
    _gg("softmax", "large_logits", F64, (K.REFERENCE,), "gg_softmax_row_max"),
    _gg("log_softmax", "large_logits", F64, (K.REFERENCE,), "gg_softmax_row_max"),
    _gg("tanh", "saturated", F64, (K.REFERENCE, K.VJP), "gg_from_output"),
    _gg("softplus", "large", F32, (K.VJP_OF_VJP,), "gg_sigmoid_cutoff"),
    _gg("softplus", "large", F64, (K.REFERENCE, K.VJP_OF_VJP), "gg_sigmoid_cutoff"),
    _gg("norm", "huge", F64, (K.REFERENCE, K.VJP, K.VJP_OF_VJP), "gg_norm_unscaled"),
    _gg("norm", "tiny", F64, (K.REFERENCE,), "gg_norm_unscaled"),
    _gg("norm_axis1", "tiny", F64, (K.REFERENCE,), "gg_norm_unscaled"),
)

CANDLE: tuple[KnownDiscrepancy, ...] = (
    _candle("gelu", "random", F64, (K.VJP, K.REFERENCE), "candle_gelu_constants"),
    _candle("gelu", "very_negative", F64, (K.REFERENCE,), "candle_gelu_constants"),
    _candle("gelu", "random", F32, (K.VJP,), "candle_gelu_constants"),
    _candle("gelu_tanh", "random", F64, (K.VJP, K.REFERENCE), "candle_gelu_constants"),
    _candle("gelu_tanh", "random", F32, (K.VJP,), "candle_gelu_constants"),
    _candle("max_pool2d", "random", F64, (K.VJP, K.REFERENCE), "candle_maxpool_quarter"),
    _candle("max_pool2d", "random", F32, (K.VJP,), "candle_maxpool_quarter"),
    _candle("conv1d", "random", F64, (K.VJP, K.REFERENCE), "candle_conv_transpose1d_batch"),
    _candle("conv1d", "random", F32, (K.VJP,), "candle_conv_transpose1d_batch"),
    _candle("conv1d_stride2_pad1", "random", F64, (K.VJP, K.REFERENCE),
        "candle_conv_transpose1d_batch"),
    _candle("conv1d_stride2_pad1", "random", F32, (K.VJP,), "candle_conv_transpose1d_batch"),
    _candle("conv2d_stride2_pad1", "random", F64, (K.VJP, K.REFERENCE, K.SEARCH),
        "candle_conv2d_out_padding"),
    _candle("conv2d_stride2_pad1", "random", F32, (K.VJP,), "candle_conv2d_out_padding"),
    _candle("tanh", "saturated", F64, (K.REFERENCE, K.VJP), "candle_from_output"),
    _candle("sigmoid", "saturated", F64, (K.REFERENCE, K.VJP), "candle_from_output"),
    _candle("elu", "very_negative", F64, (K.REFERENCE, K.VJP), "candle_from_output"),
    _candle("layer_norm", "random", F64, (K.REFERENCE,), "candle_layer_norm_eps_f32"),
)


TABLES: dict[str, tuple[KnownDiscrepancy, ...]] = {"mlx": MLX, "tinygrad": TINYGRAD,
                                                   "gorgonia": GORGONIA, "candle": CANDLE}


def known_for_op(name: str) -> tuple[KnownDiscrepancy, ...]:
    """Every entry of these tables for op ``name``, split into one record per check
    (:meth:`KnownDiscrepancy.each`)."""
    return tuple(one for table in TABLES.values() for k in table if k.subject == name
                 for one in k.each())


def attach(specs: tuple[OpSpec, ...]) -> tuple[OpSpec, ...]:
    """``specs`` with the entries of these tables appended to their ``known``."""
    return tuple(replace(s, known=s.known + extra) if (extra := known_for_op(s.name)) else s
                 for s in specs)
