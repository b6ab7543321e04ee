//! Candle: the gelu gradients (erf form `gelu_erf` and tanh form `gelu`) use 6-digit constants.
//!
//! Standalone: candle-core only.  `cargo run --release --locked --offline --example
//! upstream_gelu_grad_six_digit_constants` (from adapters/candle).
//!
//! The backward of `UnaryOp::GeluErf` and `UnaryOp::Gelu` (candle-core/src/backprop.rs)
//! writes 1/sqrt(2 pi) as 0.398942, sqrt(2/pi) as 0.797885 and their products with 0.044715
//! as 0.0356774 and 0.0535161, so the float64 derivative is off by ~1e-7 relative (float64
//! resolves 1e-16).  The forward uses full-precision constants, so the gradient is not the
//! derivative of the function candle computes.
//! Exact (closed forms, x = 1):
//!   gelu_erf'(x) = Phi(x) + x phi(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)
//!   gelu'(x) (tanh form, u = sqrt(2/pi) (x + 0.044715 x^3)) =
//!       0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//! Last line: `REPRODUCES` while either derivative is off by more than 1e-13 relative, else `FIXED`.
use candle_core::{Device, Tensor, Var};
use std::f64::consts::PI;

fn main() -> candle_core::Result<()> {
    let dev = Device::Cpu;
    let x0 = 1.0f64;
    let x = Var::from_tensor(&Tensor::new(&[x0], &dev)?)?;
    let g_erf = x
        .gelu_erf()?
        .sum_all()?
        .backward()?
        .get(&x)
        .expect("a gradient")
        .to_vec1::<f64>()?[0];
    let g_tanh = x
        .gelu()?
        .sum_all()?
        .backward()?
        .get(&x)
        .expect("a gradient")
        .to_vec1::<f64>()?[0];

    let exact_erf =
        0.5 * (1.0 + erf(x0 / 2f64.sqrt())) + x0 * (-0.5 * x0 * x0).exp() / (2.0 * PI).sqrt();
    let c = (2.0 / PI).sqrt();
    let t = (c * (x0 + 0.044715 * x0 * x0 * x0)).tanh();
    let exact_tanh =
        0.5 * (1.0 + t) + 0.5 * x0 * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x0 * x0);

    println!(
        "candle-core {}",
        option_env!("CANDLE_CORE_VERSION").unwrap_or("(version: see Cargo.lock)")
    );
    let rel_erf = ((g_erf - exact_erf) / exact_erf).abs();
    let rel_tanh = ((g_tanh - exact_tanh) / exact_tanh).abs();
    println!(
        "gelu_erf'(1): candle {g_erf:.17}, exact {exact_erf:.17}, relative error {rel_erf:.2e}"
    );
    println!("gelu'(1) (tanh): candle {g_tanh:.17}, exact {exact_tanh:.17}, relative error {rel_tanh:.2e}");
    // control: central differences of candle's own forward (h = 1e-5: truncation and rounding
    // both ~1e-11) agree with the closed forms, not with candle's gradients
    let fd = |tanh_form: bool| -> candle_core::Result<f64> {
        let h = 1e-5;
        let t = Tensor::new(&[x0 - h, x0 + h], &dev)?;
        let y = if tanh_form { t.gelu()? } else { t.gelu_erf()? }.to_vec1::<f64>()?;
        Ok((y[1] - y[0]) / (2.0 * h))
    };
    println!(
        "central differences of candle's forward: gelu_erf {:.12}, gelu {:.12}",
        fd(false)?,
        fd(true)?
    );
    println!(
        "{}",
        if rel_erf.max(rel_tanh) > 1e-13 {
            "REPRODUCES"
        } else {
            "FIXED"
        }
    );
    Ok(())
}

/// erf by its Maclaurin series; at |x| <= 1 it converges to full float64 precision in < 30 terms.
fn erf(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..60 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    2.0 / PI.sqrt() * sum
}
