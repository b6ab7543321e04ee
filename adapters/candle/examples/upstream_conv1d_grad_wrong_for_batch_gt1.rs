//! Candle: the conv1d input gradient is wrong for batch elements b >= 1 when batch > 1 and
//! out_channels > 1.
//!
//! Standalone: candle-core only.  `cargo run --release --locked --offline --example
//! upstream_conv1d_grad_wrong_for_batch_gt1` (from adapters/candle).
//!
//! conv1d's backward computes the input gradient with `conv_transpose1d`; on the CPU,
//! conv_transpose1d reads batch element b >= 1 of its input with the wrong stride when that
//! input has more than one channel (here: the conv1d's out_channels), so every batch element
//! after the first gets a wrong gradient (the first is right).  The kernel gradient is wrong
//! for the same inputs too.  The direct call to conv_transpose1d shows the same numbers.
//! Exact (closed form, kernel size 1): dL/dx[b, 0, t] = sum_o k[o] * g[b, o, t] for
//! L = sum(conv1d(x, k) * g).
//! Last line: `REPRODUCES` while the bug is there, `FIXED` once both batch elements are right.
use candle_core::{DType, Device, Tensor, Var};

fn main() -> candle_core::Result<()> {
    let dev = Device::Cpu;
    let (batch, c_out, len) = (2usize, 2usize, 4usize);
    let kernel = [1f64, 10.]; // (c_out = 2, c_in = 1, k = 1)
    let k = Tensor::new(&kernel, &dev)?.reshape((c_out, 1, 1))?;
    let g_data: Vec<f64> = (0..batch * c_out * len).map(|i| i as f64).collect();
    let g = Tensor::from_vec(g_data.clone(), (batch, c_out, len), &dev)?; // upstream gradient
    let x = Var::from_tensor(&Tensor::zeros((batch, 1, len), DType::F64, &dev)?)?;
    let grads = x
        .conv1d(&k, 0, 1, 1, 1)?
        .broadcast_mul(&g)?
        .sum_all()?
        .backward()?;
    let dx = grads.get(&x).expect("a gradient for x").to_vec3::<f64>()?;
    let direct = g.conv_transpose1d(&k, 0, 0, 1, 1, 1)?.to_vec3::<f64>()?;
    let mut exact = vec![vec![vec![0f64; len]]; batch];
    for (b, row) in exact.iter_mut().enumerate() {
        for t in 0..len {
            row[0][t] = (0..c_out)
                .map(|o| kernel[o] * g_data[(b * c_out + o) * len + t])
                .sum();
        }
    }
    println!(
        "candle-core {}",
        option_env!("CANDLE_CORE_VERSION").unwrap_or("(version: see Cargo.lock)")
    );
    println!("x: zeros (batch 2, 1, 4); k = [1, 10] as (2, 1, 1); g = 0..15 as (2, 2, 4)");
    println!("d/dx sum(conv1d(x, k) * g)");
    println!("candle:                {dx:?}");
    println!("conv_transpose1d(g, k): {direct:?}");
    println!("exact:                 {exact:?}");
    // control: L is linear in x, so a central difference of candle's own forward is exact
    let loss = |b: usize, v: f64| -> candle_core::Result<f64> {
        let mut d = vec![0f64; batch * len];
        d[b * len] = v;
        let xv = Tensor::from_vec(d, (batch, 1, len), &dev)?;
        xv.conv1d(&k, 0, 1, 1, 1)?
            .broadcast_mul(&g)?
            .sum_all()?
            .to_scalar::<f64>()
    };
    println!(
        "central difference of candle's forward at x[b, 0, 0], b = 0, 1: {}, {}",
        (loss(0, 1.0)? - loss(0, -1.0)?) / 2.0,
        (loss(1, 1.0)? - loss(1, -1.0)?) / 2.0
    );
    let mut worst = 0f64;
    for (a, e) in dx
        .iter()
        .flatten()
        .flatten()
        .zip(exact.iter().flatten().flatten())
    {
        worst = worst.max((a - e).abs());
    }
    println!("max |candle - exact| = {worst}");
    println!("{}", if worst > 1e-12 { "REPRODUCES" } else { "FIXED" });
    Ok(())
}
