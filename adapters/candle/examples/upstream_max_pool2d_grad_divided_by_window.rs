//! Candle: the max_pool2d gradient at a unique window maximum is 1/(kh*kw), not 1.
//!
//! Standalone: candle-core only.  `cargo run --release --locked --offline --example
//! upstream_max_pool2d_grad_divided_by_window` (from adapters/candle).
//!
//! The backward of `Op::MaxPool2D` (candle-core/src/backprop.rs) multiplies the upsampled
//! gradient by `avg_pool2d(mask)`, the mean of the max mask over the window (1/4 for a 2x2
//! window with one maximum), where the count of maxima in the window (1) was meant.
//! Exact: d(sum(max_pool2d(x)))/dx is 1 at each window's unique maximum and 0 elsewhere.
//! Last line: `REPRODUCES` while the bug is there, `FIXED` once the gradient is 1.
use candle_core::{Device, Tensor, Var};

fn main() -> candle_core::Result<()> {
    let dev = Device::Cpu;
    // 0..15 in a 4x4 image: each 2x2 window has one maximum, at flat indices 5, 7, 13, 15
    let x = Var::from_tensor(&Tensor::arange(0f64, 16., &dev)?.reshape((1, 1, 4, 4))?)?;
    let grads = x.max_pool2d(2)?.sum_all()?.backward()?;
    let g = grads
        .get(&x)
        .expect("a gradient for x")
        .flatten_all()?
        .to_vec1::<f64>()?;
    let mut exact = vec![0f64; 16];
    for i in [5, 7, 13, 15] {
        exact[i] = 1.0;
    }
    println!(
        "candle-core {}",
        option_env!("CANDLE_CORE_VERSION").unwrap_or("(version: see Cargo.lock)")
    );
    println!("x = 0..15 as (1, 1, 4, 4); y = max_pool2d(x, 2).sum(); dy/dx");
    println!("candle: {g:?}");
    println!("exact:  {exact:?}");
    // control: a central difference of candle's own forward at index 5 (h = 0.5 keeps every
    // window's maximum where it is, so the difference quotient is exact)
    let f = |v: f64| -> candle_core::Result<f64> {
        let mut d: Vec<f64> = (0..16).map(|i| i as f64).collect();
        d[5] += v;
        Tensor::from_vec(d, (1, 1, 4, 4), &dev)?
            .max_pool2d(2)?
            .sum_all()?
            .to_scalar::<f64>()
    };
    println!(
        "central difference of candle's forward at index 5: {}",
        (f(0.5)? - f(-0.5)?) / 1.0
    );
    let worst = g
        .iter()
        .zip(&exact)
        .map(|(a, b)| (a - b).abs())
        .fold(0f64, f64::max);
    println!("max |candle - exact| = {worst}");
    println!("{}", if worst > 1e-12 { "REPRODUCES" } else { "FIXED" });
    Ok(())
}
